"""KernelSpec rows for the fp8moe kernels, published to fp8ref through the ``fp8ref.specs`` entry point.

One spec per row of fp8ref's op table (fp8ref.contracts): fp8moe implements every op under the same name, and
takes the row's test shapes, bench shapes and case table. Kernels are named as "module:attr" strings and imported
on first use, so ``fp8ref.specs()`` imports neither the kernels nor Triton.
"""

from __future__ import annotations

import torch

from fp8ref.contracts import CONTRACTS, MOE_CONFIGS
from fp8ref.spec import KernelSpec

__all__ = ["MOE_CONFIGS", "SPECS"]


def _supports(device: torch.device, fp8_dtype: torch.dtype) -> str | None:
    from fp8moe.backend import backend_for

    try:
        backend = backend_for(device)
    except ValueError as exc:
        return str(exc)
    if fp8_dtype not in backend.fp8_dtypes:
        return f"{fp8_dtype} is not stored by backend {backend.kind}/{backend.arch}"
    return None


#: Launch variants of fp8moe kernels (keyword arguments that choose an algorithm, never the result): every spec of
#: an op runs each variant. Ops not listed have one.
_VARIANTS: dict[str, tuple[dict[str, object], ...]] = {
    "rowwise_3d_transpose_rhs": ({"method": "atomic"}, {"method": "reduction"}),
}

SPECS: tuple[KernelSpec, ...] = tuple(
    KernelSpec(name, kernel=f"fp8moe:{name}", supports=_supports, kwargs_grid=_VARIANTS.get(name, ({},)))
    for name in CONTRACTS
)
