"""compare on the grouped-GEMM path: fp8moe.grouped_mm passes, and broken GEMM kernels fail with the right category.

The broken kernels are plain PyTorch (autograd through per-group matmuls), so they run anywhere; fp8moe's kernels
run in the Triton interpreter on the CPU.
"""

from __future__ import annotations

import math

import pytest
import torch

import fp8moe
import fp8ref
from fp8ref.contracts import contract
from fp8ref.grouped_mm import group_ids

SHAPE = (64, 32, 48, 4)  # (M, K, N, E): K, N multiples of 16


def _per_group_mm(A, B_t, offs, expert_of_group=lambda g, e: g):
    """out[rows of g] = A[rows of g] @ B_t[expert_of_group(g)] in A's precision, with autograd; rows past offs[-1]
    are zero."""
    group = group_ids(offs, A.shape[0])
    out = A.new_zeros(A.shape[0], B_t.shape[2])
    for g in range(offs.shape[0]):
        expert = expert_of_group(g, B_t.shape[0])
        out = torch.where((group == g).unsqueeze(1), A @ B_t[expert], out)
    return out.to(torch.bfloat16)


def high_precision_gemm(A, B_t, offs, fp8_dtype=None):
    """Not quantized at all: as accurate as bf16, so ~29 dB away from the FP8 path it claims to be."""
    return _per_group_mm(A, B_t, offs)


def wrong_expert_gemm(A, B_t, offs, fp8_dtype=None):
    """Group g multiplied by expert g+1's weights (an off-by-one in the expert index)."""
    return _per_group_mm(A, B_t, offs, lambda g, e: (g + 1) % e)


def raising_gemm(A, B_t, offs, fp8_dtype=None):
    raise RuntimeError("simulated: the GEMM rejected the layout")


def wrong_shape_gemm(A, B_t, offs, fp8_dtype=None):
    return _per_group_mm(A, B_t, offs)[:, :-1]


def fp8moe_with_flipped_operand(A, B_t, offs, fp8_dtype=None):
    return fp8moe.grouped_mm(A, B_t, offs, fp8_dtype=fp8_dtype)


def _flipped_operands(*args, **kwargs):
    ops = fp8moe.grouped_mm.quantize_operands(*args, **kwargs)
    a = ops.forward.a.clone()
    a.view(torch.uint8)[0, 0] ^= 1  # one fp8 byte of the forward's A one code off
    return ops._replace(forward=ops.forward._replace(a=a))


fp8moe_with_flipped_operand.quantize_operands = _flipped_operands


def test_grouped_mm_row_is_judged_by_sqnr_with_a_derivation():
    row = contract("grouped_mm")
    assert row.kind == "grouped_gemm"
    assert isinstance(row.tolerance, fp8ref.Sqnr)
    assert row.tolerance.min_db == 40.0
    assert "dB" in row.tolerance.why


def test_fp8moe_grouped_mm_passes_the_default_battery_with_operands_bitwise():
    report = fp8ref.compare(fp8moe.grouped_mm, SHAPE)
    assert report.ok, report
    assert len(report.members) == 3
    assert report.n_fp8 > 0
    assert report.n_fp8_mismatches == 0
    assert report.n_scale_mismatches == 0
    outputs = {row[0] for row in report.sqnr_table}
    assert outputs == {"out", "grad_A", "grad_B_t"}
    # FP8 costs ~29 dB against bf16 (the derivation of SQNR_VS_BF16): the side-by-side rows show it.
    vs_bf16 = [v for o, versus, groups in report.sqnr_table if versus == "kernel vs bf16 path" for v in groups]
    finite = [v for v in vs_bf16 if math.isfinite(v)]
    assert finite
    assert min(finite) > 25.0
    assert max(finite) < 35.0


@pytest.mark.parametrize(
    ("kernel", "category"),
    [
        (high_precision_gemm, "sqnr_below_floor"),
        (wrong_expert_gemm, "sqnr_below_floor"),
        (raising_gemm, "kernel_raised"),
        (wrong_shape_gemm, "shape_stride_dtype"),
        (fp8moe_with_flipped_operand, "operand_mismatch"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_broken_gemm_fails_with_its_category(kernel, category):
    report = fp8ref.compare(kernel, SHAPE, like="grouped_mm", battery=False)
    assert not report.ok
    assert category in report.failing, report


def test_one_call_pins_offs_dtype_and_layout_and_repro_replays_it():
    report = fp8ref.compare(
        wrong_expert_gemm, SHAPE, like="grouped_mm", offs=[16, 16, 48, 64], dtype=torch.float32, layout="row_major"
    )
    assert not report.members
    assert report.call.offs == (16, 16, 48, 64)
    assert "offs=[16, 16, 48, 64]" in report.repro()
    assert "layout='row_major'" in report.repro()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"round_scales_to_power_of_2": True}, "no round_scales_to_power_of_2"),
        ({"values": "special"}, "values must be 'normal'"),
        ({"groups": 3}, "one group per expert"),
        ({"offs": [16, 32]}, "offs has 2 groups"),
    ],
)
def test_grouped_gemm_compare_refuses_knobs_the_path_lacks(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fp8ref.compare(fp8moe.grouped_mm, SHAPE, battery=False, **kwargs)
