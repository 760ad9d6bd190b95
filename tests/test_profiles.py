"""Named cast profiles: literal special-value bytes, this machine's torch and ml_dtypes detected, mutants caught."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
import torch

from fp8ref.formats import all_formats
from fp8ref.profiles import PROFILES, cast_codes, code_differences, detect_profile
from fp8ref.vectors import all_bf16, all_fp16, fp32_edge_set, probe_vector

FORMATS = all_formats()
FORMAT_IDS = [f.name for f in FORMATS]
TORCH_AT_LEAST_2_12 = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 12)
needs_torch_2_12 = pytest.mark.skipif(not TORCH_AT_LEAST_2_12, reason="torch >= 2.12 cast semantics")

# Profiles that agree on every probe of a format cannot be told apart; these are the exact match sets.
TORCH_2_12_MATCHES = {
    "e4m3fn": ("torch-2.12-eager",),
    "e4m3fnuz": ("torch-2.11-eager", "torch-2.12-eager", "ocp-nosat"),
    "e5m2": ("torch-2.11-eager", "torch-2.12-eager"),
    "e5m2fnuz": ("torch-2.11-eager", "torch-2.12-eager", "ocp-nosat"),
}
ML_DTYPES_MATCHES = {
    "e4m3fn": ("torch-2.11-eager", "ocp-nosat"),
    "e4m3fnuz": ("torch-2.11-eager", "torch-2.12-eager", "ocp-nosat"),
    "e5m2": ("ocp-nosat",),
    "e5m2fnuz": ("torch-2.11-eager", "torch-2.12-eager", "ocp-nosat"),
}

# Special inputs, in this order: 2*max, -2*max (finite overflow), the top-of-range tie (464 / 248 / 61440 / 61440),
# +inf, -inf, +NaN, -NaN, -0.
SPECIAL_NAMES = ("2max", "-2max", "top-tie", "+inf", "-inf", "+nan", "-nan", "-0")
TOP_TIE = {"e4m3fn": 464.0, "e4m3fnuz": 248.0, "e5m2": 61440.0, "e5m2fnuz": 61440.0}
_FNUZ_NOSAT = (0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)
SPECIAL_CODES = {
    "torch-2.11-eager": {
        "e4m3fn": (0x7F, 0xFF, 0x7E, 0x7F, 0xFF, 0x7F, 0xFF, 0x80),
        "e4m3fnuz": _FNUZ_NOSAT,
        "e5m2": (0x7C, 0xFC, 0x7C, 0x7C, 0xFC, 0x7F, 0xFF, 0x80),
        "e5m2fnuz": _FNUZ_NOSAT,
    },
    "torch-2.12-eager": {
        "e4m3fn": (0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0x7F, 0xFF, 0x80),
        "e4m3fnuz": _FNUZ_NOSAT,
        "e5m2": (0x7C, 0xFC, 0x7C, 0x7C, 0xFC, 0x7F, 0xFF, 0x80),
        "e5m2fnuz": _FNUZ_NOSAT,
    },
    "satfinite": {
        "e4m3fn": (0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0x7F, 0x7F, 0x80),
        "e4m3fnuz": (0x7F, 0xFF, 0x7F, 0x7F, 0xFF, 0x80, 0x80, 0x00),
        "e5m2": (0x7B, 0xFB, 0x7B, 0x7B, 0xFB, 0x7F, 0x7F, 0x80),
        "e5m2fnuz": (0x7F, 0xFF, 0x7F, 0x7F, 0xFF, 0x80, 0x80, 0x00),
    },
    "ocp-nosat": {
        "e4m3fn": (0x7F, 0xFF, 0x7E, 0x7F, 0xFF, 0x7F, 0xFF, 0x80),
        "e4m3fnuz": _FNUZ_NOSAT,
        "e5m2": (0x7C, 0xFC, 0x7C, 0x7C, 0xFC, 0x7E, 0xFE, 0x80),
        "e5m2fnuz": _FNUZ_NOSAT,
    },
}
# Source dtype -> (same-width int dtype, exponent bits, fraction bits), to build NaNs of a chosen sign bit by bits
# (float32 -> bfloat16 .to() on CPU turns every NaN into 0xFFFF, so converting a NaN would lose its sign).
SOURCE_LAYOUT = {
    torch.float64: (torch.int64, 11, 52),
    torch.float32: (torch.int32, 8, 23),
    torch.bfloat16: (torch.int16, 8, 7),
    torch.float16: (torch.int16, 5, 10),
}


def _quiet_nan(dtype: torch.dtype, negative: bool) -> torch.Tensor:
    int_dtype, exp_bits, frac_bits = SOURCE_LAYOUT[dtype]
    bits = (((1 << exp_bits) - 1) << frac_bits) | (1 << (frac_bits - 1))
    if negative:
        bits -= 1 << (exp_bits + frac_bits)  # set the sign bit, written as a two's-complement integer
    return torch.tensor([bits], dtype=int_dtype).view(dtype)


def _special_inputs(f, dtype: torch.dtype) -> torch.Tensor:
    finite = torch.tensor([2 * f.max, -2 * f.max, TOP_TIE[f.name], torch.inf, -torch.inf], dtype=dtype)
    neg_zero = torch.tensor([-0.0], dtype=dtype)
    return torch.cat([finite, _quiet_nan(dtype, False), _quiet_nan(dtype, True), neg_zero])


def _ml_dtypes_cast(f):
    def cast(x: torch.Tensor) -> torch.Tensor:
        with np.errstate(invalid="ignore", over="ignore"):
            out = x.numpy().astype(getattr(ml_dtypes, f"float8_{f.name}"))
        return torch.from_numpy(out.view(np.uint8).copy()).view(f.dtype)

    return cast


def _round_half_away_cast(f):
    """A deliberately wrong cast: torch's, except that exact ties go away from zero instead of to even."""

    def cast(x: torch.Tensor) -> torch.Tensor:
        toward = torch.nextafter(x, torch.zeros_like(x)).to(f.dtype)
        away = torch.nextafter(x, torch.copysign(torch.full_like(x, torch.inf), x)).to(f.dtype)
        tie = (toward.to(torch.float64) + away.to(torch.float64) == 2 * x.to(torch.float64)) & (
            toward.view(torch.uint8) != away.view(torch.uint8)
        )
        return torch.where(tie, away.view(torch.uint8), x.to(f.dtype).view(torch.uint8)).view(f.dtype)

    return cast


def _flush_to_zero_cast(f):
    """A deliberately wrong cast: torch's, with every nonzero subnormal result flushed to (signed, in fn) zero."""

    def cast(x: torch.Tensor) -> torch.Tensor:
        codes = x.to(f.dtype).view(torch.uint8)
        magnitude = codes & 0x7F
        subnormal = (magnitude > 0) & (magnitude < (1 << f.man_bits))
        zero = torch.zeros_like(codes) if f.fnuz else codes & 0x80
        return torch.where(subnormal, zero, codes).view(f.dtype)

    return cast


def _f32_bits(x: torch.Tensor) -> list[int]:
    return [b % (1 << 32) for b in x.view(torch.int32).tolist()]


@pytest.mark.parametrize("dtype", list(SOURCE_LAYOUT), ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_cast_codes_give_the_profile_bytes_for_overflow_tie_inf_nan_and_negative_zero(profile, f, dtype):
    got = cast_codes(_special_inputs(f, dtype), f.dtype, profile).tolist()
    expected = list(SPECIAL_CODES[profile][f.name])
    assert got == expected, "\n".join(
        f"{name}: expected {e:#04x}, got {g:#04x}" for name, e, g in zip(SPECIAL_NAMES, expected, got) if e != g
    )


@needs_torch_2_12
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_this_torch_cast_is_detected_as_torch_2_12_eager(f):
    match = detect_profile(lambda x: x.to(f.dtype), f.dtype)
    assert match.matching == TORCH_2_12_MATCHES[f.name], str(match)
    assert match.name == match.matching[0]
    assert match.matches
    assert match.differences == ()


@needs_torch_2_12
@pytest.mark.parametrize("source", ["bf16", "fp16", "fp32-edge"])
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_torch_2_12_eager_profile_equals_this_torch_cast_unclamped_byte_for_byte(f, source):
    x = {"bf16": all_bf16, "fp16": all_fp16}.get(source, lambda: fp32_edge_set(f.dtype))()
    diffs = code_differences(x, cast_codes(x, f.dtype, "torch-2.12-eager"), x.to(f.dtype), f.dtype)
    assert not diffs, f"{len(diffs)} of {x.numel()} inputs differ, first: {diffs[0]}"


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_ml_dtypes_cast_is_detected_as_ocp_nosat(f):
    match = detect_profile(_ml_dtypes_cast(f), f.dtype)
    assert match.matching == ML_DTYPES_MATCHES[f.name], str(match)
    assert "ocp-nosat" in match.matching


@needs_torch_2_12
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_round_half_away_cast_is_not_matched_and_exactly_its_ties_to_even_down_are_listed(f):
    match = detect_profile(_round_half_away_cast(f), f.dtype)
    assert not match.matches
    assert match.name is None
    assert match.nearest == TORCH_2_12_MATCHES[f.name][0]
    # Independent expectation: a tie between magnitude codes c and c+1 rounds to even, i.e. toward zero, iff c is
    # even; half-away then gives c+1 instead. The top-of-range tie saturates / overflows in torch, so no c+1 exists.
    values = [f.decode(c) for c in range(f.max_code + 1)]
    ties_down = {(a + b) / 2: c for c, (a, b) in enumerate(itertools.pairwise(values)) if c % 2 == 0}
    probe = probe_vector(f.dtype)
    expected = {b for b, v in zip(_f32_bits(probe), probe.tolist()) if abs(v) in ties_down}
    assert {d.bits for d in match.differences} == expected
    for d in match.differences:
        assert d.actual & 0x7F == ties_down[abs(d.value)] + 1, str(d)
    assert str(match.differences[0]) in str(match)


@needs_torch_2_12
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_flush_to_zero_cast_is_not_matched_and_exactly_its_subnormal_results_are_listed(f):
    match = detect_profile(_flush_to_zero_cast(f), f.dtype)
    assert not match.matches
    assert match.nearest == TORCH_2_12_MATCHES[f.name][0]
    probe = probe_vector(f.dtype)
    magnitude = cast_codes(probe, f.dtype, "torch-2.12-eager") & 0x7F
    subnormal = ((magnitude > 0) & (magnitude < (1 << f.man_bits))).tolist()
    expected = {b for b, s in zip(_f32_bits(probe), subnormal) if s}
    assert {d.bits for d in match.differences} == expected
    assert f.min_subnormal in {d.value for d in match.differences}
    assert all(d.actual & 0x7F == 0 for d in match.differences)


def test_detect_profile_rejects_a_cast_returning_another_dtype_or_shape():
    with pytest.raises(TypeError, match="must return"):
        detect_profile(lambda x: x.to(torch.float8_e5m2), torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="keep the shape"):
        detect_profile(lambda x: x[:-1].to(torch.float8_e4m3fn), torch.float8_e4m3fn)


def test_cast_codes_rejects_unknown_profile_names():
    with pytest.raises(ValueError, match="profile must be one of"):
        cast_codes(torch.zeros(1), torch.float8_e4m3fn, "torch-eager")
