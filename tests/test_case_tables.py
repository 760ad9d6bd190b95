"""The named case tables: well-formed, covering the required edge cases, and reproduced bit for bit by fp8ref.ops."""

from __future__ import annotations

import math

import pytest
import torch

from fp8ref import ops
from fp8ref.cases._table import (
    EPS_SCALE_E4M3FN,
    EPS_SCALE_E4M3FN_POW2,
    EPS_SCALE_E4M3FNUZ,
    EPS_SCALE_E4M3FNUZ_POW2,
    EPS_SCALE_E5M2,
    EPS_SCALE_E5M2_POW2,
    F32_NAN,
)
from fp8ref.contracts import CONTRACTS, all_cases, contract
from fp8ref.formats import fmt
from fp8ref.scaling import EPS

#: The ops with a case table (every quantization op of SPEC §5), and the jagged ones among them.
CASES = {c.name: c.cases for c in CONTRACTS.values() if c.cases}
OP_NAMES = tuple(CASES)
JAGGED = tuple(op for op in OP_NAMES if contract(op).jagged)
ALL = all_cases()


def _canonical_q(codes, fp8_dtype):
    f = fmt(fp8_dtype)
    return [f.canonical_nan if c in f.nan_codes else c for c in codes]


def _canonical_scales(bits):
    return [F32_NAN if (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF else b for b in bits]


# ------------------------------------------------------------------------------------------------------------------
# The reference reproduces every row
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_reference_reproduces_case_bits(case):
    outs = contract(case.op).reference(*case.args("cpu"), **case.kwargs())
    for (q, scales), (want_q, want_scales) in zip(zip(outs[::2], outs[1::2]), case.expected()):
        got_q = q.contiguous().view(torch.uint8).flatten().tolist()  # logical index order, whatever the strides
        got_scales = scales.contiguous().view(torch.int32).flatten().tolist()
        assert _canonical_q(got_q, case.fp8_dtype) == list(want_q)
        assert _canonical_scales(got_scales) == list(want_scales)


# ------------------------------------------------------------------------------------------------------------------
# Well-formedness
# ------------------------------------------------------------------------------------------------------------------


def test_every_quantization_op_has_a_table_of_its_own_cases():
    assert len(OP_NAMES) >= 6
    assert all(case.op == op for op, cases in CASES.items() for case in cases)


@pytest.mark.parametrize("op", OP_NAMES)
def test_case_names_are_unique_snake_case_and_explained(op):
    names = [c.name for c in CASES[op]]
    assert len(names) == len(set(names))
    assert all(n.isidentifier() and n == n.lower() for n in names)
    assert all(len(c.why.strip()) > 20 for c in CASES[op])


def _expected_lengths(case):
    """(q numel, scales numel) per output, from the op's row (SPEC §5)."""
    inputs = [case.x] if case.x2 is None else [case.x, case.x2]
    groups = len(case.offs) if case.offs is not None else 1
    return [(math.prod(i.shape), contract(case.op).scale_count(i.shape, groups)) for i in inputs]


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_case_row_is_well_formed(case):
    inputs = [case.x] if case.x2 is None else [case.x, case.x2]
    assert (case.x2 is not None) == (contract(case.op).n_inputs == 2)
    assert (case.offs is not None) == (case.op in JAGGED)
    for inp in inputs:
        assert len(inp.values) == math.prod(inp.shape)
        assert inp.dtype in ops.INPUT_DTYPES
        # Every literal is exact in its dtype (same value and sign after the round trip), so it means what it says.
        back = inp.tensor().to(torch.float64).flatten().tolist()
        for v, b in zip(inp.values, back):
            assert (math.isnan(v) and math.isnan(b)) or (v == b and math.copysign(1, v) == math.copysign(1, b))
    assert [(len(q), len(s)) for q, s in case.expected()] == _expected_lengths(case)
    for q, scales in case.expected():
        assert all(0 <= b <= 0xFF for b in q)
        assert all(0 <= b <= 0x7FFFFFFF for b in scales)  # scales are never negative
        assert _canonical_q(q, case.fp8_dtype) == list(q)  # NaN written as the canonical code
    if case.offs is not None:
        jagged_len = case.x.shape[contract(case.op).jagged_dim]
        ops.validate_offs(torch.tensor(case.offs, dtype=torch.int32), jagged_len)


def test_eps_scale_constants_match_their_definition():
    """The named constants are f32(fp8_max / 1e-12) and its power of two, computed here from the format table."""

    def bits(value):
        return torch.tensor(value, dtype=torch.float64).to(torch.float32).view(torch.int32).item()

    for dtype, exact, pow2, exponent in [
        (torch.float8_e4m3fn, EPS_SCALE_E4M3FN, EPS_SCALE_E4M3FN_POW2, 48),
        (torch.float8_e4m3fnuz, EPS_SCALE_E4M3FNUZ, EPS_SCALE_E4M3FNUZ_POW2, 47),
        (torch.float8_e5m2, EPS_SCALE_E5M2, EPS_SCALE_E5M2_POW2, 55),
    ]:
        assert bits(fmt(dtype).max / EPS) == exact
        assert bits(2.0**exponent) == pow2
    assert torch.tensor([EPS_SCALE_E4M3FN], dtype=torch.int32).view(torch.float32).item() == 447999985582080.0
    assert torch.tensor([EPS_SCALE_E4M3FNUZ], dtype=torch.int32).view(torch.float32).item() == 240000004259840.0


# ------------------------------------------------------------------------------------------------------------------
# Coverage: every op's table exercises the edge cases the kernels are most likely to get wrong
# ------------------------------------------------------------------------------------------------------------------


def _has(op, predicate):
    return any(predicate(c) for c in CASES[op])


def _values(case):
    return [v for inp in ([case.x] if case.x2 is None else [case.x, case.x2]) for v in inp.values]


def _scales(case):
    return [b for _, s in case.expected() for b in s]


def _codes(case):
    return [b for q, _ in case.expected() for b in q]


COVERAGE = {
    "eps_scale_e4m3fn": lambda c: c.fp8_dtype == torch.float8_e4m3fn and EPS_SCALE_E4M3FN in _scales(c),
    "eps_scale_e4m3fn_pow2": lambda c: EPS_SCALE_E4M3FN_POW2 in _scales(c),
    "eps_scale_e4m3fnuz": lambda c: EPS_SCALE_E4M3FNUZ in _scales(c),
    "eps_scale_e4m3fnuz_pow2": lambda c: EPS_SCALE_E4M3FNUZ_POW2 in _scales(c),
    "nan_scale": lambda c: F32_NAN in _scales(c),
    "pos_inf_input": lambda c: math.inf in _values(c),
    "neg_inf_input": lambda c: -math.inf in _values(c),
    "neg_zero_kept_0x80": lambda c: c.fp8_dtype == torch.float8_e4m3fn and 0x80 in _codes(c),
    "neg_zero_to_0x00_fnuz": lambda c: (
        fmt(c.fp8_dtype).fnuz and any(v == 0 and math.copysign(1, v) < 0 for v in _values(c))
    ),
    "subnormal_output": lambda c: any(b & 0x7F and not (b & 0x7F) >> fmt(c.fp8_dtype).man_bits for b in _codes(c)),
    "rne_tie_to_448": lambda c: c.fp8_dtype == torch.float8_e4m3fn and 432.0 in _values(c),
    "mid_range_tie": lambda c: c.fp8_dtype == torch.float8_e4m3fn and 17.0 in _values(c) and 0x58 in _codes(c),
    "pow2": lambda c: c.round_scales_to_power_of_2,
}
JAGGED_COVERAGE = {
    "empty_group": lambda c: any(a == b for a, b in zip((0, *c.offs), c.offs)),
    "size_1_group": lambda c: any(b - a == 1 for a, b in zip((0, *c.offs), c.offs)),
    "past_last_offset": lambda c: not all(bool(contract(c.op).specified(c, i).all()) for i in range(len(c.expected()))),
}
COVERAGE_ROWS = [(op, name) for op in OP_NAMES for name in COVERAGE] + [
    (op, name) for op in JAGGED for name in JAGGED_COVERAGE
]


@pytest.mark.parametrize(("op", "feature"), COVERAGE_ROWS, ids=[f"{o}-{f}" for o, f in COVERAGE_ROWS])
def test_table_covers_edge_case(op, feature):
    assert _has(op, {**COVERAGE, **JAGGED_COVERAGE}[feature])


def test_specified_mask_excludes_exactly_the_tail():
    (case,) = [c for c in CASES["per_group_rowwise_scales"] if c.name == "elements_past_last_offset_are_excluded"]
    # x (2, 5) with offs (2, 3): columns 3 and 4 of both rows are past offs[-1].
    assert contract(case.op).specified(case).tolist() == [True, True, True, False, False] * 2
