"""The four FP8 formats as data: exact constants, a decoder for all 256 codes, value-ordered code tables.

Constants are written out from the format definitions (OCP OFP8 for the ``fn`` formats, the AMD/Graphcore
"fnuz" variants for the others), never derived from ``torch.finfo``: its ``eps`` for e5m2fnuz is 0.125 while the
true spacing at 1.0 is 0.25 (SPEC §2).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

__all__ = ["FP8_DTYPES", "Fp8Format", "all_formats", "dtype_id", "fmt"]


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format. Codes are unsigned bytes: bit 7 sign, then ``exp_bits`` exponent bits, then ``man_bits``.

    Attributes:
        name: short name used in ids and reports ("e4m3fn").
        dtype: the torch dtype.
        exp_bits, man_bits, bias: field widths and exponent bias.
        max: largest finite value; ``max_code`` its positive code.
        min_normal, min_subnormal: smallest positive normal / subnormal value.
        nan_codes: every code that decodes to NaN.
        inf_codes: (+inf, -inf) codes, or () when the format has no infinity.
        has_neg_zero: whether 0x80 is -0 (fn formats) rather than NaN (fnuz).
    """

    name: str
    dtype: torch.dtype
    exp_bits: int
    man_bits: int
    bias: int
    max: float
    max_code: int
    min_normal: float
    min_subnormal: float
    nan_codes: frozenset[int]
    inf_codes: tuple[int, ...]
    has_neg_zero: bool

    @property
    def fnuz(self) -> bool:
        """Whether the format is a "finite, no negative zero" one (e4m3fnuz, e5m2fnuz: NaN is 0x80 alone)."""
        return not self.has_neg_zero

    @property
    def canonical_nan(self) -> int:
        """The code torch produces for a positive NaN (0x7F for fn formats, 0x80 for fnuz)."""
        return 0x80 if self.fnuz else 0x7F

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal."""
        return 1 - self.bias

    def decode(self, code: int) -> float:
        """Value of one code (float64; NaN for NaN codes; +-inf; -0.0 for 0x80 in fn formats)."""
        if not 0 <= code <= 0xFF:
            raise ValueError(f"fp8 code must be in [0, 255], got {code}")
        if code in self.nan_codes:
            return math.nan
        if code in self.inf_codes:
            return math.inf if code < 0x80 else -math.inf
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> self.man_bits) & ((1 << self.exp_bits) - 1)
        m = code & ((1 << self.man_bits) - 1)
        if e == 0:
            return sign * m * 2.0 ** (self.emin - self.man_bits)
        return sign * (1 + m / (1 << self.man_bits)) * 2.0 ** (e - self.bias)

    @functools.cached_property
    def values(self) -> torch.Tensor:
        """(256,) float64: ``values[c]`` is the value of code ``c``."""
        return torch.tensor([self.decode(c) for c in range(256)], dtype=torch.float64)

    @functools.cached_property
    def ordered_codes(self) -> torch.Tensor:
        """(n,) uint8: every non-NaN code sorted by value (-0 just before +0; -inf first, +inf last)."""
        vals = self.values
        finite_or_inf = [c for c in range(256) if c not in self.nan_codes]
        key = [(vals[c].item(), 0 if c & 0x80 else 1) for c in finite_or_inf]
        order = sorted(range(len(finite_or_inf)), key=key.__getitem__)
        return torch.tensor([finite_or_inf[i] for i in order], dtype=torch.uint8)

    @functools.cached_property
    def code_rank(self) -> torch.Tensor:
        """(256,) int64: position of each code in value order (-0 and +0 share a rank); -1 for NaN codes."""
        rank = torch.full((256,), -1, dtype=torch.int64)
        r = -1
        prev = None
        for c in self.ordered_codes.tolist():
            v = self.decode(c)
            if v != prev:
                r += 1
                prev = v
            rank[c] = r
        return rank


def _nan_set(*codes: int) -> frozenset[int]:
    return frozenset(codes)


E4M3FN = Fp8Format(
    "e4m3fn", torch.float8_e4m3fn, 4, 3, 7, 448.0, 0x7E, 2.0**-6, 2.0**-9, _nan_set(0x7F, 0xFF), (), True
)
E4M3FNUZ = Fp8Format(
    "e4m3fnuz", torch.float8_e4m3fnuz, 4, 3, 8, 240.0, 0x7F, 2.0**-7, 2.0**-10, _nan_set(0x80), (), False
)
E5M2 = Fp8Format(
    "e5m2",
    torch.float8_e5m2,
    5,
    2,
    15,
    57344.0,
    0x7B,
    2.0**-14,
    2.0**-16,
    _nan_set(0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF),
    (0x7C, 0xFC),
    True,
)
E5M2FNUZ = Fp8Format(
    "e5m2fnuz", torch.float8_e5m2fnuz, 5, 2, 16, 57344.0, 0x7F, 2.0**-15, 2.0**-17, _nan_set(0x80), (), False
)

_BY_DTYPE = {f.dtype: f for f in (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ)}
_BY_NAME = {f.name: f for f in _BY_DTYPE.values()}
FP8_DTYPES: tuple[torch.dtype, ...] = tuple(_BY_DTYPE)


def fmt(fp8_dtype: torch.dtype | str | Fp8Format) -> Fp8Format:
    """The Fp8Format for a torch fp8 dtype, its short name ("e4m3fn") or an Fp8Format.

    Raises:
        TypeError: for anything that is not one of the four FP8 formats.
    """
    if isinstance(fp8_dtype, Fp8Format):
        return fp8_dtype
    found = _BY_DTYPE.get(fp8_dtype) if isinstance(fp8_dtype, torch.dtype) else _BY_NAME.get(str(fp8_dtype))
    if found is None:
        raise TypeError(f"fp8_dtype must be one of {[f.name for f in _BY_DTYPE.values()]}, got {fp8_dtype!r}")
    return found


def all_formats() -> tuple[Fp8Format, ...]:
    """The four formats: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz."""
    return tuple(_BY_DTYPE.values())


_DTYPE_IDS = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    **{f.dtype: f.name for f in _BY_DTYPE.values()},
}


def dtype_id(dtype: torch.dtype | str) -> str:
    """The project's short name of a dtype: "bf16", "f16", "f32", "f64", or the fp8 format's name ("e4m3fn").

    Accepts the dtype or its ``str()`` ("torch.bfloat16") / attribute name ("bfloat16"). Used in test ids, report
    labels and benchmark rows, so every place spells a dtype the same way.
    """
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.removeprefix("torch."))
    try:
        return _DTYPE_IDS[dtype]
    except KeyError:
        raise KeyError(f"no short name for {dtype}; known: {sorted(_DTYPE_IDS.values())}") from None
