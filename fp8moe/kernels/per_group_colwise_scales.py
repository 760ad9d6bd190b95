"""Triton twin of fp8ref.ops.per_group_colwise_scales: x (Ktot, N) jagged along the rows by offs.

Per column per group is per row per group of the transposed view: the (Ktot, N) input seen as x.t() (N, Ktot), and
the column-major (Ktot, N) output (strides (1, Ktot)) is exactly the transpose of a row-major (N, Ktot) tensor. So
this op is a shared per-group kernel (fp8moe.kernels._per_group, _group_chunks or _group_tiles: see
fp8moe.configs.PER_GROUP_KERNEL) on x.t(), with q returned as a view of its output; no data moves on the host. Rows
past offs[-1] belong to no group and are left unwritten (fp8ref writes 0x00 there; comparisons exclude them, SPEC
§4).
"""

from __future__ import annotations

import torch

from fp8moe import replay
from fp8moe.backend import Backend
from fp8moe.kernels._jagged import cooperative_launcher
from fp8moe.kernels._per_group import launch_jagged_rows

__all__ = ["launch"]


@replay.replayable
def launch(
    x: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate the outputs and launch; arguments are already validated (fp8moe.ops), offs is never read here.

    Args:
        x: (Ktot, N) bf16/f16/f32, any strides (the upstream grad_out and A are row-major).
        offs: (G,) int32 exclusive end offsets along the rows, on x's device.
        fp8_dtype: an fp8 dtype of ``backend``.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        backend: the backend of x's device.

    Returns:
        q: (Ktot, N) fp8_dtype, strides (1, Ktot).
        scales: (G * N,) f32, scales[g * N + n].
    """
    launcher = cooperative_launcher(backend, x.t(), offs.numel())
    if launcher is not None:
        [(q_t, scales)] = launcher([x.t()], offs, fp8_dtype, round_scales_to_power_of_2, backend)
    else:
        q_t, scales = launch_jagged_rows(x.t(), offs, fp8_dtype, round_scales_to_power_of_2, backend)
    return q_t.t(), scales
