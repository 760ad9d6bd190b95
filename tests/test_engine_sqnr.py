"""The Sqnr tolerance path: byte differences pass only while every group's SQNR clears the derived threshold, and
categories that are not rounding (NaN turned into a number, unwritten elements) fail regardless."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import fp8ref
from fp8ref.engine.mutants import MUTANTS
from fp8ref.spec import Exact, KernelSpec, Sqnr

#: e4m3fn keeps 3 mantissa bits: relative rounding error <= 2^-4, so a correct quantizer sits near 30 dB on normal
#: data; a kernel that flips RNE ties loses a fraction of a dB. 25 dB admits that and nothing coarser.
ROUNDING = Sqnr(25.0, "e4m3fn: 3 mantissa bits, ~30 dB on normal data; tie flips cost < 1 dB")


def _spec(mutant: str, tolerance) -> KernelSpec:
    m = MUTANTS[mutant]
    return KernelSpec(m.op, kernel=m.make(), tolerance=tolerance, test_shapes=((64, 96),))


def test_exact_tolerance_fails_a_kernel_that_flips_ties():
    report = fp8ref.compare(_spec("round_half_away", Exact()), (64, 96), values="ties")
    assert not report.ok
    assert "rne_tie_flipped" in report.failing


def test_sqnr_tolerance_accepts_the_same_kernel_while_sqnr_clears_the_threshold():
    # ROUNDING's derivation is e4m3fn's: the battery's other formats have other mantissa widths.
    report = fp8ref.compare(_spec("round_half_away", ROUNDING), (64, 96), values="ties", fp8_dtype=torch.float8_e4m3fn)
    assert report.ok, report
    assert report.categories.get("rne_tie_flipped", 0) > 0  # the bytes still differ; the policy accepts them


def test_sqnr_tolerance_fails_when_a_group_is_below_the_threshold():
    strict = dataclasses.replace(ROUNDING, min_db=200.0, why="impossible on purpose: no fp8 quantizer reaches it")
    report = fp8ref.compare(_spec("round_half_away", strict), (64, 96), values="ties")
    assert not report.ok


def test_sqnr_tolerance_never_accepts_nan_turned_into_numbers():
    m = MUTANTS["nan_dropped"]
    spec = KernelSpec(m.op, kernel=m.make(), tolerance=ROUNDING, test_shapes=((64, 8),))
    report = fp8ref.compare(spec, (64, 8), offs="uniform", groups=3, values="special")
    assert not report.ok
    assert "nan_vs_number" in report.failing


def test_sqnr_tolerance_requires_its_derivation():
    with pytest.raises(ValueError, match="derivation"):
        Sqnr(25.0, " ")
