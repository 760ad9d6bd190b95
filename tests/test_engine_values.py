"""The 'special' value distribution must actually contain every special kind, or a NaN bug can pass by luck."""

from __future__ import annotations

import pytest
import torch

from fp8ref.engine.values import make_values


@pytest.mark.parametrize("seed", range(20))
def test_special_values_hold_nan_inf_zero_line_and_subnormals_in_every_8_line_input(seed):
    gen = torch.Generator().manual_seed(seed)
    x = make_values("special", (8, 40), torch.bfloat16, torch.float8_e4m3fn, reduce_dim=1, gen=gen).float()
    assert bool(x.isnan().any(dim=1).any()), "no NaN line"
    assert bool(x.isinf().any(dim=1).any()), "no inf line"
    assert bool((x == 0).all(dim=1).any()), "no all-zero line"
    tiny = torch.finfo(torch.bfloat16).smallest_normal
    assert bool(((x.abs() < tiny) & (x != 0)).any()), "no subnormal input"
