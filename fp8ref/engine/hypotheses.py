"""Whole-output explanations: recompute one (q, scales) pair under one specific bug and check that it reproduces
every byte the kernel wrote.

Per-element categories (fp8ref.engine.categories) look at one mismatch at a time; some bugs only show as a pattern.
A kernel computing ``x / (1/scale)`` is one code off only where a product lies near a rounding boundary, which looks
like a handful of flipped ties; a group that ends one row late has a scale that is no neighbour's. Each hypothesis
here is accepted only when it explains the *whole* pair, matching bytes included, so a coincidence on a few elements
never relabels a different bug.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fp8ref.engine.categories import same_f32, same_fp8
from fp8ref.scaling import amax_to_scale, tensor_to_amax, to_fp8_saturated

__all__ = ["BoundaryShift", "boundary_shift", "divided_bytes", "division_explains"]


def divided_bytes(x: torch.Tensor, scale: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """uint8 codes of ``to_fp8_saturated(f32(x) / f32(1 / scale))``: the scale applied by dividing by its reciprocal."""
    return to_fp8_saturated(x.to(torch.float32) / (1.0 / scale), fp8_dtype).view(torch.uint8)


def division_explains(
    x: torch.Tensor, actual: torch.Tensor, scale: torch.Tensor, valid: torch.Tensor, fp8_dtype: torch.dtype
) -> bool:
    """Whether ``x / (1/scale)`` reproduces every valid byte of ``actual`` (NaN codes compared as a class).

    Args:
        x: the input, in its logical shape.
        actual: the kernel's codes (uint8), same shape.
        scale: f32, same shape: the kernel's scale of each element.
        valid: bool, same shape: the elements inside some group.
        fp8_dtype: the output format.
    """
    by_division = divided_bytes(x, scale, fp8_dtype)
    return bool(same_fp8(by_division, actual, fp8_dtype, strict_nan=False)[valid].all())


@dataclass(frozen=True)
class BoundaryShift:
    """Group g covers [offs[g-1] + start, offs[g] + end) instead of [offs[g-1], offs[g]).

    Attributes:
        start, end: the shift of each group's first row and of its exclusive end (-1, 0 or +1).
        first: whether group 0's start moves too (a kernel reading ``offs[g-1]`` with offs[-1] := 0 shifts it).
    """

    start: int
    end: int
    first: bool

    def __str__(self) -> str:
        words = []
        if self.start:
            words.append(("late" if self.start > 0 else "early") + " start" + (" (group 0 too)" if self.first else ""))
        if self.end:
            words.append("inclusive end" if self.end > 0 else "early end")
        return " and ".join(words)


#: Every shift by one of either edge, simplest first.
SHIFTS: tuple[BoundaryShift, ...] = tuple(
    BoundaryShift(s, e, first)
    for first in (False, True)
    for s, e in sorted(itertools.product((0, 1, -1), repeat=2), key=lambda se: (abs(se[0]) + abs(se[1]), -se[1]))
    if (s, e) != (0, 0) and (s != 0 or not first)
)


def boundary_shift(
    x: torch.Tensor,
    jagged_dim: int,
    offs: Sequence[int],
    actual_q: torch.Tensor,
    actual_scales: torch.Tensor,
    unwritten: torch.Tensor,
    valid: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
) -> BoundaryShift | None:
    """The first boundary shift under which the reference reproduces the kernel's whole pair, or None.

    Under a shift, group g's scale is computed over its shifted rows (an empty range gives amax 0, as an empty group
    does); each row is written by every group covering it (where two do, either byte is accepted: the order of their
    stores is the kernel's) and rows no group covers stay unwritten. The shift explains the pair when every scale word
    equals the shifted reference's and every valid byte is one of the bytes the covering groups write (or unwritten
    where none covers it).

    Args:
        x: the input in its logical 2-D shape.
        jagged_dim: the dim of ``x`` that ``offs`` splits.
        offs: the true end offsets, one per group.
        actual_q: the kernel's codes (uint8), x's shape.
        actual_scales: the kernel's flat scales, ``s[g * C + c]`` with C the other dim's size.
        unwritten: bool, x's shape: the codes of ``actual_q`` that kept the poison (a shift may leave rows
            uncovered; those must be unwritten).
        valid: x's shape: the elements inside some group of the true layout.
        fp8_dtype: the output format.
        round_scales_to_power_of_2: the op's argument, used to recompute each shifted group's scales.

    Returns:
        The first of SHIFTS (simplest first) that explains the pair, or None (also when ``offs`` is empty or
        ``actual_scales`` does not hold one scale per group and column).
    """
    xt = x.movedim(jagged_dim, 0).to(torch.float32)  # (L, C)
    qt, unw, ok_rows = (t.movedim(jagged_dim, 0) for t in (actual_q, unwritten, valid))
    length, cols = xt.shape
    n_groups = len(offs)
    if n_groups == 0 or actual_scales.numel() != n_groups * cols:
        return None
    s_actual = actual_scales.reshape(n_groups, cols)
    starts = [0, *offs[:-1]]
    for shift in SHIFTS:
        scales = torch.empty(n_groups, cols)
        ranges = []
        for g in range(n_groups):
            lo = starts[g] + (shift.start if (g > 0 or shift.first) else 0)
            lo, hi = min(max(lo, 0), length), min(max(offs[g] + shift.end, 0), length)
            hi = max(hi, lo)
            ranges.append((lo, hi))
            amax = tensor_to_amax(xt[lo:hi], dim=0) if hi > lo else torch.zeros(cols)
            scales[g] = amax_to_scale(amax, fp8_dtype, round_scales_to_power_of_2)
        if not bool(same_f32(scales, s_actual, strict_nan=False).all()):
            continue
        explained = torch.zeros(length, cols, dtype=torch.bool)
        covered = torch.zeros(length, dtype=torch.bool)
        for g, (lo, hi) in enumerate(ranges):
            if hi > lo:
                codes = to_fp8_saturated(xt[lo:hi] * scales[g], fp8_dtype).view(torch.uint8)
                explained[lo:hi] |= same_fp8(codes, qt[lo:hi], fp8_dtype, strict_nan=False)
                covered[lo:hi] = True
        explained |= ~covered.view(length, 1) & unw
        if bool(explained[ok_rows].all()):
            return shift
    return None
