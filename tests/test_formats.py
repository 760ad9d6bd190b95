"""fp8ref.formats against SPEC §2 (literal constants) and against torch's own decoding of all 256 codes."""

from __future__ import annotations

import math

import pytest
import torch

from fp8ref.formats import all_formats, fmt

FORMATS = all_formats()
FORMAT_IDS = [f.name for f in FORMATS]

# SPEC §2, copied literally: (bias, max, max_code, min normal, min subnormal, NaN codes, inf codes, -0 code or None).
SPEC_TABLE = {
    "e4m3fn": (7, 448.0, 0x7E, 2.0**-6, 2.0**-9, {0x7F, 0xFF}, (), 0x80),
    "e4m3fnuz": (8, 240.0, 0x7F, 2.0**-7, 2.0**-10, {0x80}, (), None),
    "e5m2": (15, 57344.0, 0x7B, 2.0**-14, 2.0**-16, {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, (0x7C, 0xFC), 0x80),
    "e5m2fnuz": (16, 57344.0, 0x7F, 2.0**-15, 2.0**-17, {0x80}, (), None),
}


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_every_code_decodes_like_torch(f):
    torch_values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(f.dtype).to(torch.float64)
    ours = f.values
    assert torch.equal(torch.isnan(ours), torch.isnan(torch_values))
    finite_or_inf = ~torch.isnan(ours)
    # Compare float64 bits so -0.0 vs +0.0 counts as a difference.
    mismatch = (ours.view(torch.int64) != torch_values.view(torch.int64)) & finite_or_inf
    first = mismatch.nonzero().flatten()[:1].tolist()
    assert not first, f"code {first[0]:#04x}: ours {ours[first[0]].item()!r}, torch {torch_values[first[0]].item()!r}"


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_constants_match_spec_table(f):
    bias, max_, max_code, min_normal, min_subnormal, nan_codes, inf_codes, neg_zero = SPEC_TABLE[f.name]
    ours = (f.bias, f.max, f.max_code, f.min_normal, f.min_subnormal)
    assert ours == (bias, max_, max_code, min_normal, min_subnormal)
    assert f.nan_codes == nan_codes
    assert f.inf_codes == inf_codes
    assert f.decode(max_code) == max_
    assert f.decode(1) == min_subnormal
    assert f.decode(1 << f.man_bits) == min_normal
    if neg_zero is None:
        assert not f.has_neg_zero
        assert math.isnan(f.decode(0x80))
    else:
        assert f.has_neg_zero
        assert math.copysign(1.0, f.decode(neg_zero)) == -1.0
        assert f.decode(neg_zero) == 0.0


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_ordered_codes_hold_every_non_nan_code_once_in_strictly_increasing_value_order(f):
    codes = f.ordered_codes.long()
    assert sorted(codes.tolist()) == [c for c in range(256) if c not in f.nan_codes]
    values = f.values[codes]
    if f.has_neg_zero:
        # -0 sits just before +0 with an equal value; every other step must increase.
        neg_zero_at = codes.tolist().index(0x80)
        assert codes[neg_zero_at + 1].item() == 0x00
        values = torch.cat([values[:neg_zero_at], values[neg_zero_at + 1 :]])
    assert bool((values[1:] > values[:-1]).all())


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_code_rank_is_value_order_with_zeros_shared_and_nan_minus_one(f):
    rank = f.code_rank
    assert all(rank[c].item() == -1 for c in f.nan_codes)
    if f.has_neg_zero:
        assert rank[0x00].item() == rank[0x80].item()
    ranked = [c for c in range(256) if rank[c] >= 0]
    by_rank = sorted(ranked, key=lambda c: (rank[c].item(), c))
    by_value = sorted(ranked, key=lambda c: (f.decode(c), c))
    assert by_rank == by_value


def test_e5m2fnuz_spacing_at_one_is_a_quarter():
    f = fmt(torch.float8_e5m2fnuz)
    one = f.bias << f.man_bits  # the code of 1.0: biased exponent 16, mantissa 0 -> 0x40
    assert f.decode(one) == 1.0
    assert f.decode(one + 1) - 1.0 == 0.25


@pytest.mark.canary
def test_torch_finfo_eps_of_e5m2fnuz_is_not_the_spacing_at_one():
    # The reason formats.py never reads torch.finfo (SPEC §2): eps 0.125 while the spacing at 1.0 is 0.25.
    assert torch.finfo(torch.float8_e5m2fnuz).eps == 0.125
