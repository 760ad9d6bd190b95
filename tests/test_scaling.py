"""fp8ref.scaling against independent derivations: exact rationals, literal bit patterns, torch's own ops."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from fp8ref.formats import all_formats, fmt
from fp8ref.scaling import EPS, amax_to_scale, round_scale_to_power_of_2, tensor_to_amax, to_fp8_saturated

FP8 = [f.dtype for f in all_formats()]


def _f32_bits(value: float) -> int:
    return torch.tensor([value], dtype=torch.float32).view(torch.int32).item()


def _round_rational_to_f32(r: Fraction) -> float:
    """Correctly rounded (RNE) f32 of a positive rational, by exact arithmetic (independent of float division)."""
    e = math.floor(math.log2(r.numerator) - math.log2(r.denominator))
    while Fraction(2) ** e > r:
        e -= 1
    while Fraction(2) ** (e + 1) <= r:
        e += 1
    quantum = Fraction(2) ** (e - 23)
    q, rem = divmod(r, quantum)
    if rem * 2 > quantum or (rem * 2 == quantum and q % 2 == 1):
        q += 1
    return float(q * quantum)


@pytest.mark.parametrize(
    ("fp8_dtype", "pow2", "expected"),
    [
        (torch.float8_e4m3fn, False, 447999985582080.0),
        (torch.float8_e4m3fn, True, 2.0**48),
        (torch.float8_e4m3fnuz, False, 240000004259840.0),
        (torch.float8_e4m3fnuz, True, 2.0**47),
    ],
    ids=["e4m3fn", "e4m3fn-pow2", "e4m3fnuz", "e4m3fnuz-pow2"],
)
def test_all_zero_slice_gets_eps_scale_with_spec_bits(fp8_dtype, pow2, expected):
    scale = amax_to_scale(torch.zeros(1, dtype=torch.bfloat16), fp8_dtype, pow2)
    assert scale.view(torch.int32).item() == _f32_bits(expected)


@pytest.mark.parametrize("fp8_dtype", FP8, ids=lambda d: fmt(d).name)
def test_scale_is_correctly_rounded_f32_quotient(fp8_dtype):
    gen = torch.Generator().manual_seed(7)
    # Random f32 amax over 60 binades plus every positive finite bf16 exponent's 1.0 pattern.
    amax = torch.exp2(torch.rand(500, generator=gen, dtype=torch.float64) * 60 - 30).to(torch.float32)
    scale = amax_to_scale(amax, fp8_dtype)
    fp8_max = Fraction(fmt(fp8_dtype).max)
    for a, s in zip(amax.tolist(), scale.tolist()):
        expected = _round_rational_to_f32(fp8_max / Fraction(max(a, EPS)))
        assert s == expected, f"amax={a!r}: scale {s!r}, correctly rounded {expected!r}"


def test_scale_special_amax_values():
    amax = torch.tensor([math.nan, math.inf, 0.0, -0.0], dtype=torch.float32)
    scale = amax_to_scale(amax, torch.float8_e4m3fn)
    assert math.isnan(scale[0].item())
    assert scale[1].view(torch.int32).item() == 0  # 448/inf = +0
    assert scale[2].item() == scale[3].item() == 447999985582080.0


def test_amax_propagates_nan_and_ignores_sign_of_zero():
    x = torch.tensor([[1.0, math.nan, -3.0], [-0.0, 0.0, -0.0], [-math.inf, 2.0, 1.0]], dtype=torch.bfloat16)
    amax = tensor_to_amax(x, dim=1)
    assert math.isnan(amax[0].item())
    assert amax[1].view(torch.int16).item() == 0  # +0, not -0
    assert amax[2].item() == math.inf


@pytest.mark.parametrize("fp8_dtype", FP8, ids=lambda d: fmt(d).name)
def test_saturated_cast_clamps_inf_and_overflow_and_keeps_nan(fp8_dtype):
    f = fmt(fp8_dtype)
    x = torch.tensor([math.inf, -math.inf, 1e30, -1e30, math.nan], dtype=torch.float32)
    codes = to_fp8_saturated(x, fp8_dtype).view(torch.uint8).tolist()
    assert codes[:4] == [f.max_code, f.max_code | 0x80] * 2
    assert codes[4] in f.nan_codes


def _near_powers_of_two(ulps: int = 256) -> torch.Tensor:
    """Every f32 within ``ulps`` of each power of two a scale can take (2^-126 .. 2^127)."""
    base = torch.ldexp(torch.ones(253), torch.arange(-125, 128)).to(torch.float32).view(torch.int32)
    return (base[:, None] + torch.arange(-ulps, ulps + 1, dtype=torch.int32)[None, :]).flatten().view(torch.float32)


def test_log2_rule_rounds_up_just_below_a_power_of_two_where_floor_rule_does_not():
    """Named cases: the upstream log2 rule is not a round-down; the floor rule is."""
    below_2_pow_40 = torch.tensor([2.0**40], dtype=torch.float32).view(torch.int32) - 1
    s = below_2_pow_40.view(torch.float32)
    assert round_scale_to_power_of_2(s, "log2").item() == 2.0**40  # log2(2^40 - ulp) rounds to exactly 40.0 in f32
    assert round_scale_to_power_of_2(s, "floor").item() == 2.0**39
    just_below_2 = torch.tensor([1.9999999], dtype=torch.float32)
    assert round_scale_to_power_of_2(just_below_2, "log2").item() == 1.0  # |E+1| = 1: no f32 rounding up


def test_pow2_rules_differ_only_just_below_powers_of_two():
    s = _near_powers_of_two()
    log2_rule = round_scale_to_power_of_2(s, "log2")
    floor_rule = round_scale_to_power_of_2(s, "floor")
    assert bool((floor_rule <= s).all())
    differ = log2_rule != floor_rule
    assert bool((log2_rule[differ] == 2 * floor_rule[differ]).all())
    # Where they differ s sits at most 88 ulps (2^7 * ln 2) below the power of two log2 rounds up to.
    gap_ulps = log2_rule[differ].view(torch.int32) - s[differ].view(torch.int32)
    assert int(gap_ulps.min()) > 0
    assert int(gap_ulps.max()) <= 88
    assert int(differ.sum()) > 1000


def test_log2_rule_matches_torch_f32_log2_on_this_cpu():
    """Records that torch 2.13's own f32 log2 on this CPU agrees with the correctly rounded rule near every power of
    two; a different device's f32 log2 may not, which is why the reference defines the rule precisely."""
    s = _near_powers_of_two()
    literal = torch.exp2(torch.floor(torch.log2(s)))
    ours = round_scale_to_power_of_2(s, "log2")
    differ = literal.view(torch.int32) != ours.view(torch.int32)
    assert not bool(differ.any()), f"torch f32 log2 differs at {s[differ][:8].tolist()}"


def test_pow2_rules_keep_zero_inf_nan():
    s = torch.tensor([0.0, math.inf, math.nan], dtype=torch.float32)
    for rule in ("log2", "floor"):
        out = round_scale_to_power_of_2(s, rule)
        assert out[0].item() == 0.0
        assert out[1].item() == math.inf
        assert math.isnan(out[2].item())


def test_pow2_rule_rejects_non_f32_scales_and_unknown_rules():
    with pytest.raises(TypeError, match="float32"):
        round_scale_to_power_of_2(torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="pow2 rule"):
        round_scale_to_power_of_2(torch.ones(2), "ceil")
