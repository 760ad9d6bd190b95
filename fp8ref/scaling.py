"""Scaling rules: amax, scale, power-of-two rounding and the saturated cast (SPEC §4).

Compatible with the upstream rules of torchao's float8 MoE training, written so that every step's precision is
explicit. These functions are the building blocks of every reference op in :mod:`fp8ref.ops`.
"""

from __future__ import annotations

from typing import Literal

import torch

from fp8ref.formats import fmt

__all__ = [
    "EPS",
    "POW2_RULES",
    "amax_to_scale",
    "round_scale_to_power_of_2",
    "tensor_to_amax",
    "tensor_to_scale",
    "to_fp8_saturated",
]

#: Lower clamp on amax before the division (float64), so an all-zero slice gets a finite scale:
#: e4m3fn 448/1e-12 -> f32 447999985582080.0.
EPS = 1e-12

Pow2Rule = Literal["log2", "floor"]
#: "log2": the upstream rule exp2(floor(log2(scale))), with log2 correctly rounded to f32 (see
#: round_scale_to_power_of_2). "floor": the exact largest power of two <= scale.
POW2_RULES: tuple[str, ...] = ("log2", "floor")


def tensor_to_amax(x: torch.Tensor, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> torch.Tensor:
    """Max of |x| over ``dim`` (all elements when None).

    Semantics:
        1. |x| in x's own dtype (exact: abs only clears the sign bit; |-0| = +0).
        2. max over exactly the given elements, NaN-propagating like ``torch.amax``: one NaN makes the result NaN;
           +-inf gives inf. The result is exact in x's dtype (max never rounds).
    """
    if dim is None:
        return torch.amax(torch.abs(x))
    return torch.amax(torch.abs(x), dim=dim, keepdim=keepdim)


def round_scale_to_power_of_2(scale: torch.Tensor, rule: Pow2Rule = "log2") -> torch.Tensor:
    """Round f32 scales to a power of two.

    Semantics:
        rule="log2" (the upstream rule, torchao ``_round_scale_down_to_power_of_2``): ``exp2(floor(log2(s)))``
            where log2(s) is the correctly rounded f32 logarithm (computed in float64, then rounded once to f32).
            For s within a few f32 ulps BELOW a power of two 2^k, log2(s) rounds to exactly k, so the result is
            2^k > s: this rule is not always a round-down. torch's own f32 ``log2`` is not correctly rounded on
            every device, so "as torch computes it" is not one function; this is the device-independent definition
            every kernel reproduces (tests/test_scaling.py lists the inputs where torch-f32-CPU log2 differs).
        rule="floor": the exact largest power of two <= s (frexp), never above s.
        Both: s=0 -> 0, s=+inf -> +inf, NaN -> NaN. Output f32.
    """
    if scale.dtype != torch.float32:
        raise TypeError(f"scales must be float32, got {scale.dtype}")
    if rule == "log2":
        exponent = torch.floor(torch.log2(scale.to(torch.float64)).to(torch.float32))
        return torch.exp2(exponent)
    if rule == "floor":
        _, exponent = torch.frexp(scale)  # scale = mantissa * 2**exponent, mantissa in [0.5, 1)
        pow2 = torch.ldexp(torch.full_like(scale, 0.5), exponent)
        return torch.where(torch.isfinite(scale) & (scale != 0), pow2, scale)
    raise ValueError(f"pow2 rule must be one of {POW2_RULES}, got {rule!r}")


def amax_to_scale(
    amax: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool = False,
    pow2_rule: Pow2Rule = "log2",
) -> torch.Tensor:
    """Scale (a multiplier) from amax.

    Semantics:
        1. a = float64(amax) (exact from bf16/f16/f32).
        2. a = max(a, EPS=1e-12); NaN stays NaN (torch.clamp propagates NaN).
        3. s = float32(fp8_max / a): one float64 division, then one round-to-nearest-even to f32. This equals the
           correctly rounded f32 division fp8_max/amax (53 >= 2*24+2 bits makes the double rounding innocuous).
           amax=+inf -> 0; amax=NaN -> NaN; all-zero slice -> fp8_max/1e-12 (e4m3fn 447999985582080.0).
        4. If round_scales_to_power_of_2: s = round_scale_to_power_of_2(s, pow2_rule).
    """
    f = fmt(fp8_dtype)
    a = torch.clamp(amax.to(torch.float64), min=EPS)
    scale = (f.max / a).to(torch.float32)
    if round_scales_to_power_of_2:
        scale = round_scale_to_power_of_2(scale, pow2_rule)
    return scale


def tensor_to_scale(
    x: torch.Tensor,
    fp8_dtype: torch.dtype,
    axiswise_dim: int | None = None,
    round_scales_to_power_of_2: bool = False,
    pow2_rule: Pow2Rule = "log2",
) -> torch.Tensor:
    """Scale for the whole tensor (axiswise_dim=None, a 0-d tensor) or per slice along ``axiswise_dim`` (keepdim).

    Semantics: amax_to_scale(tensor_to_amax(x, axiswise_dim, keepdim=True), ...).
    """
    amax = tensor_to_amax(x, dim=axiswise_dim, keepdim=True)
    return amax_to_scale(amax, fp8_dtype, round_scales_to_power_of_2, pow2_rule)


def to_fp8_saturated(x: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """Saturating cast of already-scaled values.

    Semantics:
        1. clamp(x, -fp8_max, fp8_max) in x's dtype; NaN passes through unchanged (torch.clamp keeps NaN),
           +-inf becomes +-fp8_max. The cast below therefore never sees an out-of-range value, so the result
           does not depend on the cast's overflow policy (which changed between torch 2.11 and 2.12, SPEC §3).
        2. Round to nearest, ties to even, to the fp8 grid, subnormals included (no flush to zero); -0 stays -0
           in fn formats and becomes +0 (0x00) in fnuz formats, which have no -0. NaN becomes a NaN code
           (0x7F/0xFF in fn formats, 0x80 in fnuz); compare NaN codes as a class.
    """
    f = fmt(fp8_dtype)
    return torch.clamp(x, min=-f.max, max=f.max).to(f.dtype)
