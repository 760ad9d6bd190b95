"""What fp8moe tells fp8ref's bring-up, published through the ``fp8ref.backends`` entry point (fp8ref.backends).

fp8ref never imports fp8moe: bring-up loads ``BACKEND`` through the entry point and asks it for the backend that
runs fp8moe's kernels on a device (the certificate's fingerprint) and for Triton's native fp8 conversion (the cast
path bring-up fingerprints and sweeps).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import torch
import triton

from fp8moe.backend import backend_for
from fp8moe.kernels.native_cast import native_cast, native_decode
from fp8ref.backends import BackendInfo, CastPath

__all__ = ["BACKEND"]


def _version() -> str:
    try:
        return version("fp8ref")  # fp8moe ships in the fp8ref distribution
    except PackageNotFoundError:
        return "unknown"


class Fp8moeBackend:
    """fp8moe's answers to bring-up (fp8ref.backends.KernelBackend)."""

    name = "fp8moe"

    def describe(self, device: torch.device) -> BackendInfo:
        """The backend that runs fp8moe kernels on ``device`` (fp8moe.backend.backend_for)."""
        backend = backend_for(device)
        return BackendInfo(
            package=self.name,
            kind=backend.kind,
            arch=backend.arch,
            fp8_dtypes=backend.fp8_dtypes,
            exact_encode=backend.exact_encode,
            autotune=backend.autotune,
            cast_saturates=backend.cast_saturates,
            versions={"triton": triton.__version__, "fp8moe": _version()},
        )

    def native_cast(self, device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]) -> CastPath:
        """Triton's own ``x.to(fp8)`` / ``q.to(f32)`` on ``device`` (fp8moe.kernels.native_cast)."""
        backend = backend_for(device)
        if backend.exact_encode:
            why = (
                f"the kernels do not use it on the {backend.kind} backend: they cast with the exact integer encoder "
                "(fp8moe.kernels._common.encode_fp8_bits), so a divergence here cannot reach their output."
            )
        elif backend.cast_saturates:
            why = (
                f"the kernels cast their scaled values with this conversion on the {backend.kind} backend and leave "
                "the saturation to it (no clamp before it), so it must follow 'satfinite' on every input."
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
            required_profile="satfinite" if backend.cast_saturates and not backend.exact_encode else None,
        )


BACKEND = Fp8moeBackend()
