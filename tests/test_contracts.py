"""The op table's own rules: a row says how it is compared and carries what that comparison needs."""

from __future__ import annotations

import dataclasses

import pytest

from fp8ref.contracts import CONTRACTS, KINDS, QUANTIZE_OPS, contract, group_ids


def test_every_row_has_a_known_kind_and_the_quantize_rows_are_listed():
    assert {c.kind for c in CONTRACTS.values()} <= set(KINDS)
    assert set(QUANTIZE_OPS) == {name for name, c in CONTRACTS.items() if c.kind == "quantize"}
    assert "grouped_mm" in CONTRACTS
    assert "grouped_mm" not in QUANTIZE_OPS


def test_a_row_with_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        dataclasses.replace(contract("rowwise_2d_scale_and_cast"), kind="gemm")


def test_a_quantization_row_without_its_element_geometry_is_refused():
    with pytest.raises(ValueError, match="needs"):
        dataclasses.replace(contract("rowwise_2d_scale_and_cast"), element_map=None)


def test_group_ids_give_each_index_its_group_and_minus_one_past_the_last_offset():
    # groups [0, 2), [2, 2) (empty), [2, 5); indices 5 and 6 lie past offs[-1]
    assert group_ids((2, 2, 5), 7).tolist() == [0, 0, 2, 2, 2, -1, -1]
    assert group_ids((0,), 3).tolist() == [-1, -1, -1]
