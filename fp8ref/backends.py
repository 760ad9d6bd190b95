"""Kernel backends: what a kernel package tells fp8ref's bring-up about the device its kernels run on.

fp8ref never imports a kernel package or Triton. A kernel package publishes a backend object through the entry point
group ``fp8ref.backends`` (fp8moe: ``fp8moe.fp8ref_backend:BACKEND``), the same way it publishes its KernelSpecs
through ``fp8ref.specs``. Bring-up loads it (loading imports that package, and so Triton) and asks it two things:

- ``describe(device) -> BackendInfo``: the versions and the backend that runs its kernels on ``device`` (the
  certificate's fingerprint, and which fp8 formats the kernel matrix can run there);
- ``native_cast(device, fp8_dtypes) -> CastPath | None``: the package's raw fp8 conversion, which bring-up
  fingerprints against the named cast profiles and sweeps exhaustively.

A third-party kernel package publishes its own object with the same two methods (:class:`KernelBackend`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol

import torch

from fp8ref.formats import fmt

__all__ = ["BackendInfo", "CastPath", "KernelBackend", "backend_load_errors", "kernel_backend", "kernel_backends"]

#: The entry point group kernel packages publish their backend object in.
GROUP = "fp8ref.backends"


@dataclass(frozen=True)
class CastPath:
    """One raw conversion between f32 and fp8 on one device.

    Attributes:
        name: e.g. "torch.to" or "triton.native".
        encode: (float tensor on the device, fp8 dtype) -> uint8 codes on the device; no clamp, no NaN guard.
            bf16 and f16 sources go to torch's cast directly and to Triton's through f32 (exact widening).
        decode: (uint8 codes on the device, fp8 dtype) -> f32 values on the device.
        fp8_dtypes: formats the path can convert on this device.
        load_bearing: whether results the project ships depend on this path. A divergence from the reference on
            inputs where every named profile agrees is then a genuine failure; otherwise it is a finding.
        why: one sentence saying why the path is (not) load-bearing, copied into the certificate.
        required_profile: the cast profile (fp8ref.profiles) the kernels rely on the path to follow on every input,
            or None. Kernels that leave saturation to the conversion (no clamp before it) require ``satfinite``:
            the path is then checked against that profile instead of the detected one, and any mismatch, also
            where the named profiles disagree (overflow, inf, NaN), is a failure.
    """

    name: str
    encode: Callable[[torch.Tensor, torch.dtype], torch.Tensor]
    decode: Callable[[torch.Tensor, torch.dtype], torch.Tensor]
    fp8_dtypes: tuple[torch.dtype, ...]
    load_bearing: bool
    why: str
    required_profile: str | None = None


@dataclass(frozen=True)
class BackendInfo:
    """What runs a kernel package's kernels on one device.

    Attributes:
        package: the kernel package ("fp8moe").
        kind: "cuda", "rocm" or "interpreter" (Triton's interpreter on the CPU).
        arch: "sm_90", "gfx942", ... or "cpu".
        fp8_dtypes: the fp8 dtypes the backend stores; the kernel matrix skips the others.
        exact_encode: whether the kernels cast with an exact software encoder instead of the native conversion.
        autotune: whether launch configs are tuned per shape.
        cast_saturates: the kernels leave saturation to the native conversion (no clamp before it).
        versions: e.g. {"triton": "3.9.0", "fp8moe": "0.1.0"}.
    """

    package: str
    kind: str
    arch: str
    fp8_dtypes: tuple[torch.dtype, ...]
    exact_encode: bool
    autotune: bool
    versions: Mapping[str, str] = field(default_factory=dict)
    cast_saturates: bool = False

    @property
    def interpreter(self) -> bool:
        """Whether kernels run in Triton's interpreter on the CPU."""
        return self.kind == "interpreter"

    def as_json(self) -> dict:
        """The certificate's ``backend`` entry."""
        return {
            "package": self.package,
            "kind": self.kind,
            "arch": self.arch,
            "fp8_dtypes": [fmt(d).name for d in self.fp8_dtypes],
            "exact_encode": self.exact_encode,
            "cast_saturates": self.cast_saturates,
            "autotune": self.autotune,
            "versions": dict(self.versions),
        }


class KernelBackend(Protocol):
    """The object a kernel package publishes in the ``fp8ref.backends`` entry point group."""

    name: str

    def describe(self, device: torch.device) -> BackendInfo:
        """The backend that runs this package's kernels on ``device``."""

    def native_cast(self, device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]) -> CastPath | None:
        """The package's raw fp8 conversion on ``device`` restricted to ``fp8_dtypes``, or None if it has none."""


_LOAD_ERRORS: dict[str, Exception] = {}


@functools.cache
def kernel_backends() -> tuple[KernelBackend, ...]:
    """Every backend object published in the ``fp8ref.backends`` group; one that fails to load is remembered."""
    found = []
    for ep in entry_points(group=GROUP):
        try:
            found.append(ep.load())
        except Exception as exc:
            _LOAD_ERRORS[ep.name] = exc
            warnings.warn(f"{GROUP} entry point {ep.name!r} failed to load: {exc!r}", stacklevel=2)
    return tuple(found)


def backend_load_errors() -> dict[str, Exception]:
    """Entry point name -> why it failed to load (empty when every backend loaded)."""
    kernel_backends()
    return dict(_LOAD_ERRORS)


def kernel_backend() -> KernelBackend:
    """The backend bring-up certifies: the first one published.

    Raises:
        RuntimeError: when none loaded and one failed to load (with the reason).
        LookupError: when no installed package publishes one.
    """
    found = kernel_backends()
    if found:
        return found[0]
    if _LOAD_ERRORS:
        failed = ", ".join(f"{name}: {exc!r}" for name, exc in _LOAD_ERRORS.items())
        raise RuntimeError(f"no kernel backend: the {GROUP} entry point(s) failed to load ({failed})")
    raise LookupError(f"no installed kernel package publishes a backend (entry point group {GROUP})")
