"""Which kernel quantizes the jagged views of the three per-group ops (fp8moe.configs.PER_GROUP_KERNEL).

The span kernel (fp8moe.kernels._per_group) has one launcher per op shape; the three cooperative kernels, the chunked
one (fp8moe.kernels._group_chunks), the one-read tile kernel (fp8moe.kernels._group_tiles) and the cooperative slice
kernel (fp8moe.kernels._coop_slices), take one or two (R, Ktot) views of one offs through one launcher each,
returned here by kind.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fp8moe import configs
from fp8moe.backend import Backend
from fp8moe.kernels._coop_slices import launch_coop_groups
from fp8moe.kernels._group_chunks import launch_group_chunks
from fp8moe.kernels._group_tiles import launch_group_tiles

__all__ = ["cooperative_launcher"]

_COOPERATIVE: dict[str, Callable] = {
    "chunks": launch_group_chunks,
    "tiles": launch_group_tiles,
    "coop": launch_coop_groups,
}


def cooperative_launcher(backend: Backend, view: torch.Tensor, groups: int) -> Callable | None:
    """The views launcher of the cooperative kernel ``backend`` runs for the (R, Ktot) ``view`` in ``groups`` groups
    (``launcher(xs, offs, fp8_dtype, pow2, backend) -> [(q, scales), ...]``), or None where it runs the span
    kernel (fp8moe.configs.per_group_kernel)."""
    return _COOPERATIVE.get(configs.per_group_kernel(backend, view, groups))
