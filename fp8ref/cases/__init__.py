"""Named edge cases per op of SPEC §5, as frozen data with the exact expected bytes and scale bits.

One module per op (``fp8ref.cases.<op>.CASES``); the op table (fp8ref.contracts) holds each op's table in its row,
and ``fp8ref.contracts.all_cases()`` lists them all. Run one with ``contract(case.op).reference(*case.args(device),
**case.kwargs())`` and compare the outputs' raw bits with ``case.expected()`` (NaN as a class; for kernels, elements
where ``contract(case.op).specified(case)`` is False are excluded).
"""

from fp8ref.cases._table import Case, Input

__all__ = ["Case", "Input"]
