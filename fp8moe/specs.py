"""KernelSpec rows for the fp8moe kernels, published to fp8ref through the ``fp8ref.specs`` entry point.

Kernels are named as "module:attr" strings and imported on first use, so ``fp8ref.specs()`` imports neither the
kernels nor Triton. Test shapes stay small (the interpreter runs ~ms per program instance on the CPU) but include
sizes that are not multiples of 16/32/64/128 and tensors smaller than one block; benchmark shapes are the
production shapes of SPEC §7 (MOE_CONFIGS).
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


#: The four MoE grouped-GEMM configurations of SPEC §7, (M tokens, K, N, E experts). Forward: A (M,K) rowwise,
#: B_t (E,K,N) colwise-3D; backward: grad_out (M,N) rowwise, B transposed rowwise, and the per-group ops over M for
#: grad_B (grad_out^T is (N,M) per-group rowwise; A and grad_out per-group colwise, also as the dual).
MOE_CONFIGS = ((16384, 7168, 2048, 8), (16640, 2048, 1408, 64), (32768, 5120, 8192, 16), (65536, 4096, 14336, 8))


def _spec(name: str, test_shapes, bench, **kw) -> KernelSpec:
    """A row; ``bench`` maps one MoE config (M, K, N, E) to this op's benchmark (shape, groups)."""
    points = [bench(*cfg) for cfg in MOE_CONFIGS]
    return KernelSpec(
        name,
        kernel=f"fp8moe.ops:{name}",
        test_shapes=test_shapes,
        bench_shapes=tuple(shape for shape, _ in points),
        bench_groups=tuple(groups for _, groups in points),
        supports=_supports,
        **kw,
    )


SPECS: tuple[KernelSpec, ...] = (
    _spec("rowwise_2d_scale_and_cast", ((1, 1), (7, 100), (33, 130)), lambda m, k, n, e: ((m, k), 1)),
    _spec("colwise_3d_scale_and_cast", ((1, 1, 1), (2, 7, 100), (3, 33, 17)), lambda m, k, n, e: ((e, k, n), 1)),
    _spec(
        "rowwise_3d_transpose_rhs",
        ((1, 1, 1), (2, 7, 100), (3, 33, 17)),
        lambda m, k, n, e: ((e, k, n), 1),
        kwargs_grid=({"method": "atomic"}, {"method": "reduction"}),
    ),
    _spec("per_group_rowwise_scales", ((1, 1), (7, 100), (16, 130)), lambda m, k, n, e: ((n, m), e)),
    _spec("per_group_colwise_scales", ((1, 1), (100, 7), (130, 16)), lambda m, k, n, e: ((m, k), e)),
    _spec("per_group_colwise_scales_dual", ((1, 1, 1), (100, 7, 3), (130, 16, 9)), lambda m, k, n, e: ((m, n, k), e)),
)
