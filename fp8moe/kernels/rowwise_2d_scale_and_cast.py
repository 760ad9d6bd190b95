"""Triton twin of fp8ref.rowwise_2d_scale_and_cast: the batched row kernel (fp8moe.kernels._rows) on (1, M, K).

The input is read in place, any strides; q is allocated row-major.
"""

from __future__ import annotations

import torch

from fp8moe import replay
from fp8moe.backend import Backend
from fp8moe.kernels._rows import launch_rows

__all__ = ["launch"]


@replay.replayable
def launch(
    x: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate and compute the outputs of rowwise_2d_scale_and_cast for a validated (M, K) ``x``, any strides.

    Returns:
        q (M, K) row-major, scales (M, 1) f32.
    """
    m, k = x.shape
    q = torch.empty_strided((m, k), (k, 1), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    launch_rows(x.unsqueeze(0), q.unsqueeze(0), scales.view(m), fp8_dtype, round_scales_to_power_of_2, backend)
    return q, scales
