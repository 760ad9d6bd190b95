"""FP8 encoding from first principles: float tensors -> fp8 codes (uint8), round to nearest even, explicit policies.

Two independent implementations of one definition (gfloat style):

- :func:`encode`: vectorized torch integer operations on the IEEE bit patterns, any shape, any device. This is the
  reference every raw-cast profile (:mod:`fp8ref.profiles`) is built on.
- :func:`encode_scalar_exact`: one Python float at a time, exact rational arithmetic (``fractions.Fraction``) over the
  decoded code table of :mod:`fp8ref.formats`. Slow; tests check :func:`encode` against it.

Neither calls a float8 cast nor rounds with float arithmetic, so neither inherits the rounding of a stack under test:
torch and ml_dtypes round float64 sources through float32 first (SPEC §3), e.g. 1.0625 + 2^-40 becomes 0x38 (1.0)
in e4m3fn instead of 0x39 (1.125). Here float64 is rounded once, from its 52-bit fraction.

Policies (keyword arguments of both functions) say what happens to values that have no finite code:
    overflow: a finite value whose rounded magnitude exceeds the format's max. "saturate" -> +-max, "nan" -> the NaN
        rule below with the input's sign, "inf" -> +-inf (e5m2 only).
    infinity: +-inf inputs, same choices.
    nan_code: the code a positive NaN becomes (None: the format's canonical NaN, 0x7F for fn formats, 0x80 for fnuz).
    nan_keeps_sign: fn formats only: a negative NaN becomes ``nan_code | 0x80``. fnuz formats have one NaN, 0x80.
The finite rounding and -0 are not policies: -0 stays -0 (0x80) in fn formats; fnuz formats have no -0, so every zero
result, including a negative value rounding to zero, is 0x00.
"""

from __future__ import annotations

import bisect
import functools
import math
from fractions import Fraction
from typing import Literal

import torch

from fp8ref.formats import Fp8Format, fmt

__all__ = ["SOURCE_DTYPES", "SPECIAL_POLICIES", "SpecialPolicy", "encode", "encode_scalar_exact"]

SpecialPolicy = Literal["saturate", "nan", "inf"]
SPECIAL_POLICIES: tuple[str, ...] = ("saturate", "nan", "inf")

# Source dtype -> (same-width integer dtype, exponent bits, fraction bits).
_SOURCES: dict[torch.dtype, tuple[torch.dtype, int, int]] = {
    torch.float64: (torch.int64, 11, 52),
    torch.float32: (torch.int32, 8, 23),
    torch.bfloat16: (torch.int16, 8, 7),
    torch.float16: (torch.int16, 5, 10),
}
SOURCE_DTYPES: tuple[torch.dtype, ...] = tuple(_SOURCES)

# Right shifts are capped at 62 so int64 shifts stay defined and 2 * remainder cannot overflow. Capping never
# changes a result: significands have at most 53 bits, so for any shift >= 54 the discarded part is below half a
# quantum and the value rounds to 0 both with and without the cap.
_MAX_SHIFT = 62


def _special_code(policy: str, negative: bool, f: Fp8Format, nan_code: int | None, nan_keeps_sign: bool) -> int:
    """The code a NaN (policy "nan"), an overflow or an infinity becomes under ``policy``, for one sign."""
    sign_bit = 0x80 if negative else 0x00
    if policy == "saturate":
        return f.max_code | sign_bit
    if policy == "inf":
        if not f.inf_codes:
            raise ValueError(f"{f.name} has no infinity; policy 'inf' is impossible")
        return f.inf_codes[1] if negative else f.inf_codes[0]
    if policy == "nan":
        code = f.canonical_nan if nan_code is None else nan_code
        if code not in f.nan_codes or (f.has_neg_zero and code & 0x80):
            raise ValueError(f"nan_code must be a positive NaN code of {f.name}, got {code:#04x}")
        return code | sign_bit if (nan_keeps_sign and f.has_neg_zero) else code
    raise ValueError(f"policy must be one of {SPECIAL_POLICIES}, got {policy!r}")


def _bit_length(v: torch.Tensor) -> torch.Tensor:
    """Number of significant bits of each non-negative int64 below 2^63 (0 for 0), by binary search on shifts."""
    length = torch.zeros_like(v)
    for width in (32, 16, 8, 4, 2, 1):
        high = (v >> width) != 0
        length = length + torch.where(high, width, 0)
        v = torch.where(high, v >> width, v)
    return length + (v != 0).long()


def encode(
    x: torch.Tensor,
    fp8_dtype: torch.dtype,
    *,
    overflow: SpecialPolicy = "saturate",
    infinity: SpecialPolicy = "saturate",
    nan_code: int | None = None,
    nan_keeps_sign: bool = True,
) -> torch.Tensor:
    """FP8 codes of ``x`` (float64/float32/bfloat16/float16, any shape, any device) as a uint8 tensor.

    Semantics:
        1. Read sign s, biased exponent and fraction from x's bit pattern. The exact value is |x| = sig * 2^e0 with
           an integer significand sig (implicit bit added for normals). Nothing is rounded yet; float64 keeps all 52
           fraction bits (no float32 step, so no double rounding).
        2. NaN -> the NaN rule (``nan_code``, ``nan_keeps_sign``); +-inf -> the ``infinity`` policy.
        3. Finite: E = floor(log2|x|); the fp8 quantum at |x| is 2^(max(E, emin) - man_bits), i.e. subnormal spacing
           below the min normal and no flush to zero. n = sig * 2^e0 / quantum rounded to nearest, ties to even n,
           using only integer shifts and compares. The magnitude code is ((max(E, emin) - emin) << man_bits) + n;
           a carry out of the mantissa moves to the next binade by the addition itself.
        4. Overflow is decided AFTER rounding, as if the exponent range were unbounded: magnitude code > max_code
           -> the ``overflow`` policy. Hence the top-of-range ties differ (SPEC §2): 464 -> 448 (0x7E) in e4m3fn
           (the next step, 480, has an odd mantissa), but 248 (e4m3fnuz) and 61440 (e5m2, e5m2fnuz) round up to
           256 / 65536 and overflow.
        5. Sign: bit 7 = s for every finite result in fn formats (-0 -> 0x80, -tiny -> 0x80); in fnuz formats a zero
           result is 0x00 whatever s (0x80 is their NaN).

    The defaults (saturate overflow and +-inf, canonical NaN keeping its sign) are a convenience for callers that
    clamp first; a raw cast of a named stack is ``fp8ref.profiles.cast_codes``.

    Args:
        x: source values; bits are read through a same-width integer view, so strides and device are preserved.
        fp8_dtype: one of the four torch fp8 dtypes (or its short name).
        overflow: finite overflow -> "saturate" (+-max), "nan" or "inf".
        infinity: +-inf -> "saturate", "nan" or "inf".
        nan_code: the code of a positive NaN; None for the format's canonical NaN (0x7F fn, 0x80 fnuz).
        nan_keeps_sign: in fn formats, whether a negative NaN (or an overflow turned NaN) gets bit 7 set.

    Returns:
        uint8 tensor of x's shape on x's device.

    Raises:
        TypeError: unsupported source dtype or fp8 dtype.
        ValueError: an unknown policy, "inf" for a format without infinity, or a nan_code that is not a positive
            NaN code of the format.
    """
    f = fmt(fp8_dtype)
    if x.dtype not in _SOURCES:
        raise TypeError(f"encode takes {[str(d) for d in _SOURCES]}, got {x.dtype}")
    int_dtype, exp_bits, frac_bits = _SOURCES[x.dtype]
    special = {
        p: (_special_code(p, False, f, nan_code, nan_keeps_sign), _special_code(p, True, f, nan_code, nan_keeps_sign))
        for p in {overflow, infinity, "nan"}
    }

    bits = x.view(int_dtype).to(torch.int64)  # sign-extended: negative <=> sign bit set
    negative = bits < 0
    frac = bits & ((1 << frac_bits) - 1)
    exp_field = (bits >> frac_bits) & ((1 << exp_bits) - 1)
    is_special = exp_field == (1 << exp_bits) - 1
    is_nan = is_special & (frac != 0)
    is_inf = is_special & (frac == 0)

    src_bias = (1 << (exp_bits - 1)) - 1
    sig = torch.where(exp_field == 0, frac, frac | (1 << frac_bits))
    e0 = torch.clamp(exp_field, min=1) - src_bias - frac_bits  # |x| = sig * 2^e0
    exponent = e0 + _bit_length(sig) - 1  # floor(log2|x|); below emin for zero, which then encodes as n = 0
    binade = torch.clamp(exponent, min=f.emin)
    # Every source has >= 7 fraction bits and fp8 <= 3, and every source subnormal lies below every fp8 subnormal
    # quantum (f16 2^-24 < 2^-17), so the shift is never negative.
    shift = torch.clamp(binade - f.man_bits - e0, max=_MAX_SHIFT)

    n = sig >> shift
    twice_rem = (sig - (n << shift)) << 1  # 2 * discarded part, compared against one quantum = 2^shift
    quantum = torch.ones_like(shift) << shift
    round_up = (twice_rem > quantum) | ((twice_rem == quantum) & ((n & 1) == 1))
    magnitude = ((binade - f.emin) << f.man_bits) + n + round_up.long()

    sign_bit = negative.long() << 7
    code = magnitude | sign_bit
    if f.fnuz:
        code = torch.where(magnitude == 0, 0, code)

    def pick(policy: str) -> torch.Tensor:
        positive, negative_code = special[policy]
        return torch.where(negative, negative_code, positive)

    code = torch.where(magnitude > f.max_code, pick(overflow), code)
    code = torch.where(is_inf, pick(infinity), code)
    code = torch.where(is_nan, pick("nan"), code)
    return code.to(torch.uint8)


@functools.cache
def _exact_grid(f: Fp8Format) -> tuple[tuple[Fraction, ...], tuple[int, ...]]:
    """Non-negative finite values (as Fractions) and their codes, ascending, plus one step past max.

    The step past max is the value the format would have with one more exponent (480 e4m3fn, 256 e4m3fnuz, 65536
    e5m2/e5m2fnuz); its code max_code + 1 has the parity of that step's mantissa, so ties against it follow the
    same even rule as every other pair.
    """
    values = [Fraction(f.decode(c)) for c in range(f.max_code + 1)]
    past_max = 2 * values[-1] - values[-2]
    return (*values, past_max), (*range(f.max_code + 1), f.max_code + 1)


def encode_scalar_exact(
    value: float,
    fp8_dtype: torch.dtype,
    *,
    overflow: SpecialPolicy = "saturate",
    infinity: SpecialPolicy = "saturate",
    nan_code: int | None = None,
    nan_keeps_sign: bool = True,
) -> int:
    """The FP8 code of one Python float, by exact rational arithmetic. Slow test oracle for :func:`encode`.

    Semantics:
        Same definition and keyword arguments as :func:`encode`, computed independently: |value| becomes an exact
        Fraction and is placed (bisect) among the exact values of codes 0..max_code and one step past max; the
        nearer neighbour wins, a tie goes to the neighbour with an even code (the mantissa's last bit). Landing on
        the step past max is an overflow. The sign comes from ``math.copysign`` (so -0.0 and -NaN keep it).
    """
    f = fmt(fp8_dtype)
    negative = math.copysign(1.0, value) < 0
    special = {p: _special_code(p, negative, f, nan_code, nan_keeps_sign) for p in {overflow, infinity, "nan"}}
    if math.isnan(value):
        return special["nan"]
    if math.isinf(value):
        return special[infinity]
    values, codes = _exact_grid(f)
    target = abs(Fraction(value))
    i = bisect.bisect_left(values, target)
    if i == len(values):
        return special[overflow]
    if values[i] == target:
        code = codes[i]
    else:
        below, above = target - values[i - 1], values[i] - target
        if below != above:
            code = codes[i - 1] if below < above else codes[i]
        else:
            code = codes[i - 1] if codes[i - 1] % 2 == 0 else codes[i]
    if code > f.max_code:
        return special[overflow]
    if code == 0 and f.fnuz:
        return 0x00
    return code | (0x80 if negative else 0x00)
