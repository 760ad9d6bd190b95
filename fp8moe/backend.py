"""Explicit backend detection and the per-backend kernel configuration policy.

Nothing here changes numerics: every backend produces the same bytes (that is what the tests prove). What differs is
how the fp8 cast is executed (hardware instruction vs the exact integer encoder the interpreter needs), which fp8
dtypes exist, and how launch configs are chosen (measured autotuning on CUDA, fixed tables on ROCm, blocks sized
from the problem in the interpreter; fp8moe.configs).
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from typing import Literal

import torch

from fp8ref.triton_env import interpreter_requested, use_interpreter_for_cpu

__all__ = [
    "Backend",
    "backend_for",
    "cuda_backend",
    "interpreter_fp8_dtypes",
    "interpreter_requested",
    "launch_device",
    "rocm_backend",
    "use_interpreter_if_no_gpu",
]

BackendKind = Literal["cuda", "rocm", "interpreter"]

_FN = (torch.float8_e4m3fn, torch.float8_e5m2)
_FNUZ = (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)


#: How the kernels turn a scaled f32 value into fp8 (their CAST_MODE constexpr, fp8moe.kernels._common.quantize):
#: clamp to +-max, then the exact integer encoder (the interpreter; GPUs whose conversion double-rounds);
CAST_EXACT = 0
#: clamp, then the backend's own conversion;
CAST_CLAMPED_NATIVE = 1
#: the backend's own conversion alone, where it saturates by itself (cast profile `satfinite`, SPEC §3), so a clamp
#: would change no byte. On the H200 the clamp's NaN-keeping selects were 146 of the 297 instructions of the
#: per-group kernel's pass-2 loop (SASS of the 64x64 tile, triton 3.9).
CAST_SATURATING_NATIVE = 2


@dataclass(frozen=True)
class Backend:
    """What runs the kernels.

    Attributes:
        kind: "cuda", "rocm" or "interpreter" (TRITON_INTERPRET=1 on the CPU).
        arch: "sm_90", "gfx942", "gfx950", ... or "cpu".
        fp8_dtypes: the fp8 dtypes the backend can store natively. fnuz types do not compile on NVIDIA
            ("not supported in this architecture", H200, triton 3.6); MI300 (gfx942) has only fnuz, MI350 (gfx950)
            only the OCP fn formats; the interpreter has all four.
        exact_encode: cast with the integer encoder (_common.encode_fp8_bits) instead of the backend's conversion.
            True in the interpreter, whose own fp32->fp8 conversion rounds ties away from zero and turns NaN into
            0x7C (triton 3.9, this machine; tests/test_interpreter_canary.py keeps the evidence), and on GPUs where
            Triton's conversion double-rounds through f16 (cuda_backend, rocm_backend).
        autotune: whether per-shape autotuning is allowed. False on ROCm: each new key costs a device sync there,
            hundreds per MoE training step (SPEC §7).
        cast_saturates: the backend's own conversion saturates by itself (cast profile `satfinite`: overflow and
            +-inf to +-max, NaN to NaN), so the kernels leave the clamp to it. True on NVIDIA sm_90+ (cvt.rn.satfinite;
            the H200 bring-up certificate checks it on all 2^32 f32 inputs per format). Meaningless with exact_encode.
        dependent_launch: launch the kernels that declare DEPENDENT_LAUNCH (the per-group span kernels) as
            programmatic dependent launches: each waits for the kernel before it to finish (griddepcontrol.wait, before
            any load or store) and lets the next one's programs start as its own finish, so back-to-back launches
            skip the gap between kernels. NVIDIA sm_90+ only, and opt-in (FP8MOE_PDL=1, read when the backend is
            first built): measured in session 34, it left graph time flat and took 0.3-2.7 us off eager calls back
            to back, and the whole GPU suite has not yet run under it (docs/SPEC.md §10.5,
            benchmarks/prepared_calls.sh 13). Bytes do not depend on it.
    """

    kind: BackendKind
    arch: str
    fp8_dtypes: tuple[torch.dtype, ...]
    exact_encode: bool
    autotune: bool
    cast_saturates: bool = False
    dependent_launch: bool = False

    @property
    def cast_mode(self) -> int:
        """The kernels' CAST_MODE constexpr: CAST_EXACT, CAST_CLAMPED_NATIVE or CAST_SATURATING_NATIVE."""
        if self.exact_encode:
            return CAST_EXACT
        return CAST_SATURATING_NATIVE if self.cast_saturates else CAST_CLAMPED_NATIVE

    def check_fp8_dtype(self, fp8_dtype: torch.dtype) -> None:
        """Check that this backend stores ``fp8_dtype`` natively (one of ``fp8_dtypes``).

        Args:
            fp8_dtype: the fp8 dtype a kernel is asked to write.

        Raises:
            TypeError: ``fp8_dtype`` is not one of ``fp8_dtypes``; the message names the backend and those it takes.
        """
        if fp8_dtype not in self.fp8_dtypes:
            names = [str(d).removeprefix("torch.") for d in self.fp8_dtypes]
            raise TypeError(
                f"fp8_dtype {fp8_dtype} is not supported on backend {self.kind}/{self.arch}; use one of {names}"
            )


def use_interpreter_if_no_gpu() -> bool:
    """Turn the Triton interpreter on when this process has no GPU; return whether it is on.

    The switch itself is fp8ref.triton_env.use_interpreter_for_cpu (one implementation for fp8ref's entry points
    and fp8moe). Must run before any @triton.jit function is defined (the decorator reads the setting). Called once
    by ``import fp8moe``; ``fp8moe.backend_for(device)`` reports the result.

    Raises:
        ImportError: there is no GPU and the interpreter cannot be turned on (triton was imported first, or
            TRITON_INTERPRET=0 is set).
    """
    if not use_interpreter_for_cpu() and not torch.cuda.is_available():
        # triton.language's own @jit helpers (tl.max, ...) were built for compilation when triton was imported;
        # the interpreter cannot run them afterwards ("Cannot call @triton.jit'd outside of the scope of a kernel").
        raise ImportError(
            "no GPU: fp8moe runs its kernels in the Triton interpreter, which must be on before triton is imported. "
            "Import fp8moe before triton, and leave TRITON_INTERPRET unset (or set it to 1)."
        )
    return interpreter_requested()


@functools.cache
def _rocm_arch_of(index: int) -> str:
    return torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]


@functools.cache
def _capability_of(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _rocm_arch(device: torch.device) -> str:
    return _rocm_arch_of(_index(device))


def backend_for(device: torch.device | str) -> Backend:
    """The backend that runs kernels on ``device``.

    Raises:
        ValueError: a CPU tensor without the interpreter, or a GPU tensor while the interpreter is on.
    """
    device = torch.device(device)
    if interpreter_requested():
        if device.type != "cpu":
            raise ValueError(
                f"TRITON_INTERPRET=1 runs kernels on CPU tensors only; got a tensor on {device}. "
                "Unset TRITON_INTERPRET to run on the GPU."
            )
        return Backend("interpreter", "cpu", interpreter_fp8_dtypes(), exact_encode=True, autotune=False)
    if device.type != "cuda":
        raise ValueError(
            f"fp8moe kernels need tensors on a CUDA/ROCm device, got {device}; on a machine without a GPU, "
            "fp8moe runs them through the Triton interpreter (TRITON_INTERPRET=1 set before importing fp8moe)."
        )
    if torch.version.hip is not None:
        return rocm_backend(_rocm_arch(device))
    return cuda_backend(*_capability_of(_index(device)))  # device queries are cached: this runs on every call


def interpreter_fp8_dtypes(version: str | None = None) -> tuple[torch.dtype, ...]:
    """The interpreter's fp8 dtypes: the fnuz types from triton 3.9 on (3.6's interpreter lacks them, SPEC §3)."""
    if version is None:
        import triton  # imported only once the interpreter choice is made (fp8moe/__init__.py)

        version = triton.__version__
    major, minor = (int(part) for part in version.split(".")[:2])
    return _FN + _FNUZ if (major, minor) >= (3, 9) else _FN


@functools.cache
def cuda_backend(major: int, minor: int) -> Backend:
    """The backend of an NVIDIA GPU of compute capability (major, minor); built once per capability (every eager
    call asks for it, and Backend is immutable).

    Only sm_90+ converts f32 -> fp8 in one correctly rounded step (cvt.rn.satfinite). On sm_89 Triton converts
    through f16 with round-toward-zero first, a double rounding (1.0625 + 2^-12 -> 1.0 instead of 1.125 in e4m3fn;
    0.4% of scaled normal values one code off, emulated on the CPU from Triton's FpToFpOpConversion source, not
    measured on such a GPU), so there the kernels cast with the exact integer encoder. Below sm_89 no fp8 storage
    type compiles.
    """
    arch = f"sm_{major}{minor}"
    if (major, minor) < (8, 9):
        return Backend("cuda", arch, (), exact_encode=True, autotune=True)
    sm90 = (major, minor) >= (9, 0)
    dependent = sm90 and os.environ.get("FP8MOE_PDL", "0") == "1"
    return Backend(
        "cuda", arch, _FN, exact_encode=not sm90, autotune=True, cast_saturates=sm90, dependent_launch=dependent
    )


@functools.cache
def rocm_backend(arch: str) -> Backend:
    """The backend of an AMD GPU: fixed configs; the exact encoder wherever Triton's f32 -> fp8 goes through f16
    (every part but CDNA3 gfx94x with fnuz and CDNA4 gfx95x with OCP fn, per Triton's source; no AMD GPU here)."""
    direct = arch.startswith(("gfx94", "gfx95"))
    return Backend("rocm", arch, rocm_fp8_dtypes(arch), exact_encode=not direct, autotune=False)


def rocm_fp8_dtypes(arch: str) -> tuple[torch.dtype, ...]:
    """fp8 dtypes of an AMD architecture: gfx942 (MI300) stores fnuz, gfx950 (MI350) the OCP fn formats."""
    if arch.startswith("gfx94"):
        return _FNUZ
    if arch.startswith(("gfx95", "gfx12")):
        return _FN
    raise ValueError(f"no FP8 support known for AMD architecture {arch!r} (known: gfx942, gfx950, gfx12xx)")


def launch_device(device: torch.device | None) -> contextlib.AbstractContextManager:
    """Make ``device`` current for a kernel launch (nothing to do for the CPU, None, or a device already current).

    Triton launches on the *current* CUDA device, not on the tensors' device: without this, a tensor on cuda:1 in a
    process whose current device is cuda:0 fails with "Pointer argument (at 0) cannot be accessed from Triton"
    (2x H200, one pytest-xdist worker per GPU). The common case, the tensors on the current device, skips the two
    device switches: every eager launch and launch-plan replay (fp8moe.replay) passes through here.
    """
    if device is None or device.type != "cuda" or device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)
