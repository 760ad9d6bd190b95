"""Triton twin of fp8ref.ops.per_group_rowwise_scales: x (M, Ktot) jagged along the columns by offs.

The kernel is shared with the colwise ops (fp8moe.kernels._per_group, _group_chunks or _group_tiles: see
fp8moe.configs.PER_GROUP_KERNEL); this op is that kernel applied to x as given. Columns past offs[-1] belong to no
group and are left unwritten (fp8ref writes 0x00 there; comparisons exclude them, SPEC §4).
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
        x: (M, Ktot) bf16/f16/f32, any strides (row-major reads coalesce along the jagged columns).
        offs: (G,) int32 exclusive end offsets along the columns, on x's device.
        fp8_dtype: an fp8 dtype of ``backend``.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        backend: the backend of x's device.

    Returns:
        q: (M, Ktot) fp8_dtype, strides (Ktot, 1).
        scales: (G * M,) f32, scales[g * M + m].
    """
    launcher = cooperative_launcher(backend, x, offs.numel())
    if launcher is not None:
        [(q, scales)] = launcher([x], offs, fp8_dtype, round_scales_to_power_of_2, backend)
        return q, scales
    return launch_jagged_rows(x, offs, fp8_dtype, round_scales_to_power_of_2, backend)
