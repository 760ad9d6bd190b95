"""fp8ref.testing.assert_same_bits: the assertion the kernel tests rely on must be able to fail."""

from __future__ import annotations

import math

import pytest
import torch

from fp8ref.testing import assert_same_bits

E4 = torch.float8_e4m3fn


def _codes(*codes):
    return torch.tensor(codes, dtype=torch.uint8).view(E4)


def test_nan_codes_compare_as_a_class_unless_strict():
    assert_same_bits(_codes(0x7F, 0x01), _codes(0xFF, 0x01))
    with pytest.raises(AssertionError, match="1 of 2 differ"):
        assert_same_bits(_codes(0x7F, 0x01), _codes(0xFF, 0x01), strict_nan=True)


def test_nan_against_a_number_always_differs():
    with pytest.raises(AssertionError, match="differ"):
        assert_same_bits(_codes(0x7F), _codes(0x7E))


def test_scales_compare_bits_so_signed_zero_and_one_ulp_differ():
    with pytest.raises(AssertionError):
        assert_same_bits(torch.tensor([-0.0]), torch.tensor([0.0]))
    with pytest.raises(AssertionError):
        assert_same_bits(torch.tensor([1.0]), torch.tensor([1.0]).nextafter(torch.tensor([2.0])))
    assert_same_bits(torch.tensor([math.nan]), torch.tensor([-math.nan]))


def test_layout_is_part_of_the_claim():
    q = torch.zeros(2, 3, dtype=E4)
    with pytest.raises(AssertionError, match="strides"):
        assert_same_bits(q.t().contiguous().t(), q)
    with pytest.raises(AssertionError, match="expected"):
        assert_same_bits(q.to(torch.float8_e5m2), q)
