"""Named edge cases per op of SPEC §5, as frozen data with the exact expected bytes and scale bits.

``CASES[op]`` holds the rows of one op; run one with ``getattr(fp8ref.ops, case.op)(*case.args(device),
**case.kwargs())`` and compare the outputs' raw bits with ``case.expected()`` (NaN as a class; elements where
``case.specified()`` is False excluded for kernels).
"""

from __future__ import annotations

from fp8ref.cases import (
    colwise_3d_scale_and_cast,
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
    rowwise_2d_scale_and_cast,
    rowwise_3d_transpose_rhs,
)
from fp8ref.cases._table import Case, Input

__all__ = ["CASES", "Case", "Input", "all_cases"]

CASES: dict[str, tuple[Case, ...]] = {
    module.OP: module.CASES
    for module in (
        rowwise_2d_scale_and_cast,
        colwise_3d_scale_and_cast,
        rowwise_3d_transpose_rhs,
        per_group_rowwise_scales,
        per_group_colwise_scales,
        per_group_colwise_scales_dual,
    )
}


def all_cases() -> tuple[Case, ...]:
    """Every row of every op, in table order."""
    return tuple(case for cases in CASES.values() for case in cases)
