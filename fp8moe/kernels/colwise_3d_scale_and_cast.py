"""Triton twin of fp8ref.colwise_3d_scale_and_cast: the batched row kernel on the (E, N, K) view, or the cooperative
slice kernel on its columns (fp8moe.configs.colwise_3d_kernel picks one per call).

Column n of expert e, reduced over K, is row n of ``x.mT`` (E, N, K). In the canonical input layout, strides
(K*N, 1, K), that view is contiguous, and so is the output's (q has strides (K*N, 1, K) too): the op is then a
plain rowwise pass over contiguous memory. Other input strides are read as they are (no copy). An input read along
N (row-major (E, K, N)) makes each of those rows a strided walk over K, which the row kernel reads twice where K is
long; the cooperative slice kernel (fp8moe.kernels._coop_slices) on the view ``x.mT`` reads it once.
"""

from __future__ import annotations

import torch

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._coop import coop_limit
from fp8moe.kernels._coop_slices import launch_coop_experts
from fp8moe.kernels._rows import launch_rows

__all__ = ["launch"]


@replay.replayable
def launch(
    x: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate and compute the outputs of colwise_3d_scale_and_cast for a validated (E, K, N) ``x``, any strides.

    Returns:
        q (E, K, N) with strides (K*N, 1, K), scales (E, 1, N) f32 contiguous.
    """
    e, k, n = x.shape
    q = torch.empty_strided((e, k, n), (k * n, 1, k), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((e, 1, n), dtype=torch.float32, device=x.device)
    if configs.colwise_3d_kernel(backend, x, coop_limit(backend, x.device)) == "coop":
        launch_coop_experts(x, q, scales.view(e * n), fp8_dtype, round_scales_to_power_of_2, backend)
    else:
        launch_rows(x.mT, q.mT, scales.view(e * n), fp8_dtype, round_scales_to_power_of_2, backend)
    return q, scales
