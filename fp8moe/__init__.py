"""fp8moe: Triton kernels for FP8 rowwise MoE quantization, bit-exact twins of the fp8ref reference ops."""

from fp8moe.backend import Backend, backend_for, use_interpreter_if_no_gpu

# Before any @triton.jit decorator runs: without a GPU, kernels run in the Triton interpreter (same bytes).
use_interpreter_if_no_gpu()

from fp8moe.frozen_weights import frozen_weights  # noqa: E402
from fp8moe.grouped_mm import grouped_mm  # noqa: E402  (shadows the submodule name: import its helpers from it)
from fp8moe.ops import (  # noqa: E402  (kernels are defined on import: after the interpreter switch above)
    colwise_3d_and_transpose_rhs,
    colwise_3d_scale_and_cast,
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
    rowwise_2d_scale_and_cast,
    rowwise_3d_transpose_rhs,
    rowwise_and_per_group_colwise,
)

__all__ = [
    "Backend",
    "backend_for",
    "colwise_3d_and_transpose_rhs",
    "colwise_3d_scale_and_cast",
    "frozen_weights",
    "grouped_mm",
    "per_group_colwise_scales",
    "per_group_colwise_scales_dual",
    "per_group_rowwise_scales",
    "rowwise_2d_scale_and_cast",
    "rowwise_3d_transpose_rhs",
    "rowwise_and_per_group_colwise",
]
