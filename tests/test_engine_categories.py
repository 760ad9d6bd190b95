"""Sharper diagnoses: bugs that look like something else one byte at a time get their own category.

x / (1/scale) looks like a few flipped ties; a scale too large applied without the clamp looks like NaN from nowhere;
a group boundary moved by one looks like a plain scale mismatch. Each is recognised by recomputing the whole output
under that bug (fp8ref.engine.hypotheses) or with the kernel's own scale, and the diagnosis survives shrinking.
"""

from __future__ import annotations

import math

import pytest
import torch

import fp8ref
from fp8ref import ops
from fp8ref.engine.mutants import mutant
from fp8ref.scaling import amax_to_scale, to_fp8_saturated

_PINNED = {
    "dtype": torch.bfloat16,
    "round_scales_to_power_of_2": False,
    "values": "normal",
    "layout": "row_major",
    "device": "cpu",
}


def _divides(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    _, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    return to_fp8_saturated(x.to(torch.float32) / (1.0 / s), fp8_dtype), s  # right scales, applied by division


def test_dividing_by_the_inverse_scale_is_scale_applied_by_division():
    report = fp8ref.compare(
        _divides, (64, 256), like="rowwise_2d_scale_and_cast", fp8_dtype=torch.float8_e4m3fn, **_PINNED
    )
    assert report.n_scale_mismatches == 0
    assert report.n_fp8_mismatches > 0
    assert report.failing == ("scale_applied_by_division",), report
    assert any("x / (1/scale)" in e for e in report.explained)


def test_rounding_ties_away_stays_a_tie_flip_not_a_division():
    report = fp8ref.compare(
        mutant("round_half_away"), (64, 256), like="rowwise_2d_scale_and_cast", fp8_dtype=torch.float8_e4m3fn, **_PINNED
    )
    assert report.failing == ("rne_tie_flipped",), report


def _wrong_max_unclamped(x, fp8_dtype=torch.float8_e4m3fnuz, round_scales_to_power_of_2=False):
    # The scale from e4m3fn's max (448) on e4m3fnuz (max 240) and no clamp: torch's fnuz cast makes the overflow NaN.
    amax = x.abs().to(torch.float32).amax(dim=1, keepdim=True)
    s = amax_to_scale(amax, torch.float8_e4m3fn, round_scales_to_power_of_2)
    return (x.to(torch.float32) * s).to(fp8_dtype), s


def test_unclamped_overflow_to_nan_is_the_saturation_policy_not_nan_vs_number():
    report = fp8ref.compare(
        _wrong_max_unclamped, (8, 64), like="rowwise_2d_scale_and_cast", fp8_dtype=torch.float8_e4m3fnuz, **_PINNED
    )
    assert report.top_categories()[0] == "overflow_saturation_policy", report
    assert "nan_vs_number" not in report.categories, report
    assert report.categories["scale_mismatch"] == 8  # the root cause, also reported


def _per_group_colwise_shifted(start_shift: int, end_shift: int):
    """per_group_colwise_scales computing group g over rows [offs[g-1] + start_shift, offs[g] + end_shift) (group 0
    from row 0), for the amax and the store, in group order."""

    def kernel(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        ktot, n = x.shape
        ends = offs.tolist()
        q = torch.empty_strided((ktot, n), (1, ktot), dtype=fp8_dtype)
        s = torch.empty(len(ends) * n, dtype=torch.float32)
        start = 0
        for g, end in enumerate(ends):
            lo = min(max(start + (start_shift if g else 0), 0), ktot)
            hi = max(min(end + end_shift, ktot), lo)
            part = x[lo:hi].to(torch.float32)
            amax = part.abs().amax(dim=0) if hi > lo else torch.zeros(n)
            scale = amax_to_scale(amax, fp8_dtype, round_scales_to_power_of_2)
            s[g * n : (g + 1) * n] = scale
            q[lo:hi] = to_fp8_saturated(part * scale, fp8_dtype)
            start = end
        return q, s

    kernel.__name__ = f"shifted_{start_shift}_{end_shift}"
    return kernel


@pytest.mark.parametrize(
    ("start_shift", "end_shift", "words"),
    [(0, 1, "inclusive end"), (1, 0, "late start"), (-1, 0, "early start")],
    ids=["inclusive-end", "late-start", "early-start"],
)
def test_a_group_boundary_moved_by_one_is_wrong_group_boundary(start_shift, end_shift, words):
    report = fp8ref.compare(
        _per_group_colwise_shifted(start_shift, end_shift),
        (100, 8),
        like="per_group_colwise_scales",
        offs="uniform",
        groups=4,
        fp8_dtype=torch.float8_e4m3fn,
        **_PINNED,
    )
    assert report.failing == ("wrong_group_boundary",), report
    assert any(words in e for e in report.explained), report.explained


def test_a_group_boundary_moved_by_one_stays_wrong_group_boundary_after_shrinking():
    kernel = _per_group_colwise_shifted(0, 1)
    report = fp8ref.fuzz(kernel, like="per_group_colwise_scales", max_examples=40, device="cpu")
    assert report is not None
    assert report.top_categories()[0] == "wrong_group_boundary", report
    assert math.prod(report.call.shape) <= 16, report  # shrunk to a handful of elements


def test_amax_over_part_of_a_group_is_not_mistaken_for_a_boundary():
    """truncated_groups reads the first 64 rows of each group: no one-row shift explains a 100-row group."""
    report = fp8ref.compare(
        mutant("truncated_groups"),
        (200, 8),
        offs=[100, 200],
        fp8_dtype=torch.float8_e4m3fn,
        **_PINNED,
    )
    assert report.top_categories()[0] == "scale_mismatch", report
    assert "wrong_group_boundary" not in report.categories
    assert not report.explained
