"""The raw fp8 conversions a stack offers, as objects the certificate fingerprints and checks.

Two paths: torch's own ``x.to(fp8)`` / ``q.to(float32)`` on the device, and Triton's native conversion
(fp8moe.kernels.native_cast). Triton is imported only when the native path is built, never by ``import fp8ref``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["CastPath", "cast_paths"]


@dataclass(frozen=True)
class CastPath:
    """One raw conversion between f32 and fp8 on one device.

    Attributes:
        name: "torch.to" or "triton.native".
        encode: (float tensor on the device, fp8 dtype) -> uint8 codes on the device; no clamp, no NaN guard.
            bf16 and f16 sources go to torch's cast directly and to Triton's through f32 (exact widening).
        decode: (uint8 codes on the device, fp8 dtype) -> f32 values on the device.
        fp8_dtypes: formats the path can convert on this device.
        load_bearing: whether results the project ships depend on this path. A divergence from the reference on
            inputs where every named profile agrees is then a genuine failure; otherwise it is a finding.
        why: one sentence saying why the path is (not) load-bearing, copied into the certificate.
    """

    name: str
    encode: Callable[[torch.Tensor, torch.dtype], torch.Tensor]
    decode: Callable[[torch.Tensor, torch.dtype], torch.Tensor]
    fp8_dtypes: tuple[torch.dtype, ...]
    load_bearing: bool
    why: str


def _torch_path(fp8_dtypes: tuple[torch.dtype, ...]) -> CastPath:
    return CastPath(
        name="torch.to",
        encode=lambda x, fp8_dtype: x.to(fp8_dtype).view(torch.uint8),
        decode=lambda codes, fp8_dtype: codes.view(fp8_dtype).to(torch.float32),
        fp8_dtypes=fp8_dtypes,
        load_bearing=True,
        why="torch's conversion decodes every kernel output the engine dequantizes and is what users call.",
    )


def _triton_path(device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]) -> CastPath:
    from fp8moe import backend_for
    from fp8moe.kernels.native_cast import native_cast, native_decode

    backend = backend_for(device)
    if backend.exact_encode:
        why = (
            f"the kernels do not use it on the {backend.kind} backend: they cast with the exact integer encoder "
            "(fp8moe.kernels._common.encode_fp8_bits), so a divergence here cannot reach their output."
        )
    else:
        why = f"the kernels cast their saturated values with this conversion on the {backend.kind} backend."
    return CastPath(
        name="triton.native",
        encode=lambda x, fp8_dtype: native_cast(x.to(torch.float32), fp8_dtype).view(torch.uint8),
        decode=lambda codes, fp8_dtype: native_decode(codes.view(fp8_dtype)),
        fp8_dtypes=tuple(d for d in fp8_dtypes if d in backend.fp8_dtypes),
        load_bearing=not backend.exact_encode,
        why=why,
    )


def cast_paths(device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]) -> list[CastPath]:
    """Both cast paths on ``device``, each restricted to the requested formats it supports."""
    return [_torch_path(fp8_dtypes), _triton_path(device, fp8_dtypes)]
