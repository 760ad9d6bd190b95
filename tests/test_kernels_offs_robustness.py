"""Offsets are never read on the host, so the kernels must stay memory-safe and match fp8ref on offsets nobody
validated: past the end, strided views, and flags of the wrong type."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("fp8moe")  # before triton: turns the interpreter on when there is no GPU
import fp8moe
import fp8ref

E4 = torch.float8_e4m3fn


def _x(rows, cols, device):
    g = torch.Generator().manual_seed(5)
    return torch.randn(rows, cols, generator=g).to(torch.bfloat16).to(device)


@pytest.mark.parametrize(
    ("op", "shape", "ends"),
    [
        ("per_group_rowwise_scales", (6, 64), [10, 70]),
        ("per_group_colwise_scales", (64, 6), [10, 70]),
        ("per_group_rowwise_scales", (6, 64), [70, 90]),
    ],
    ids=["rowwise-last-group-past-end", "colwise-last-group-past-end", "rowwise-every-group-past-end"],
)
def test_offsets_past_the_end_are_cut_at_the_tensor_like_the_reference(op, shape, ends, device):
    x = _x(*shape, device)
    offs = torch.tensor(ends, dtype=torch.int32, device=device)
    q, s = getattr(fp8moe, op)(x, offs, E4)
    rq, rs = getattr(fp8ref, op)(x, offs, E4)
    assert torch.equal(s.view(torch.int32).cpu(), rs.view(torch.int32).cpu())
    assert torch.equal(q.view(torch.uint8).cpu(), rq.view(torch.uint8).cpu())


def test_strided_offsets_are_refused_by_name(device):
    x = _x(6, 64, device)
    strided = torch.tensor([10, 20, 30, 40, 64, 64], dtype=torch.int32, device=device)[::2]
    with pytest.raises(ValueError, match="offs must be contiguous"):
        fp8moe.per_group_rowwise_scales(x, strided, E4)


@pytest.mark.parametrize("flag", [1, torch.tensor(True)], ids=["int", "tensor"])
def test_pow2_flag_must_be_a_bool(flag, device):
    with pytest.raises(TypeError, match="round_scales_to_power_of_2 must be a bool"):
        fp8moe.rowwise_2d_scale_and_cast(_x(4, 8, device), E4, flag)
