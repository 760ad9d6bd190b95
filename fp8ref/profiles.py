"""Named raw-cast profiles: what each stack's float -> fp8 cast does, emulated and detected.

A raw cast (no scaling, no clamp) has no single semantics (SPEC §3). Every stack measured rounds finite values the
same way (nearest, ties to even, subnormals kept); they differ in what a finite overflow, an infinity and a NaN
become. A :class:`CastProfile` names one such behaviour per format; :func:`cast_codes` emulates it with the
integer encoder (:func:`fp8ref.encode.encode`); :func:`detect_profile` runs a probe through an unknown cast and says
which profile it is, or how it differs from the nearest one.

The reference ops never depend on these policies: they clamp to +-max before casting.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch

from fp8ref.encode import SpecialPolicy, encode
from fp8ref.formats import fmt
from fp8ref.vectors import probe_vector

__all__ = [
    "PROFILES",
    "CastProfile",
    "CodeDifference",
    "FormatPolicy",
    "ProfileMatch",
    "cast_codes",
    "code_differences",
    "detect_profile",
]


@dataclass(frozen=True)
class FormatPolicy:
    """What one cast does, for one format, with values that have no finite code. Keyword arguments of ``encode``.

    Attributes:
        overflow: finite values whose rounded magnitude exceeds max: "saturate" (+-max), "nan" or "inf".
        infinity: +-inf: "saturate", "nan" or "inf".
        nan_code: the code of a positive NaN (0x7F or 0x7E in fn formats, 0x80 in fnuz).
        nan_keeps_sign: fn formats: whether a negative NaN (and an overflow turned NaN) gets bit 7 set.
    """

    overflow: SpecialPolicy
    infinity: SpecialPolicy
    nan_code: int
    nan_keeps_sign: bool


@dataclass(frozen=True)
class CastProfile:
    """A named raw-cast behaviour: one :class:`FormatPolicy` per FP8 format."""

    name: str
    description: str
    e4m3fn: FormatPolicy
    e4m3fnuz: FormatPolicy
    e5m2: FormatPolicy
    e5m2fnuz: FormatPolicy

    def policy(self, fp8_dtype: torch.dtype) -> FormatPolicy:
        """The profile's policy for one format."""
        return getattr(self, fmt(fp8_dtype).name)


# fnuz formats have one NaN code, 0x80, and no infinity: a non-saturating cast sends overflow, +-inf and NaN there.
_FNUZ_TO_NAN = FormatPolicy("nan", "nan", 0x80, False)
_FNUZ_SATURATE = FormatPolicy("saturate", "saturate", 0x80, False)
_E5M2_TORCH = FormatPolicy("inf", "inf", 0x7F, True)

_PROFILE_LIST = (
    CastProfile(
        "torch-2.11-eager",
        "torch <= 2.11 eager .to() (CPU and CUDA agree on all 2^32 float32): non-saturating. e4m3fn overflow and "
        "+-inf -> NaN keeping the sign (0x7F/0xFF); e5m2 -> +-inf, NaN 0x7F/0xFF; fnuz -> 0x80.",
        e4m3fn=FormatPolicy("nan", "nan", 0x7F, True),
        e4m3fnuz=_FNUZ_TO_NAN,
        e5m2=_E5M2_TORCH,
        e5m2fnuz=_FNUZ_TO_NAN,
    ),
    CastProfile(
        "torch-2.12-eager",
        "torch >= 2.12 eager .to() (measured: torch 2.13.0 CPU): e4m3fn finite overflow AND +-inf saturate to "
        "+-448, NaN 0x7F/0xFF; e5m2 unchanged (overflow and +-inf -> +-inf); fnuz unchanged (-> 0x80).",
        e4m3fn=FormatPolicy("saturate", "saturate", 0x7F, True),
        e4m3fnuz=_FNUZ_TO_NAN,
        e5m2=_E5M2_TORCH,
        e5m2fnuz=_FNUZ_TO_NAN,
    ),
    CastProfile(
        "satfinite",
        "Saturate to finite: Triton x.to(tl.float8e4nv / tl.float8e5) on NVIDIA (cvt.rn.satfinite) and "
        "torch.compile on CUDA. Overflow and +-inf -> +-max; NaN -> 0x7F with its sign dropped (fnuz: 0x80).",
        e4m3fn=FormatPolicy("saturate", "saturate", 0x7F, False),
        e4m3fnuz=_FNUZ_SATURATE,
        e5m2=FormatPolicy("saturate", "saturate", 0x7F, False),
        e5m2fnuz=_FNUZ_SATURATE,
    ),
    CastProfile(
        "ocp-nosat",
        "OCP OFP8 non-saturating conversion as ml_dtypes implements it (measured: ml_dtypes 0.6.0): e4m3fn "
        "overflow and +-inf -> NaN keeping the sign (0x7F/0xFF); e5m2 -> +-inf, NaN 0x7E/0xFE (the quiet bit); "
        "fnuz -> 0x80.",
        e4m3fn=FormatPolicy("nan", "nan", 0x7F, True),
        e4m3fnuz=_FNUZ_TO_NAN,
        e5m2=FormatPolicy("inf", "inf", 0x7E, True),
        e5m2fnuz=_FNUZ_TO_NAN,
    ),
)

#: Profile name -> CastProfile, read-only, in declaration order (detect_profile's tie order).
PROFILES: Mapping[str, CastProfile] = types.MappingProxyType({p.name: p for p in _PROFILE_LIST})


def _profile(profile: str | CastProfile) -> CastProfile:
    if isinstance(profile, CastProfile):
        return profile
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {list(PROFILES)}, got {profile!r}")
    return PROFILES[profile]


def cast_codes(x: torch.Tensor, fp8_dtype: torch.dtype, profile: str | CastProfile = "satfinite") -> torch.Tensor:
    """Reference codes of a RAW cast ``x.to(fp8_dtype)`` (no scaling, no clamp) as the stack ``profile`` does it.

    Semantics:
        encode(x, fp8_dtype, **policy) with the profile's policy for the format: round to nearest, ties to even,
        subnormals kept, float64 rounded once; overflow / +-inf / NaN / -0 as the profile and format define.

    Returns:
        uint8 tensor of x's shape on x's device.
    """
    policy = _profile(profile).policy(fp8_dtype)
    return encode(x, fp8_dtype, **dataclasses.asdict(policy))


class CodeDifference(NamedTuple):
    """One input on which two casts disagree."""

    value: float
    bits: int
    expected: int
    actual: int

    def __str__(self) -> str:
        return f"{self.value!r} (bits {self.bits:#x}): expected {self.expected:#04x}, got {self.actual:#04x}"


def code_differences(
    x: torch.Tensor,
    expected: torch.Tensor,
    actual: torch.Tensor,
    fp8_dtype: torch.dtype,
    *,
    nan_as_class: bool = False,
) -> tuple[CodeDifference, ...]:
    """Every input where two uint8 code tensors differ, in input order.

    Args:
        x: the inputs (any float dtype); ``bits`` reports its unsigned bit pattern.
        expected: the reference's uint8 codes, x's shape (fp8 tensors are viewed as uint8).
        actual: the codes under test, same shape.
        fp8_dtype: the format, for ``nan_as_class``.
        nan_as_class: treat any two NaN codes of the format as equal (sign and payload differ across stacks).
    """
    expected = expected.view(torch.uint8).cpu().flatten()
    actual = actual.view(torch.uint8).cpu().flatten()
    differ = expected != actual
    if nan_as_class:
        nan_codes = torch.zeros(256, dtype=torch.bool)
        nan_codes[list(fmt(fp8_dtype).nan_codes)] = True
        differ &= ~(nan_codes[expected.long()] & nan_codes[actual.long()])
    width = 8 * x.element_size()
    int_dtype = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    idx = differ.nonzero().flatten()
    xs = x.detach().cpu().flatten()
    values = xs[idx].to(torch.float64).tolist()
    bits = [b % (1 << width) for b in xs.view(int_dtype)[idx].tolist()]
    return tuple(
        CodeDifference(v, b, e, a) for v, b, e, a in zip(values, bits, expected[idx].tolist(), actual[idx].tolist())
    )


@dataclass(frozen=True)
class ProfileMatch:
    """Result of :func:`detect_profile`.

    Attributes:
        format: the fp8 format's short name.
        name: the profile that matches every probe exactly, or None. Profiles that agree on every probe of this
            format (e.g. torch-2.11-eager and ocp-nosat on e4m3fn) cannot be told apart by any cast: ``name`` is the
            first of them in PROFILES order and ``matching`` lists all.
        matching: every exactly matching profile, in PROFILES order.
        nearest: the profile with the fewest differing probes (the first on a tie); equals ``name`` on a match.
        differences: the probes on which the cast differs from ``nearest``: (input value, input float32 bits,
            expected code, actual code).
        counts: (profile name, number of differing probes) for every profile.
        probes: number of probe inputs.
    """

    format: str
    name: str | None
    matching: tuple[str, ...]
    nearest: str
    differences: tuple[CodeDifference, ...]
    counts: tuple[tuple[str, int], ...]
    probes: int

    @property
    def matches(self) -> bool:
        """Whether the cast matched a named profile."""
        return self.name is not None

    def __str__(self) -> str:
        if self.matches:
            others = [m for m in self.matching if m != self.name]
            also = f" (indistinguishable on {self.format}: {', '.join(others)})" if others else ""
            return f"{self.format} cast matches profile {self.name!r} on all {self.probes} probes{also}"
        shown = 20
        lines = [
            f"{self.format} cast matches no profile; nearest {self.nearest!r} differs on "
            f"{len(self.differences)} of {self.probes} probes:",
            *(f"  {d}" for d in self.differences[:shown]),
        ]
        if len(self.differences) > shown:
            lines.append(f"  ... and {len(self.differences) - shown} more")
        lines.append("  differing probes per profile: " + ", ".join(f"{n} {c}" for n, c in self.counts))
        return "\n".join(lines)


def detect_profile(
    cast_fn: Callable[[torch.Tensor], torch.Tensor], fp8_dtype: torch.dtype, *, device: str | torch.device = "cpu"
) -> ProfileMatch:
    """Which named profile a raw cast implements, from its codes on :func:`fp8ref.vectors.probe_vector`.

    Semantics:
        1. x = probe_vector(fp8_dtype) (float32: ties in several binades incl. subnormal ties, the top-of-range tie,
           finite overflow, +-inf, NaN of both signs, +-0, min_subnormal/2, one ulp around each tie), moved to
           ``device``; actual = cast_fn(x) viewed as uint8, back on the CPU.
        2. For every profile, expected = cast_codes(x, fp8_dtype, profile); compared byte for byte, NaN codes
           included (profiles define the NaN code, so NaN is not compared as a class here).

    Args:
        cast_fn: maps a float32 tensor to an fp8 tensor of ``fp8_dtype`` and the same shape, e.g.
            ``lambda x: x.to(torch.float8_e4m3fn)``.
        fp8_dtype: the fp8 format under test.
        device: where the probe is run.

    Raises:
        TypeError: cast_fn returned another dtype. ValueError: it returned another shape.
    """
    f = fmt(fp8_dtype)
    x = probe_vector(f.dtype)
    out = cast_fn(x.to(device))
    if out.dtype != f.dtype:
        raise TypeError(f"cast_fn must return {f.dtype}, got {out.dtype}")
    if out.shape != x.shape:
        raise ValueError(f"cast_fn must keep the shape {tuple(x.shape)}, got {tuple(out.shape)}")
    actual = out.view(torch.uint8).cpu()
    counts = tuple((name, int((cast_codes(x, f.dtype, p) != actual).sum())) for name, p in PROFILES.items())
    matching = tuple(name for name, n in counts if n == 0)
    nearest = min(counts, key=lambda item: item[1])[0]
    differences = code_differences(x, cast_codes(x, f.dtype, nearest), actual, f.dtype)
    return ProfileMatch(
        format=f.name,
        name=matching[0] if matching else None,
        matching=matching,
        nearest=nearest,
        differences=differences,
        counts=counts,
        probes=x.numel(),
    )
