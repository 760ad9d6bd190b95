"""The default battery of ``fp8ref.compare``: axes covered, pins honoured, edge shapes, member labels and replay,
out-of-bounds writes as a category (pure PyTorch, the Triton interpreter and a GPU), every output of every op
compared, and every committed mutant caught with default arguments at the example shapes."""

from __future__ import annotations

import itertools

import pytest
import torch

import fp8ref
from fp8ref import ops
from fp8ref.contracts import CONTRACTS, contract
from fp8ref.engine.battery import (
    DTYPES,
    EXAMPLE_SHAPES,
    FORMATS,
    GROUPS,
    OFFS,
    POW2,
    VALUES,
    build_battery,
    edge_shapes,
    output_names,
)
from fp8ref.engine.mutants import MUTANTS, OUTPUT_MUTANTS, mutant

#: The quantization ops (a GEMM row is judged by SQNR and has no battery of its own here).
QUANTIZE_OPS = [op for op, c in CONTRACTS.items() if c.kind == "quantize"]


@pytest.mark.parametrize("op", QUANTIZE_OPS)
def test_battery_has_every_value_of_every_axis_and_every_format_values_pair(op):
    c = contract(op)
    members, notes = build_battery(c, EXAMPLE_SHAPES[op], formats=FORMATS)
    assert len(members) == len(FORMATS) * len(VALUES) == 8
    assert len({m.label for m in members}) == len(members)
    assert {(m.fp8_dtype, m.values) for m in members} == set(itertools.product(FORMATS, VALUES))
    assert {m.round_scales_to_power_of_2 for m in members} == set(POW2)
    assert {m.dtype for m in members} == set(DTYPES)
    assert {m.layout for m in members} == set(c.input_layouts)
    assert {(m.values, m.round_scales_to_power_of_2) for m in members} == set(itertools.product(VALUES, POW2))
    shapes = list(dict.fromkeys(m.shape for m in members))
    assert shapes[0] == EXAMPLE_SHAPES[op]
    assert len(shapes) == 3
    assert notes
    if c.jagged:
        assert {m.offs for m in members} == set(OFFS)
        for s in shapes[1:]:  # every edge shape sees both group counts, the smaller first (a per-shape cache)
            counts = [m.groups for m in members if m.shape == s]
            assert counts == sorted(counts)
            assert set(counts) == set(GROUPS)


def test_arguments_pin_their_axes_and_explicit_offsets_keep_the_callers_shape():
    c = contract("per_group_colwise_scales")
    members, _ = build_battery(
        c, (1000, 100), formats=FORMATS, values="special", fp8_dtype=torch.float8_e5m2, offs="dominant"
    )
    assert {(m.values, m.fp8_dtype, m.offs) for m in members} == {("special", torch.float8_e5m2, "dominant")}
    assert {m.groups for m in members} == set(GROUPS)
    members, notes = build_battery(c, (1000, 100), formats=FORMATS, offs=(10, 500, 990))
    assert {(m.shape, m.offs, m.groups) for m in members} == {((1000, 100), (10, 500, 990), None)}
    assert notes == ()


def test_with_every_axis_pinned_compare_makes_one_call():
    report = fp8ref.compare(
        "fp8ref.ops:rowwise_2d_scale_and_cast",
        (64, 128),
        dtype=torch.float16,
        fp8_dtype=torch.float8_e5m2,
        round_scales_to_power_of_2=True,
        values="special",
        layout="col_major",
        device="cpu",
    )
    assert report.ok, report
    assert report.members == ()
    assert report.call.member == "64x128,values=special,pow2,f16,e5m2,col_major"


def test_a_plain_callable_on_the_cpu_is_tried_in_all_four_formats():
    report = fp8ref.compare("fp8ref.ops:per_group_rowwise_scales", (7, 100), device="cpu")
    assert report.ok, report
    assert {m.call.fp8_dtype for m in report.members} == {str(f).removeprefix("torch.") for f in FORMATS}


@pytest.mark.parametrize("op", QUANTIZE_OPS)
def test_edge_shapes_are_odd_reach_below_a_block_and_keep_the_reduced_length(op):
    c = contract(op)
    shape = EXAMPLE_SHAPES[op]
    shapes, why = edge_shapes(c, shape)
    assert len(shapes) == 2
    assert "even dim" in why
    tiled = [i for i, d in enumerate(c.dims) if d != "E"]
    for s in shapes:
        assert all(s[i] % 2 == 1 for i in tiled), s
        assert any(s[i] <= 3 for i in tiled), s
        assert edge_shapes(c, s) == ((), "")  # an edge shape needs no edge shapes of its own
    assert shapes[0][c.reduce_dim] >= shape[c.reduce_dim]  # groups and rows stay longer than a tile
    if c.n_inputs == 2:
        assert {s[1] > s[2] for s in shapes} == {True, False}  # N1 > N2 and N1 < N2


def test_the_report_names_each_mismatchs_member_and_repro_replays_the_first_failing_one():
    # fnuz -0 written as 0x80: only members with an fnuz format fail.
    report = fp8ref.compare(mutant("fnuz_negative_zero"), (130, 16, 9), device="cpu")
    assert not report.ok
    failed = [m.call.member for m in report.members if not m.ok]
    assert failed
    assert all("fnuz" in label for label in failed)
    assert report.call.member == failed[0]
    assert {m.member for m in report.mismatches if m.fails} <= set(failed)
    assert f"FAIL {failed[0]}" in repr(report)
    assert f"<td>FAIL</td><td><code>{failed[0]}</code>" in report._repr_html_()
    replay: dict = {}
    with pytest.raises(AssertionError, match="nan_vs_number"):
        exec(compile(report.repro(), "repro.py", "exec"), replay)
    assert replay["report"].members == ()
    fields = ("shape", "offs", "dtype", "fp8_dtype", "round_scales_to_power_of_2", "values", "layout", "seed")
    assert [getattr(replay["report"].call, f) for f in fields] == [getattr(report.call, f) for f in fields]


def test_a_too_regular_shape_gets_edge_shapes_that_reach_a_dropped_tail_tile():
    # The mutant drops the last partial 16-column tile: (64, 128) has none, the edge shapes do.
    report = fp8ref.compare(mutant("wrong_tail_mask"), (64, 128), device="cpu")
    assert not report.ok
    assert "unwritten" in report.failing
    assert any("edge shapes" in note for note in report.notes)
    assert all(m.call.shape != (64, 128) for m in report.members if not m.ok)


def _store_past_q(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    out = torch.empty_like(q)
    # A store grid one row too tall: 8 bytes past the (4, 8) output.
    out.view(torch.uint8).as_strided((5, 8), (8, 1), out.storage_offset()).copy_(torch.ones(5, 8))
    out.copy_(q)
    return out, s


def test_a_write_past_an_output_is_an_out_of_bounds_write_with_output_bytes_and_offsets():
    report = fp8ref.compare(_store_past_q, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert report.failing == ("out_of_bounds_write",), report
    assert report.examples("out_of_bounds_write") == [
        "output 0: 8 byte(s) written outside its 32 bytes, at byte offsets 32, 33, 34, 35, ..."
    ]


def test_the_dual_second_half_launched_with_the_first_halfs_width_is_a_report_not_a_crash():
    report = fp8ref.compare(mutant("dual_second_half_first_width"), (100, 7, 3), device="cpu")
    assert "out_of_bounds_write" in report.failing
    assert any("output 2:" in text for text in report.examples("out_of_bounds_write", 100))


def test_a_triton_store_past_an_output_lands_in_the_redzone(device):
    """The interpreter writes a CPU argument's whole storage back and a GPU stores through raw pointers: either way
    the store lands in the redzone and is reported, without corrupting the process."""
    pytest.importorskip("fp8moe")  # imported first: without a GPU it turns the Triton interpreter on
    import triton
    import triton.language as tl

    @triton.jit
    def _store_past(q_ptr, n, EXTRA: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(q_ptr + i, tl.full((BLOCK,), 17, tl.uint8), mask=i < n + EXTRA)

    def kernel(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
        out = torch.empty_like(q)
        _store_past[(1,)](out.view(torch.uint8), out.numel(), EXTRA=8, BLOCK=64)
        out.copy_(q)
        return out, s

    report = fp8ref.compare(kernel, (4, 8), like="rowwise_2d_scale_and_cast", device=device, battery=False)
    assert report.failing == ("out_of_bounds_write",), report
    assert report.examples("out_of_bounds_write")[0].startswith("output 0: 8 byte(s) written outside its 32 bytes")


@pytest.mark.parametrize("name", OUTPUT_MUTANTS)
def test_every_output_of_every_op_is_compared(name):
    """A mutant corrupting one output only (e.g. the dual op's s2) fails, and only on that output."""
    m = MUTANTS[name]
    c = contract(m.op)
    index = output_names(c).index(name.split(".")[1].removesuffix("_corrupted"))
    report = fp8ref.compare(mutant(name), c.test_shapes[-1], device="cpu")
    assert m.category in report.failing, report
    kind = "fp8" if index % 2 == 0 else "scale"
    assert {(x.output, x.kind) for x in report.mismatches if x.fails} == {(index // 2, kind)}, report


def _store_past_x(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    out = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    x.view(-1).as_strided((4,), (1,), x.storage_offset() + x.numel()).fill_(1.0)  # 4 bf16 elements past x
    return out


def test_inputs_sit_between_zeroed_redzones_and_a_write_past_one_is_reported():
    report = fp8ref.compare(_store_past_x, (4, 8), like="rowwise_2d_scale_and_cast", device="cpu", battery=False)
    assert report.failing == ("out_of_bounds_write",), report
    assert report.examples("out_of_bounds_write") == [
        "input 0: 8 byte(s) written outside its 64 bytes, at byte offsets 64, 65, 66, 67, ..."
    ]


@pytest.mark.parametrize("jagged_kernel", ["span", "chunks", "tiles"])
def test_fp8moe_dual_kernel_launched_with_the_first_halfs_width_is_reported_not_a_crash(
    jagged_kernel, monkeypatch, device
):
    """The issue #10 crash: the dual kernel's second half run with N1 > N2 stored past q2 and s2 ("malloc():
    smallbin double linked list corrupted" in the interpreter). Now the stores land in redzones and are reported.
    On every per-group kernel (fp8moe.configs.PER_GROUP_KERNEL)."""
    pytest.importorskip("fp8moe")
    import torch

    from fp8moe import configs, replay
    from fp8moe.kernels import _coop, _group_chunks, _group_tiles

    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, jagged_kernel))
    replay.forget()
    launch = configs.launch
    widened = {}  # a call's workspace -> one laid out for the wrong width, new at a call's first launch

    def second_half_with_first_width(kernel, kernel_configs, backend, grid, **args):
        if "N1" in args and "N2" in args:  # the span kernel
            args["N2"] = args["N1"]
        if "R1" in args and "R2" in args:  # the cooperative kernels: the views' row counts, N1 and N2 of the op
            args["R2"] = args["R1"]
            # The bug is in the outputs only: the workspace is sized and laid out for the wrong width too.
            block_r, block_k = args["config"].kwargs["BLOCK_R"], args["config"].kwargs["BLOCK_K"]
            if "min_chunk" in args:  # the chunked kernel
                ws = _group_chunks.ChunkWorkspace((args["R1"],) * 2, args["G"], block_r)
            else:
                tiles = _group_tiles.tile_count((args["R1"],) * 2, args["K"], block_r, block_k)
                ws = _group_tiles.WorkspaceLayout((args["R1"],) * 2, args["G"], block_r, tiles)
            key = args["ws_ptr"].data_ptr()
            if key not in widened or args["PHASE"] in (_coop.PHASE_AMAX, _coop.PHASE_FUSED):
                widened[key] = torch.zeros(ws.size, dtype=torch.int32, device=args["ws_ptr"].device)  # a call's first
            args["ws_ptr"] = widened[key]
            args["counts1_at"], args["counts2_at"] = ws.counts
            args["amax1_at"], args["amax2_at"] = ws.amax
        return launch(kernel, kernel_configs, backend, grid, **args)

    monkeypatch.setattr(configs, "launch", second_half_with_first_width)
    report = fp8ref.compare("per_group_colwise_scales_dual", (130, 16, 3), device=device, battery=False)
    assert "out_of_bounds_write" in report.failing, report
    assert {text.split(":")[0] for text in report.examples("out_of_bounds_write", 10)} >= {"output 2", "output 3"}
