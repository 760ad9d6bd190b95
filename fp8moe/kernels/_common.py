"""Shared @triton.jit helpers: every kernel computes amax, scale and the cast through these, written once.

Each helper is the Triton twin of one step of fp8ref.scaling; the step's semantics live there.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import triton
import triton.language as tl

from fp8moe import backend
from fp8ref.formats import fmt
from fp8ref.scaling import EPS

__all__ = [
    "CAST_CLAMPED_NATIVE",
    "CAST_EXACT",
    "CAST_SATURATING_NATIVE",
    "EPS_F32_BELOW",
    "TL_FP8",
    "abs_max_keep_nan",
    "amax_of_magnitude_bits",
    "cast_to_fp8",
    "encode_fp8_bits",
    "fold_amax",
    "fp8_constexprs",
    "magnitude_bits",
    "max_of_amaxes",
    "quantize",
    "saturate_keep_nan",
    "scale_from_amax",
]

#: torch fp8 dtype -> Triton element type.
TL_FP8 = {
    torch.float8_e4m3fn: tl.float8e4nv,
    torch.float8_e5m2: tl.float8e5,
    torch.float8_e4m3fnuz: tl.float8e4b8,
    torch.float8_e5m2fnuz: tl.float8e5b16,
}


#: The CAST_MODE values as constexprs (fp8moe.backend documents each).
CAST_EXACT = tl.constexpr(backend.CAST_EXACT)
CAST_CLAMPED_NATIVE = tl.constexpr(backend.CAST_CLAMPED_NATIVE)
CAST_SATURATING_NATIVE = tl.constexpr(backend.CAST_SATURATING_NATIVE)


def _largest_f32_below(value: float) -> float:
    """The largest f32 strictly below the Python float ``value`` (a positive normal f32 range value)."""
    nearest = float(np.float32(value))
    return nearest if nearest < value else float(np.nextafter(np.float32(value), np.float32(0)))


@functools.cache
def fp8_constexprs(fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, cast_mode: int) -> dict:
    """The constexpr launch arguments every kernel takes, derived from the format once (fp8ref.formats).

    Cached (it runs on every launch); callers unpack the dict and must not modify it.
    """
    f = fmt(fp8_dtype)
    return {
        "FP8_DTYPE": TL_FP8[f.dtype],
        "FP8_MAX": f.max,
        "MAN_BITS": f.man_bits,
        "EMIN": f.emin,
        "FNUZ": f.fnuz,
        "ROUND_POW2": bool(round_scales_to_power_of_2),
        "CAST_MODE": int(cast_mode),
    }


@triton.jit
def abs_max_keep_nan(x, axis: tl.constexpr):
    """max |x| along ``axis`` in f32, NaN-propagating like torch.amax, a NaN as the quiet NaN 0x7FC00000. Masked
    lanes must be loaded as 0.

    An integer max of the sign-cleared bit patterns (:func:`magnitude_bits`), converted to f32 once per result:
    exact, and with no per-element conversion, NaN test or custom combine (the interpreter runs a custom combine in
    Python per element).
    """
    return amax_of_magnitude_bits(magnitude_bits(x), x.dtype, axis)


@triton.jit
def magnitude_bits(x):
    """|x| as its bit pattern, a signed integer of x's width with the sign bit cleared.

    For non-negative floats the integer order of the patterns is the value order (zero, subnormals, normals, inf),
    and every NaN pattern lies above inf's: an integer max over these is the NaN-keeping max |x|, exact, with no
    float conversion per element (:func:`amax_of_magnitude_bits` turns it back).
    """
    if x.dtype.primitive_bitwidth == 16:
        return x.to(tl.int16, bitcast=True) & 0x7FFF
    else:
        return x.to(tl.int32, bitcast=True) & 0x7FFFFFFF


@triton.jit
def amax_of_magnitude_bits(bits, X_DTYPE: tl.constexpr, axis: tl.constexpr):
    """max |x| along ``axis`` in f32 from :func:`magnitude_bits` of x (X_DTYPE), a NaN as the quiet NaN 0x7FC00000 of
    :func:`abs_max_keep_nan`."""
    top = tl.max(bits, axis)  # Triton widens a 16-bit integer reduction to 32 bits; the values fit 16
    if X_DTYPE.primitive_bitwidth == 16:
        top = top.to(tl.int16)
    amax = top.to(X_DTYPE, bitcast=True).to(tl.float32)
    quiet_nan = tl.full([], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(amax != amax, quiet_nan, amax)


@triton.jit
def fold_amax(ptrs, amax, mask):
    """Fold the f32 amaxes ``amax`` into the int32 words at ``ptrs`` (zeroed before the launch) by atomic max of their
    bit patterns: for non-negative f32 the int32 patterns order like the values, and every NaN with its sign bit
    cleared (0x7F800001..0x7FFFFFFF) lies above +inf (0x7F800000), so the max keeps NaN; clearing the sign bit makes
    that hold whatever sign a NaN carries. Exact and independent of the order the programs arrive in.

    Relaxed: a later launch reads the words, and the launch boundary orders them; in the cooperative kernels a
    program that saw the slice's arrival count complete reads them, and fp8moe.kernels._coop.arrive orders every
    warp's folds before the arrival (a barrier, then the release). The default (acq_rel) put a
    ``MEMBAR.ALL.GPU`` before every atomic (sm_90), which drains the program's loads in flight: the activation
    pair's amax kernel, one fold per tile, ran at 47% of DRAM bandwidth under Nsight Compute with membar among its
    top stalls (benchmarks/results/h200-s14-summary.md).
    """
    bits = amax.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    tl.atomic_max(ptrs, bits, mask=mask, sem="relaxed")


@triton.jit
def max_of_amaxes(a, b):
    """max of two amaxes of abs_max_keep_nan, NaN returned as the same quiet NaN (0x7FC00000) it returns.

    Not ``tl.maximum(..., propagate_nan=ALL)``: PTX max.NaN returns the canonical NaN 0x7FFFFFFF, and the scale's NaN
    bits would then depend on which part of a slice held the NaN (the atomic and reduction transposes must agree bit
    for bit).
    """
    quiet_nan = tl.full([], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
    return tl.where((a != a) | (b != b), quiet_nan, tl.maximum(a, b))


@triton.jit
def _pow2_log2_rule(scale):
    """exp2(floor(RN_f32(log2(scale)))) for f32 scale >= 0, with integer operations only.

    In [2^E, 2^(E+1)), RN_f32(log2 s) rounds up to the integer E+1 exactly when s is within k <= K ulps of 2^(E+1),
    where K = floor(2^24 * (1 - 2^-h)) and h is half the f32 ulp just below E+1 (round-to-nearest-even ties go to
    the integer, whose last mantissa bit is 0). 2^24 * h is 2^j with j = floor(log2|E+1|) (2^(j-1) when E+1 is a
    positive power of two, whose lower neighbour lies in the smaller binade), and since 2^j*ln2 is never within 1e-4
    of an integer for j <= 7, K = floor(2^j * ln 2) exactly. tests/test_kernel_helpers.py checks this against
    fp8ref.scaling.round_scale_to_power_of_2 on every f32 within 256 ulps of each power of two.
    """
    bits = scale.to(tl.int32, bitcast=True)
    exp_field = (bits >> 23) & 0xFF
    k = (1 << 23) - (bits & 0x7FFFFF)  # ulps (of 2^-24 relative) below 2^(E+1)
    n = exp_field - 126  # E + 1
    abs_n = tl.abs(n)
    # j = floor(log2 |n|) from the exponent field of float(|n|) (exact for |n| < 2^24)
    j = ((abs_n.to(tl.float32).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    is_pos_pow2 = (n > 0) & ((n & (n - 1)) == 0)
    j = tl.where(is_pos_pow2, j - 1, j)
    pow2_j = ((j + 127) << 23).to(tl.float32, bitcast=True)
    k_max = tl.floor(pow2_j * 0.6931471805599453).to(tl.int32)
    k_max = tl.where(n == 0, 0, k_max)
    rounds_up = k <= k_max
    floor_bits = bits & 0x7F800000
    up_bits = floor_bits + (1 << 23)
    finite_nonzero = (exp_field > 0) & (exp_field < 255)
    return tl.where(finite_nonzero, tl.where(rounds_up, up_bits, floor_bits), bits).to(tl.float32, bitcast=True)


#: The largest f32 below fp8ref's EPS (1e-12, not an f32): for an f32 amax, f64(amax) < EPS exactly when
#: amax <= EPS_F32_BELOW, so :func:`scale_from_amax` can test the clamp in f32.
EPS_F32_BELOW = tl.constexpr(_largest_f32_below(EPS))
#: fp8ref's EPS as a constexpr (a @triton.jit function reads no other globals).
_EPS = tl.constexpr(EPS)


@triton.jit
def scale_from_amax(amax, FP8_MAX: tl.constexpr, ROUND_POW2: tl.constexpr):
    """Twin of fp8ref.amax_to_scale: f32(f64(FP8_MAX) / max(f64(amax), 1e-12)), NaN kept, optional pow2.

    Computed in f32, to the same bits (fp8ref.amax_to_scale, step 3): for an f32 amax of at least 1e-12 the f64
    quotient rounded to f32 is the correctly rounded f32 quotient, which ``tl.div_rn`` gives (Triton's plain f32
    ``/`` is approximate on NVIDIA: it differs from the correctly rounded quotient in ~30% of inputs, H200, triton
    3.6, SPEC §4); below 1e-12 the divisor is 1e-12 itself, and the quotient a compile-time constant (FP8_MAX /
    1e-12 in Python's f64, rounded to f32 once, as the reference rounds it). The f64 division this replaced compiled
    to 73 DFMA, 12 DMUL, 10 MUFU.RCP64H and 18 F2F conversions in the colwise one-read kernel, where each thread
    computes the scales of 8 rows (sm_90, triton 3.6; benchmarks/results/cpu-sm90-registers-s25.md).
    """
    tl.static_assert(amax.dtype == tl.float32, "scale_from_amax takes the f32 amax")
    eps_scale = tl.full(amax.shape, FP8_MAX / _EPS, tl.float32)
    quotient = tl.div_rn(tl.full(amax.shape, FP8_MAX, tl.float32), amax)
    scale = tl.where(amax <= EPS_F32_BELOW, eps_scale, quotient)
    scale = tl.where(amax != amax, amax, scale)  # the amax's own NaN (div.rn returns the canonical one)
    if ROUND_POW2:
        scale = _pow2_log2_rule(scale)
    return scale


@triton.jit
def saturate_keep_nan(y, FP8_MAX: tl.constexpr):
    """clamp(y, -FP8_MAX, FP8_MAX) that keeps NaN (tl.clamp turned NaN into 448) and maps +-inf to +-FP8_MAX."""
    y = tl.where(y > FP8_MAX, FP8_MAX, y)
    return tl.where(y < -FP8_MAX, -FP8_MAX, y)


@triton.jit
def encode_fp8_bits(y, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr):
    """fp8 code (int32 in [0, 255]) of a saturated f32 value, round-to-nearest-even, with integer operations only.

    The exact path for backends whose own conversion cannot be trusted (the interpreter). |y| <= fp8 max is
    required (saturate_keep_nan first), so no overflow case exists. NaN -> 0x7F|sign (fn), 0x80 (fnuz), as torch.
    -0 -> 0x80 (fn), 0x00 (fnuz).
    """
    bits = y.to(tl.int32, bitcast=True)
    sign = (bits >> 31) & 1
    mag = bits & 0x7FFFFFFF
    exp_field = mag >> 23
    is_nan = mag > 0x7F800000
    # Normal fp8 result: round the f32 pattern itself at bit (23 - MAN_BITS); a carry moves into the exponent.
    shift: tl.constexpr = 23 - MAN_BITS
    rounded = (mag + ((1 << (shift - 1)) - 1) + ((mag >> shift) & 1)) >> shift
    normal_code = rounded - ((127 - (1 - EMIN)) << MAN_BITS)  # rebias 127 -> fp8 bias (= 1 - EMIN)
    # Subnormal fp8 result: integer multiple of 2^(EMIN - MAN_BITS) from the full significand; 2^MAN_BITS is the
    # smallest normal, whose code is exactly 2^MAN_BITS too.
    significand = (mag & 0x7FFFFF) | tl.where(exp_field > 0, 1 << 23, 0)
    unbiased = tl.maximum(exp_field, 1) - 127
    rshift = tl.minimum(23 + EMIN - MAN_BITS - unbiased, 31)
    sub_code = (significand + ((1 << (rshift - 1)) - 1) + ((significand >> rshift) & 1)) >> rshift
    code = tl.where(unbiased >= EMIN, normal_code, sub_code)
    if FNUZ:
        code = tl.where(code == 0, 0, code | (sign << 7))
        code = tl.where(is_nan, 0x80, code)
    else:
        code = code | (sign << 7)
        code = tl.where(is_nan, 0x7F | (sign << 7), code)
    return code


@triton.jit
def cast_to_fp8(
    y,
    FP8_DTYPE: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    CAST_MODE: tl.constexpr,
):
    """f32 -> fp8 by CAST_MODE: the exact encoder (y saturated), or the backend's conversion (cvt.rn.satfinite on
    NVIDIA)."""
    if CAST_MODE == CAST_EXACT:
        return encode_fp8_bits(y, MAN_BITS, EMIN, FNUZ).to(tl.uint8).to(FP8_DTYPE, bitcast=True)
    else:
        return y.to(FP8_DTYPE)


@triton.jit
def quantize(
    x,
    scale,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    CAST_MODE: tl.constexpr,
):
    """Twin of fp8ref: cast(saturate(f32(x) * scale)), scale broadcast by the caller's shapes; the clamp is left to
    the conversion where it saturates by itself (CAST_SATURATING_NATIVE)."""
    y = x.to(tl.float32) * scale
    if CAST_MODE != CAST_SATURATING_NATIVE:
        y = saturate_keep_nan(y, FP8_MAX)
    return cast_to_fp8(y, FP8_DTYPE, MAN_BITS, EMIN, FNUZ, CAST_MODE)
