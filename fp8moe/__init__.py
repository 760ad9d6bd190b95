"""fp8moe: Triton kernels for FP8 rowwise MoE quantization, bit-exact twins of the fp8ref reference ops."""

from fp8moe.backend import Backend, backend_for, use_interpreter_if_no_gpu

# Before any @triton.jit decorator runs: without a GPU, kernels run in the Triton interpreter (same bytes).
use_interpreter_if_no_gpu()

__all__ = ["Backend", "backend_for"]
