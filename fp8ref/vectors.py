"""Conformance inputs for FP8 casts: exhaustive 16-bit sources, the float32 edge set, the profile probe.

Every function returns a new CPU tensor in a fixed order, so a failure index means the same input everywhere
(pytest, ``fp8ref bringup``, a vendor's log). Callers move the tensor to their device.
"""

from __future__ import annotations

import itertools

import torch

from fp8ref.formats import Fp8Format, fmt

__all__ = ["all_bf16", "all_fp16", "fp32_edge_set", "probe_vector", "step_past_max"]

# Quiet and signalling NaNs of both signs, with the smallest and the largest payload.
_NAN_BITS_F32 = (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF)


def _all_16bit_patterns() -> torch.Tensor:
    """(65536,) int16 holding the bit patterns 0x0000..0xFFFF in unsigned order."""
    u = torch.arange(1 << 16, dtype=torch.int32)
    return torch.where(u >= 1 << 15, u - (1 << 16), u).to(torch.int16)


def all_bf16() -> torch.Tensor:
    """(65536,) bfloat16: every bit pattern, pattern i at index i (NaN payloads and both zeros included)."""
    return _all_16bit_patterns().view(torch.bfloat16)


def all_fp16() -> torch.Tensor:
    """(65536,) float16: every bit pattern, pattern i at index i."""
    return _all_16bit_patterns().view(torch.float16)


def step_past_max(fp8_dtype: torch.dtype | Fp8Format) -> float:
    """The value one code above max if the exponent range were unbounded: 480 e4m3fn, 256 e4m3fnuz, 65536 e5m2(fnuz).

    Round-to-nearest decides overflow against it: the midpoint (max + step) / 2 is the top-of-range tie.
    """
    f = fmt(fp8_dtype)
    return 2 * f.max - f.decode(f.max_code - 1)


def _finite_magnitudes(f: Fp8Format) -> list[float]:
    """Every non-negative finite value of the format, ascending (codes 0..max_code)."""
    return [f.decode(c) for c in range(f.max_code + 1)]


def _with_f32_neighbours(values: list[float]) -> list[float]:
    """Each value followed by the float32 just below and just above it (values must be exact in float32)."""
    x = torch.tensor(values, dtype=torch.float32)
    below = torch.nextafter(x, torch.zeros_like(x))
    above = torch.nextafter(x, torch.full_like(x, torch.inf))
    return torch.stack([x, below, above], dim=1).flatten().tolist()


def _signed_f32(magnitudes: list[float]) -> torch.Tensor:
    """float32 tensor: the magnitudes, then their negatives, then NaNs of both signs; duplicates (by bits) dropped."""
    pos = torch.tensor(magnitudes, dtype=torch.float32)
    nans = torch.tensor([b - (1 << 32) if b >> 31 else b for b in _NAN_BITS_F32], dtype=torch.int32).view(torch.float32)
    x = torch.cat([pos, -pos, nans])
    first_index = {}
    for i, b in enumerate(x.view(torch.int32).tolist()):
        first_index.setdefault(b, i)
    return x[torch.tensor(list(first_index.values()), dtype=torch.int64)]


def fp32_edge_set(fp8_dtype: torch.dtype) -> torch.Tensor:
    """float32 inputs that pin down a cast to ``fp8_dtype`` completely at its edges.

    Contents, both signs, in this order: every finite code value (subnormals and +-0 included); every midpoint
    between adjacent finite codes and the top-of-range tie (max + step past max) / 2, each followed by the float32
    one ulp below and above it; values past max (the step past max, 2x and 1e4x it, float32 max); the smallest
    float32 subnormal and normal; +-inf; then NaNs of both signs (quiet and signalling payloads).
    About 1,040 values per format.
    """
    f = fmt(fp8_dtype)
    values = _finite_magnitudes(f)
    past = step_past_max(f)
    midpoints = [(a + b) / 2 for a, b in itertools.pairwise(values)] + [(f.max + past) / 2]
    beyond = [past, 2 * past, 1e4 * past, torch.finfo(torch.float32).max]
    tiny_f32 = [torch.finfo(torch.float32).smallest_normal * 2.0**-23, torch.finfo(torch.float32).smallest_normal]
    return _signed_f32(values + _with_f32_neighbours(midpoints) + beyond + tiny_f32 + [torch.inf])


def probe_vector(fp8_dtype: torch.dtype) -> torch.Tensor:
    """float32 probe that tells the named cast profiles and common rounding mistakes apart (used by detect_profile).

    Contents, both signs, in this order: 0; min_subnormal/2 (ties to 0), min subnormal, 1.5 and 2.5 min subnormal
    (subnormal ties to even, up and down), largest subnormal, the tie below min normal, min normal; in the binades
    2^emin, 1, 2 and the top binade, the first two ties above the binade start (the first ties down to even, the
    second up); max, the top-of-range tie, the step past max, 2x it, float32 max; +inf. Every tie is followed by the
    float32 one ulp below and above it. Then NaNs of both signs. 102 values.
    """
    f = fmt(fp8_dtype)
    sub = f.min_subnormal
    half_ulp = 2.0 ** -(f.man_bits + 1)  # half the spacing at 1.0
    top_binade = 2.0 ** ((f.max_code >> f.man_bits) - f.bias)  # 2^floor(log2(max)): 256 e4m3fn, 128 e4m3fnuz
    past = step_past_max(f)
    ties = [sub / 2, 1.5 * sub, 2.5 * sub, f.min_normal - sub / 2]
    for start in (f.min_normal, 1.0, 2.0, top_binade):
        ties += [start * (1 + half_ulp), start * (1 + 3 * half_ulp)]
    ties.append((f.max + past) / 2)
    exact = [0.0, sub, f.min_normal - sub, f.min_normal, f.max]
    beyond = [past, 2 * past, torch.finfo(torch.float32).max, torch.inf]
    return _signed_f32(exact + _with_f32_neighbours(ties) + beyond)
