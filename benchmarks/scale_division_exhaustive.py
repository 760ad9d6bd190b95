"""Every non-negative f32 amax: the kernels' f32 scale against fp8ref's f64 division, bit for bit.

    python benchmarks/scale_division_exhaustive.py                 # the arithmetic identity, numpy, on the CPU
    python benchmarks/scale_division_exhaustive.py --device cuda   # fp8moe's scale_from_amax on the GPU

Why: fp8ref.amax_to_scale divides in f64 and rounds once to f32 (SPEC §4.2); the kernels compute the scale in f32
(fp8moe.kernels._common.scale_from_amax: ``tl.div_rn``, the clamp at EPS tested against the largest f32 below it,
the EPS scale a host constant). Double rounding from 53 to 24 bits is innocuous for a quotient, so the two agree;
this script checks it for every amax bit pattern 0x00000000..0x7F800000 (zero, subnormals, normals, +inf) and each
distinct fp8 max (448 e4m3fn, 57344 e5m2 and e5m2fnuz, 240 e4m3fnuz):

- on the CPU, numpy's IEEE f32 division (what ``tl.div_rn`` computes, and what the Triton interpreter runs it as)
  against the reference's arithmetic in numpy f64;
- with ``--device``, the Triton helper itself (with and without the power-of-two rule) against
  ``fp8ref.amax_to_scale`` on that device: this also checks the backend's lowering of ``tl.div_rn``.

NaN amax are not enumerated: the helper returns the amax itself, which tests/test_kernel_helpers.py checks. Prints one
line per fp8 max (and pow2 setting) with the count of differing scales; exits 1 if any differ.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on first)

# isort: split
import triton
import triton.language as tl

from fp8moe.kernels._common import EPS_F32_BELOW, scale_from_amax
from fp8ref.formats import all_formats
from fp8ref.scaling import EPS, amax_to_scale

#: Bit patterns checked per chunk.
CHUNK = 1 << 26
#: Past the last pattern: 0x7F800000 (+inf) is checked too.
END = 0x7F800001


@triton.jit
def _scale_kernel(amax_ptr, scale_ptr, n, BLOCK: tl.constexpr, FP8_MAX: tl.constexpr, ROUND_POW2: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    amax = tl.load(amax_ptr + offs, mask=mask, other=0.0)
    tl.store(scale_ptr + offs, scale_from_amax(amax, FP8_MAX, ROUND_POW2), mask=mask)


def _formats_by_max() -> dict[float, list]:
    """The fp8 formats (fp8ref.formats) grouped by their max, each distinct max once."""
    by_max: dict[float, list] = {}
    for f in all_formats():
        by_max.setdefault(f.max, []).append(f)
    return by_max


def check_numpy(fp8_max: float, start: int = 0, end: int = END) -> int:
    """Patterns in [start, end) whose f32 scale (the kernels' rule, in numpy) differs from the reference
    arithmetic's."""
    below = np.float32(EPS_F32_BELOW.value)
    eps_scale = np.float32(fp8_max / EPS)
    bad = 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        for lo in range(start, end, CHUNK):
            amax = np.arange(lo, min(lo + CHUNK, end), dtype=np.uint32).view(np.float32)
            reference = (np.float64(fp8_max) / np.maximum(amax.astype(np.float64), EPS)).astype(np.float32)
            kernel = np.where(amax <= below, eps_scale, np.float32(fp8_max) / amax)
            bad += int((reference.view(np.uint32) != kernel.view(np.uint32)).sum())
    return bad


def check_device(fp8_dtype: torch.dtype, pow2: bool, device: str, start: int = 0, end: int = END) -> int:
    """Patterns in [start, end) whose fp8moe scale on ``device`` differs from fp8ref.amax_to_scale's there."""
    fp8_max = next(f.max for f in all_formats() if f.dtype == fp8_dtype)
    chunk = CHUNK * 4
    bad = 0
    for lo in range(start, end, chunk):
        n = min(lo + chunk, end) - lo
        amax = torch.arange(lo, lo + n, dtype=torch.int32, device=device).view(torch.float32)
        scale = torch.empty_like(amax)
        _scale_kernel[(triton.cdiv(n, 4096),)](amax, scale, n, BLOCK=4096, FP8_MAX=fp8_max, ROUND_POW2=pow2)
        expected = amax_to_scale(amax, fp8_dtype, pow2)
        bad += int((scale.view(torch.int32) != expected.view(torch.int32)).sum())
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", help="run fp8moe's Triton helper there (e.g. cuda) instead of the numpy identity")
    args = parser.parse_args(argv)
    failed = False
    for fp8_max, formats in _formats_by_max().items():
        names = ", ".join(f.name for f in formats)
        for pow2 in (False, True) if args.device else (None,):
            t0 = time.perf_counter()
            if args.device:
                bad = check_device(formats[0].dtype, pow2, args.device)
                what = f"{args.device} scale_from_amax{' pow2' if pow2 else ''}"
            else:
                bad = check_numpy(fp8_max)
                what = "numpy f32 division"
            failed |= bad > 0
            print(
                f"fp8 max {fp8_max:g} ({names}): {what} vs the reference over {END} amax patterns: "
                f"{bad} differ ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
