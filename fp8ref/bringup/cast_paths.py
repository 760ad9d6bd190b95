"""The raw fp8 conversions a stack offers, as objects the certificate fingerprints and checks.

Two paths: torch's own ``x.to(fp8)`` / ``q.to(float32)`` on the device, and the kernel backend's native conversion,
which the kernel package publishes (fp8ref.backends; fp8moe's is Triton's ``x.to(tl.float8...)``). fp8ref imports
no kernel package and no Triton: the backend object comes through the ``fp8ref.backends`` entry point.
"""

from __future__ import annotations

import torch

from fp8ref.backends import CastPath, kernel_backend

__all__ = ["CastPath", "cast_paths"]


def _torch_path(fp8_dtypes: tuple[torch.dtype, ...]) -> CastPath:
    return CastPath(
        name="torch.to",
        encode=lambda x, fp8_dtype: x.to(fp8_dtype).view(torch.uint8),
        decode=lambda codes, fp8_dtype: codes.view(fp8_dtype).to(torch.float32),
        fp8_dtypes=fp8_dtypes,
        load_bearing=True,
        why="torch's conversion decodes every kernel output the engine dequantizes and is what users call.",
    )


def cast_paths(device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]) -> list[CastPath]:
    """torch's path and the kernel backend's native path on ``device``, each restricted to the formats it has."""
    native = kernel_backend().native_cast(device, fp8_dtypes)
    return [_torch_path(fp8_dtypes)] + ([native] if native is not None else [])
