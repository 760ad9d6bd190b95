"""KernelSpec rows for the fp8moe kernels, published to fp8ref through the ``fp8ref.specs`` entry point.

Kernels are named as "module:attr" strings and imported on first use, so ``fp8ref.specs()`` imports neither the
kernels nor Triton. Test shapes stay small (the interpreter runs ~ms per program instance on the CPU) but include
sizes that are not multiples of 16/32/64/128 and tensors smaller than one block; benchmark shapes are the
production shapes of SPEC §7 ((M, K, N, E) = (16384, 7168, 2048, 8)).
"""

from __future__ import annotations

import torch

from fp8ref.spec import KernelSpec

__all__ = ["SPECS"]


def _supports(device: torch.device, fp8_dtype: torch.dtype) -> str | None:
    from fp8moe.backend import backend_for

    try:
        backend = backend_for(device)
    except ValueError as exc:
        return str(exc)
    if fp8_dtype not in backend.fp8_dtypes:
        return f"{fp8_dtype} is not stored by backend {backend.kind}/{backend.arch}"
    return None


_M, _K, _N, _E = 16384, 7168, 2048, 8


def _spec(name: str, test_shapes, bench_shapes, **kw) -> KernelSpec:
    return KernelSpec(
        name, kernel=f"fp8moe.ops:{name}", test_shapes=test_shapes, bench_shapes=bench_shapes, supports=_supports, **kw
    )


SPECS: tuple[KernelSpec, ...] = (
    _spec("rowwise_2d_scale_and_cast", ((1, 1), (7, 100), (33, 130)), ((_M, _K), (_M, _N))),
    _spec("colwise_3d_scale_and_cast", ((1, 1, 1), (2, 7, 100), (3, 33, 17)), ((_E, _K, _N),)),
    _spec(
        "rowwise_3d_transpose_rhs",
        ((1, 1, 1), (2, 7, 100), (3, 33, 17)),
        ((_E, _K, _N),),
        kwargs_grid=({"method": "atomic"}, {"method": "reduction"}),
    ),
    _spec("per_group_rowwise_scales", ((1, 1), (7, 100), (16, 130)), ((_N, _M),)),
    _spec("per_group_colwise_scales", ((1, 1), (100, 7), (130, 16)), ((_M, _N),)),
    _spec("per_group_colwise_scales_dual", ((1, 1, 1), (100, 7, 3), (130, 16, 9)), ((_M, _N, _K),)),
)
