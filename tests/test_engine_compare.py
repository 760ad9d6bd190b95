"""fp8ref.compare: inputs, poisoning, categories, policy and the Report's outputs."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
import torch

import fp8ref
from fp8ref import ops
from fp8ref.contracts import CONTRACTS, QUANTIZE_OPS
from fp8ref.engine.inputs import make_inputs
from fp8ref.engine.mutants import mutant
from fp8ref.engine.values import VALUE_KINDS
from fp8ref.layouts import OFFS_LAYOUTS, SIZE_ORDERS, SIZE_SPREAD, make_offs

_SHAPES = {
    "rowwise_2d_scale_and_cast": (7, 100),
    "colwise_3d_scale_and_cast": (2, 7, 33),
    "rowwise_3d_transpose_rhs": (2, 7, 33),
    "per_group_rowwise_scales": (7, 100),
    "per_group_colwise_scales": (100, 7),
    "per_group_colwise_scales_dual": (100, 7, 3),
}


@pytest.mark.parametrize("values", VALUE_KINDS)
@pytest.mark.parametrize("op", sorted(QUANTIZE_OPS))
def test_reference_compared_with_itself_has_no_mismatch(op, values):
    offs = {"offs": "random", "groups": 5} if CONTRACTS[op].jagged else {}
    report = fp8ref.compare(f"fp8ref.ops:{op}", _SHAPES[op], values=values, device="cpu", **offs)
    assert report.ok, report
    assert (report.n_fp8_mismatches, report.n_scale_mismatches) == (0, 0)
    assert report.n_fp8 > 0


def test_same_seed_gives_same_bytes_and_explicit_offs_replay_a_named_layout():
    c = CONTRACTS["per_group_rowwise_scales"]
    kw = {
        "groups": 5,
        "dtype": torch.bfloat16,
        "fp8_dtype": torch.float8_e4m3fn,
        "values": "special",
        "layout": "row_major",
        "seed": 3,
    }
    named = make_inputs(c, (7, 100), offs="dominant", **kw)
    replay = make_inputs(c, (7, 100), offs=named.offs, **kw)
    assert torch.equal(named.xs[0].view(torch.int16), replay.xs[0].view(torch.int16))


@pytest.mark.parametrize("layout", OFFS_LAYOUTS)
def test_offs_layouts_are_nondecreasing_end_offsets_within_length(layout):
    ends = make_offs(layout, 130, 7, torch.Generator().manual_seed(0))
    assert len(ends) == 7
    assert all(b >= a for a, b in itertools.pairwise(ends))
    assert 0 <= ends[0] <= ends[-1] <= 130
    assert (ends[-1] < 130) == (layout in ("tail_past_end", "all_empty"))


@pytest.mark.parametrize("order", SIZE_ORDERS)
@pytest.mark.parametrize("layout", ["random16", "random", "empty_middle", "dominant"])
def test_a_size_order_holds_the_base_layouts_sizes_sorted(layout, order):
    def sizes(name):
        ends = make_offs(name, 1000, 9, torch.Generator().manual_seed(3))
        return [b - a for a, b in zip((0, *ends[:-1]), ends)]

    base, ordered = sizes(layout), sizes(f"{layout}_{order}")
    assert ordered == sorted(base, reverse=order == "desc")
    assert ordered != base or len(set(base)) == 1  # these seeds give unsorted sizes: the order takes effect


@pytest.mark.parametrize("spread", [0, 16, 64, 240])
def test_a_size_spread_moves_indices_from_each_odd_group_to_the_even_one_before_it(spread):
    """aligned16_spread<d> at 16640 tokens in 64 groups (tune_configs --points sizes): sizes alternate base + d and
    base - d, pair by pair; the total, the group count and the 16-aligned starts stay aligned16's."""

    def sizes(name):
        ends = make_offs(name, 16640, 64, torch.Generator().manual_seed(0))
        return [b - a for a, b in zip((0, *ends[:-1]), ends)]

    base, spread_sizes = sizes("aligned16"), sizes(f"aligned16_{SIZE_SPREAD}{spread}")
    assert spread_sizes == [s + (spread if g % 2 == 0 else -spread) for g, s in enumerate(base)]
    assert sum(spread_sizes) == 16640
    starts = itertools.accumulate(spread_sizes[:-1], initial=0)
    assert all(start % 16 == 0 for start in starts)


def test_a_size_spread_leaves_an_odd_trailing_group_and_refuses_what_it_cannot_move():
    ends = make_offs(f"uniform_{SIZE_SPREAD}16", 100, 3, torch.Generator().manual_seed(0))
    assert ends == (33 + 16, 66, 100)  # uniform sizes 33, 33, 34: the pair moves 16, the third group keeps its size
    with pytest.raises(ValueError, match="multiple of 16, got 24"):
        make_offs(f"aligned16_{SIZE_SPREAD}24", 1000, 4, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="group 1 holds 256 indices, fewer than the spread 272"):
        make_offs(f"aligned16_{SIZE_SPREAD}272", 1000, 4, torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "name", ["tail_past_end_desc", "random16_up", "nonsense_asc", "aligned16_spread", "tail_past_end_spread16"]
)
def test_a_size_order_or_spread_of_no_layout_is_an_error(name):
    with pytest.raises(ValueError, match="unknown offs layout"):
        make_offs(name, 100, 4, torch.Generator().manual_seed(0))


def test_special_values_hold_nan_inf_negative_zero_and_all_zero_slices():
    x = make_inputs(
        CONTRACTS["rowwise_2d_scale_and_cast"],
        (64, 50),
        groups=1,
        offs=None,
        dtype=torch.float32,
        fp8_dtype=torch.float8_e4m3fn,
        values="special",
        layout="row_major",
        seed=0,
    ).xs[0]
    assert torch.isnan(x).any()
    assert torch.isinf(x).any()
    assert ((x == 0) & torch.signbit(x)).any()
    assert (x == 0).all(dim=1).any()


def test_kernel_that_never_writes_is_reported_unwritten():
    def lazy(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        return torch.empty(x.shape, dtype=fp8_dtype), torch.empty(x.shape[0], 1)

    report = fp8ref.compare(lazy, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert report.categories == {"unwritten": 4 * 8 + 4}


def test_kernel_writing_different_bytes_per_run_is_nondeterministic():
    calls = []

    def flaky(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        calls.append(1)
        if len(calls) % 2 == 0:
            q = (q.view(torch.uint8) ^ 1).view(fp8_dtype)
        return q, s

    report = fp8ref.compare(flaky, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu")
    assert "nondeterministic" in report.failing


def _flip_nan_sign(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    b = q.view(torch.uint8)
    return torch.where(b == 0x7F, torch.full_like(b, 0xFF), b).view(fp8_dtype), s


def test_nan_sign_difference_is_tolerated_by_default_and_fails_when_strict():
    # 0x7F -> 0xFF is a NaN sign flip in e4m3fn only (in e5m2 0x7F is NaN too; in fnuz formats 0x7F is a number).
    kw = {"like": "rowwise_2d_scale_and_cast", "values": "special", "fp8_dtype": torch.float8_e4m3fn, "device": "cpu"}
    loose = fp8ref.compare(_flip_nan_sign, (64, 50), **kw)
    strict = fp8ref.compare(_flip_nan_sign, (64, 50), strict_nan=True, **kw)
    assert loose.ok, loose
    assert loose.categories.get("nan_sign_or_payload", 0) > 0, loose
    assert strict.failing == ("nan_sign_or_payload",), strict


def test_negative_zero_written_as_positive_zero_is_signed_zero():
    def no_neg_zero(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        b = q.view(torch.uint8)
        return torch.where(b == 0x80, torch.zeros_like(b), b).view(fp8_dtype), s

    report = fp8ref.compare(
        no_neg_zero,
        (64, 50),
        like="rowwise_2d_scale_and_cast",
        values="special",
        fp8_dtype=torch.float8_e4m3fn,  # 0x80 is -0 there (NaN in the fnuz formats)
        device="cpu",
    )
    assert report.top_categories() == ("signed_zero",), report


def test_inf_dropped_from_amax_is_a_scale_mismatch_that_explains_the_bytes():
    """inf in a row: the reference scale is 0 (inf*0 = NaN there); a kernel ignoring inf in amax gets a finite scale
    and saturates inf to 448. Root cause: the scale; the bytes follow from it."""

    def finite_amax(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        finite = torch.where(torch.isinf(x), 0.0, x.to(torch.float32))
        _, s = ops.rowwise_2d_scale_and_cast(finite, fp8_dtype, round_scales_to_power_of_2)
        return fp8ref.to_fp8_saturated(x.to(torch.float32) * s, fp8_dtype), s

    report = fp8ref.compare(finite_amax, (64, 50), like="rowwise_2d_scale_and_cast", values="special", device="cpu")
    assert report.top_categories()[0] == "scale_mismatch", report
    assert not report.ok


@pytest.mark.parametrize(
    ("actual", "category"),
    [(0x7F, "overflow_saturation_policy"), (0x68, "genuine")],
    ids=["nan-for-an-overflow", "unrelated-code-is-not-overflow"],
)
def test_overflow_policy_needs_the_reference_saturated_and_the_kernel_nan_or_inf(actual, category):
    from fp8ref.engine.categories import CATEGORIES, classify_fp8

    one = torch.ones(1)
    cat = classify_fp8(
        x=torch.tensor([1e30]),
        expected=torch.tensor([0x7E], dtype=torch.uint8),
        actual=torch.tensor([actual], dtype=torch.uint8),
        unwritten=torch.zeros(1, dtype=torch.bool),
        ref_scale=one,
        kernel_scale=one,
        neighbour_scales=torch.empty(0),
        layout_codes=torch.empty(0),
        fp8_dtype=torch.float8_e4m3fn,
    )
    assert CATEGORIES[int(cat[0])] == category


def test_wrong_output_strides_are_a_structure_difference():
    def col_major(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        return q.t().contiguous().t(), s

    report = fp8ref.compare(col_major, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert report.structure == ("output 0: strides (1, 4), expected (8, 1)",)
    assert report.n_fp8_mismatches == 0
    assert not report.ok


def test_kernel_exception_is_reported_not_raised():
    def broken(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        raise RuntimeError("launch failed")

    report = fp8ref.compare(broken, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert not report.ok
    assert report.error == "RuntimeError: launch failed"


def test_report_serialises_to_json_and_renders_a_heatmap_grid():
    report = fp8ref.compare(mutant("wrong_group_start"), (8, 100), offs="uniform", groups=4, device="cpu")
    assert not report.ok
    assert json.loads(json.dumps(report.to_dict()))["call"]["offs"] == [25, 50, 75, 100]
    page = report._repr_html_()
    assert "display:grid" in page
    assert "wrong_group_boundary" in page
    assert "wrong_group_boundary" in repr(report)


def test_callable_without_a_known_op_name_needs_like():
    with pytest.raises(ValueError, match="like="):
        fp8ref.compare(lambda x: x, (4, 8), device="cpu")


def test_import_fp8ref_imports_neither_triton_nor_hypothesis():
    code = "import sys, fp8ref, fp8ref.spec, fp8ref.engine; print('triton' in sys.modules, 'hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_second_run_with_another_shape_is_a_structure_difference():
    calls = []

    def shrinking(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        calls.append(None)
        return (q, s) if len(calls) == 1 else (q[:, :1], s)

    report = fp8ref.compare(shrinking, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert not report.ok
    assert any(d.startswith("second run: output 0: shape") for d in report.structure)


def test_a_kernel_that_writes_into_its_input_fails():
    def clobbering(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        out = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        x.zero_()
        return out

    report = fp8ref.compare(clobbering, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert not report.ok
    assert "the kernel wrote into input 0" in report.structure


def test_passing_report_html_leaves_out_its_all_zero_heatmap():
    report = fp8ref.compare("fp8ref.ops:rowwise_2d_scale_and_cast", (8, 100), device="cpu", battery=False)
    assert report.ok
    assert report.heatmaps  # computed, just not drawn: a passing heatmap is all zeros
    assert "display:grid" not in report._repr_html_()
