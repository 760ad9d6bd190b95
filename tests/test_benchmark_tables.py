"""The benchmark's pure parts (fp8moe.bench: points, bytes model, rows, table, arguments, plot) and the config summary.

benchmarks/ is not a package; the scripts are imported from their directory. Importing them imports fp8moe first
(they require it), so the interpreter switch on a CPU machine still happens before triton.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

import fp8moe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
tune_configs = pytest.importorskip("tune_configs")

from fp8moe import bench  # noqa: E402
from fp8ref.contracts import contract  # noqa: E402
from fp8ref.pytest_plugin import needs_interpreter  # noqa: E402


def _point(**overrides) -> bench.Point:
    return bench.Point(
        **{"op": "per_group_rowwise_scales", "shape": (8, 64), "groups": 2, "offs": "random", **overrides}
    )


def test_bench_row_derives_bandwidth_and_speedup_from_graph_time():
    # 4e6 bytes in 1000 us = 4 GB/s = 50% of 8; compile's 3000 us graph time over 1000 us = 3x.
    row = bench.make_row(_point(), "fp8moe", 1000.0, 1500.0, 4_000_000, 8.0, 3000.0, True, 250.0, "64x64/w4")
    assert row == {
        "op": "per_group_rowwise_scales",
        "impl": "fp8moe",
        "shape": [8, 64],
        "groups": 2,
        "variant": "offs=random",
        "layout": "row_major",
        "us": 1000.0,
        "eager_us": 1500.0,
        "eager_us_runs": [],
        "loop_us": None,
        "host_us": None,
        "gbps": 4.0,
        "pct_of_copy_bw": 50.0,
        "speedup_vs_compile": 3.0,
        "bitwise_ok": True,
        "first_call_ms": 250.0,
        "config": "64x64/w4",
    }


def test_bench_row_without_graph_time_has_no_bandwidth():
    row = bench.make_row(_point(), "torch.compile", None, 20.0, 100, 8.0, None, False)
    assert (row["gbps"], row["pct_of_copy_bw"], row["speedup_vs_compile"]) == (None, None, None)


def test_markdown_table_has_a_header_and_one_line_per_row_with_dashes_for_missing_values():
    rows = [
        bench.make_row(
            _point(),
            "fp8moe",
            1000.0,
            1500.0,
            4_000_000,
            8.0,
            3000.0,
            True,
            None,
            "16x512/w4/p1",
            loop_us=1100.0,
            host_us=41.5,
        ),
        bench.make_row(
            _point(op="rowwise_2d_scale_and_cast", groups=1, offs=None), "mine", None, 20.0, 1, 8.0, None, False
        ),
    ]
    lines = bench.markdown_table(rows)
    assert len(lines) == 4
    assert lines[2] == (
        "| per_group_rowwise_scales | fp8moe | 8x64 | 2 | offs=random | row_major | 1000.0 | 1500.0 | 1100.0 | 41.5 "
        "| 4 | 50% | 3.00x | yes | - | 16x512/w4/p1 |"
    )
    assert lines[3] == (
        "| rowwise_2d_scale_and_cast | mine | 8x64 | 1 | - | row_major | - | 20.0 | - | - | - | - | - | NO | - | - |"
    )


def test_eager_time_is_the_smaller_run_and_the_table_shows_the_larger_where_they_disagree():
    """Two eager runs per call (before and after its graph): the row keeps both, its eager time is the smaller one,
    and the table brackets the larger only past EAGER_DISAGREE_US (session 32's 98.9 / 227.6 us pair)."""
    stalled = bench.make_row(_point(), "fp8moe", 98.2, None, 1, 8.0, None, True, eager_runs=(227.6, 98.9))
    assert (stalled["eager_us"], stalled["eager_us_runs"]) == (98.9, [227.6, 98.9])
    assert bench.eager_cell(stalled) == "98.9 (227.6)"
    close = bench.make_row(_point(), "fp8moe", 98.2, None, 1, 8.0, None, True, eager_runs=(105.0, 98.9))
    assert bench.eager_cell(close) == "98.9"
    assert "| 98.2 | 98.9 (227.6) |" in bench.markdown_table([stalled])[2]


@pytest.mark.parametrize(
    ("op", "shape", "groups", "expected"),
    [
        # 2 bytes in + 1 byte out per element, 4 bytes per scale
        ("rowwise_2d_scale_and_cast", (16640, 2048), 1, 16640 * 2048 * 3 + 4 * 16640),
        ("colwise_3d_scale_and_cast", (16, 8192, 5120), 1, 16 * 8192 * 5120 * 3 + 4 * 16 * 5120),
        ("per_group_rowwise_scales", (2048, 16640), 128, 2048 * 16640 * 3 + 4 * 128 * 2048),
        ("per_group_colwise_scales", (16640, 2048), 64, 16640 * 2048 * 3 + 4 * 64 * 2048),
        ("per_group_colwise_scales_dual", (16640, 2048, 1408), 64, 16640 * 3456 * 3 + 4 * 64 * 3456),
    ],
)
def test_ideal_bytes_reads_each_input_once_and_writes_fp8_and_scales_once(op, shape, groups, expected):
    assert bench.ideal_bytes(contract(op), shape, groups) == expected


def test_reduced_shape_halves_the_largest_dim_but_keeps_16_per_group():
    assert bench.reduced_shape((16640, 2048), 64, max_elements=1 << 20) == (1040, 1024)
    assert bench.reduced_shape((2048, 16640), 128, max_elements=1 << 20) == (2048, 2080)  # floor 16 * 128
    assert bench.reduced_shape((7, 100), 1) == (7, 100)


def test_issue11_points_cover_every_op_and_the_issues_group_counts():
    ops = {p.op for p in bench.ISSUE11_POINTS}
    assert ops == {
        "per_group_rowwise_scales",
        "per_group_colwise_scales",
        "per_group_colwise_scales_dual",
        "colwise_3d_scale_and_cast",
        "rowwise_2d_scale_and_cast",
        "rowwise_3d_transpose_rhs",
    }
    assert {p.groups for p in bench.ISSUE11_POINTS if p.offs} == {16, 64, 128}
    assert {p.offs for p in bench.ISSUE11_POINTS if p.offs} >= {"aligned16", "random", "empty_middle"}
    for p in bench.ISSUE11_POINTS:
        contract(p.op).input_shapes(p.shape)  # raises on a malformed shape


def test_arguments_foreign_kernel_and_defaults():
    args = bench.parse_args(["--kernel", "mypkg.mod:fn", "--like", "per_group_colwise_scales", "--compile", "none"])
    assert (args.kernel, args.like, args.compile, args.points, args.out) == (
        "mypkg.mod:fn",
        "per_group_colwise_scales",
        "none",
        "issue11",
        "fp8moe-bench",
    )
    with pytest.raises(SystemExit):
        bench.parse_args(["--like", "per_group_colwise_scales"])  # --like without --kernel


def test_plot_writes_a_png_or_says_why_not(tmp_path):
    rows = [bench.make_row(_point(), "fp8moe", 1000.0, 1500.0, 4_000_000, 8.0, None, True)]
    message = bench.plot(rows, str(tmp_path / "p.png"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert message.startswith("matplotlib is not importable")
    else:
        assert (tmp_path / "p.png").stat().st_size > 0


def test_config_summary_counts_best_and_near_best_per_candidate_list(tmp_path):
    table = tmp_path / "configs.md"
    table.write_text(
        "| op | shape | variant | config | us | x best | | bitwise |\n"
        "|---|---|---|---|---:|---:|---|---|\n"
        "| per_group_rowwise_scales | 8x64 G=2 | - | 4x1024/w8 | 10 | 1.00 | best | yes |\n"
        "| per_group_rowwise_scales | 8x64 G=2 | - | 16x256/w8 | 11 | 1.10 | - | yes |\n"
        "| per_group_colwise_scales | 64x8 G=2 | - | 4x1024/w8 | 21 | 1.04 | - | yes |\n"
        "| per_group_colwise_scales | 64x8 G=2 | - | 16x256/w8 | 20 | 1.00 | best | yes |\n"
        "| rowwise_3d_transpose_rhs | 2x8x8 | method=atomic | 16x512/w4 | 5 | 1.00 | best | yes |\n"
        "| per_group_rowwise_scales | 8x64 G=2 | - | 4x1024/w8 | 99 | 9.90 | - | yes |\n"  # repeat: first wins
    )
    rows = tune_configs.summarize([str(table)])
    per_group = tune_configs.kernel_configs_of("per_group_rowwise_scales", {})[0].name  # the list CUDA runs
    assert f"| {per_group} | 4x1024/w8 | 1 | 2 | 2 | 1.00 | 1.04 |" in rows
    assert f"| {per_group} | 16x256/w8 | 1 | 1 | 2 | 1.00 | 1.10 |" in rows
    # the list the atomic transpose runs follows TRANSPOSE_ATOMIC_KERNEL (the two-launch fold's, or COOP_TRANSPOSE)
    transpose = tune_configs.kernel_configs_of("rowwise_3d_transpose_rhs", {"method": "atomic"})[0].name
    assert f"| {transpose} | 16x512/w4 | 1 | 1 | 1 | 1.00 | 1.00 |" in rows


def test_bench_bitwise_check_needs_same_count_strides_and_bits():
    import torch

    q = torch.zeros(2, 3, dtype=torch.float32)
    assert bench.same_outputs((q,), (q.clone(),))
    assert not bench.same_outputs((q,), (q, q))  # an output missing
    assert not bench.same_outputs((q.t().contiguous().t(),), (q,))  # same values, other strides
    assert not bench.same_outputs((q + 1,), (q,))


def test_bench_mismatch_says_which_output_differs_and_how():
    import torch

    q = torch.zeros(2, 3, dtype=torch.float32)
    assert bench.mismatch((q, q), (q.clone(), q.clone())) == ""
    assert bench.mismatch((q,), (q, q)) == "1 outputs, expected 2"
    assert bench.mismatch((q, q.t().contiguous().t()), (q, q)) == "output 1: strides (1, 2), expected (3, 1)"
    wrong = q.clone()
    wrong[1, 2] = 7.0
    message = bench.mismatch((q, wrong), (q, q))
    assert message.startswith("output 1: 1 of 6 differ; first at [[1, 2]]")
    assert "[7.0] vs expected [0.0]" in message


def test_bench_point_times_a_wrong_implementation_and_marks_it(monkeypatch, capsys):
    """On the CPU, without fp8moe's kernels: the reference passes, a kernel with doubled scales is marked False, and
    the log says which output differs at the full shape and where."""
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (5.0, (6.0, 9.0)))[1])
    reference = contract("rowwise_2d_scale_and_cast").reference

    def doubled_scales(x, **kwargs):
        q, scales = reference(x, **kwargs)
        return q, scales * 2

    point = bench.Point("rowwise_2d_scale_and_cast", (8, 40))
    rows = bench.bench_point(point, {"reference": reference, "mine": doubled_scales}, 4000.0, 1 << 12, device="cpu")
    assert [(r["impl"], r["bitwise_ok"], r["us"], r["eager_us"], r["eager_us_runs"]) for r in rows] == [
        ("reference", True, 5.0, 6.0, [6.0, 9.0]),
        ("mine", False, 5.0, 6.0, [6.0, 9.0]),
    ]
    assert all(r["loop_us"] > 0 for r in rows)  # the back-to-back loop ran the call itself (CPU: its wall time)
    assert all(r["host_us"] > 0 for r in rows)
    logged = capsys.readouterr().err
    expected = "rowwise_2d_scale_and_cast 8x40 G1 - row_major mine: the full-shape output differs: output 1: 8 of 8"
    assert expected in logged
    assert "reference: the full-shape output differs" not in logged


def test_copy_row_times_a_copy_of_the_points_ideal_bytes_and_is_no_implementation(monkeypatch):
    """The size-matched copy: half the point's ideal bytes read and as many written, timed as the implementations are,
    its bandwidth against the same copy_gbps; bitwise and the speed-up stay empty, and the exit status ignores it."""
    timed = []

    def fake_time(fn):
        fn()
        timed.append(fn)
        return 4.0, (7.0, 5.0)

    monkeypatch.setattr(bench, "_time", fake_time)
    point = bench.Point("rowwise_2d_scale_and_cast", (8, 40))
    nbytes = bench.ideal_bytes(contract(point.op), point.shape, point.groups)
    assert nbytes == 8 * 40 * 3 + 8 * 4
    row = bench.copy_row(point, nbytes, 4000.0, device="cpu")
    assert len(timed) == 1
    assert row["impl"] == bench.COPY_IMPL
    assert (row["us"], row["eager_us"], row["eager_us_runs"]) == (4.0, 5.0, [7.0, 5.0])
    moved = 2 * bench.COPY_ROUND_BYTES  # half of nbytes each way, rounded up to whole 2 MiB buffers
    assert row["gbps"] == pytest.approx(moved / 4.0 / 1e3)
    assert row["pct_of_copy_bw"] == pytest.approx(100 * row["gbps"] / 4000.0)
    assert row["bitwise_ok"] is None
    assert row["speedup_vs_compile"] is None
    cells = bench.markdown_table([row])[2].split(" | ")
    assert cells[1] == bench.COPY_IMPL
    assert cells[13] == "-"
    wrong = {**row, "impl": "mine", "bitwise_ok": False}
    assert bench.every_implementation_bitwise([row, {**row, "impl": "fp8moe", "bitwise_ok": True}])
    assert not bench.every_implementation_bitwise([row, wrong])


def test_same_bytes_section_sets_each_row_against_its_points_copy():
    """Each implementation row of a point with a copy row: its rate as % of that copy's; points without one, and the
    copy rows themselves, are left out; no copy rows at all, no section."""
    point = bench.Point("per_group_colwise_scales", (64, 32), 2, "aligned16")
    other = bench.Point("per_group_colwise_scales", (64, 32), 2, "random16")
    rows = [
        bench.make_row(point, "fp8moe", 10.0, 12.0, 40_000_000, 4000.0, 20.0, True),  # 4000 GB/s
        bench.make_row(point, bench.COPY_IMPL, 8.0, 9.0, 40_000_000, 4000.0, None, None),  # 5000 GB/s
        bench.make_row(other, "fp8moe", 10.0, 12.0, 40_000_000, 4000.0, 20.0, True),  # no copy row at this point
    ]
    lines = bench.same_bytes_lines(rows)
    table = [line for line in lines if line.startswith("| per_group")]
    assert table == [
        "| per_group_colwise_scales | fp8moe | 64x32 | 2 | offs=aligned16 | row_major | 125% | 100% | 80% |"
    ]
    assert bench.same_bytes_lines(rows[2:]) == []


def test_same_bytes_copy_takes_its_faster_time_and_marks_an_eager_one():
    """A copy row whose graph ran slower than its eager calls (an 8 GB copy on an H100: 6597 against 5354 us) is
    set against at its eager rate, marked; a row whose graph is faster keeps the graph rate."""
    point = bench.Point("colwise_3d_scale_and_cast", (128, 5120, 8192), 1, None)
    slow_graph = bench.make_row(point, bench.COPY_IMPL, 10.0, 8.0, 40_000_000, 4000.0, None, None)  # 4000 / 5000 GB/s
    assert bench.copy_rate(slow_graph) == (pytest.approx(5000.0), pytest.approx(125.0), True)
    fast_graph = {**slow_graph, "eager_us": 12.0}
    assert bench.copy_rate(fast_graph) == (pytest.approx(4000.0), pytest.approx(100.0), False)
    assert bench.copy_rate({**slow_graph, "us": None, "gbps": None, "pct_of_copy_bw": None}) == (None, None, False)
    kernel = bench.make_row(point, "fp8moe", 10.0, 10.2, 40_000_000, 4000.0, 20.0, True)  # 4000 GB/s
    for copy, cells in ((slow_graph, "125% (eager) | 100% | 80%"), (fast_graph, "100% | 100% | 100%")):
        table = [line for line in bench.same_bytes_lines([kernel, copy]) if line.startswith("| colwise")]
        assert table == [f"| colwise_3d_scale_and_cast | fp8moe | 128x5120x8192 | 1 | - | row_major | {cells} |"]


def test_copy_pieces_round_the_buffers_and_split_them(monkeypatch):
    """Half the bytes each way, rounded up to whole COPY_ROUND_BYTES (sizes off 4 KiB copied 1.2x slower on an H100),
    split into pieces of at most COPY_PIECE_BYTES (an 8 GB buffer copied at 81% in a graph), the pieces of one
    source buffer and one destination buffer, in order; copy_row's rate is of the bytes the pieces move."""
    monkeypatch.setattr(bench, "COPY_ROUND_BYTES", 64)
    monkeypatch.setattr(bench, "COPY_PIECE_BYTES", 256)
    pieces = bench.copy_pieces(1100, "cpu")  # 550 bytes each way -> 576 (9 x 64)
    assert [(src.nbytes, dst.nbytes) for src, dst in pieces] == [(256, 256), (256, 256), (64, 64)]
    srcs, dsts = zip(*pieces, strict=True)
    for views in (srcs, dsts):
        assert len({v.untyped_storage().data_ptr() for v in views}) == 1  # one buffer each
        assert [v.storage_offset() for v in views] == [0, 128, 256]
    assert srcs[0].untyped_storage().data_ptr() != dsts[0].untyped_storage().data_ptr()
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (4.0, (5.0,)))[1])
    row = bench.copy_row(bench.Point("rowwise_2d_scale_and_cast", (8, 40)), 1100, 4000.0, device="cpu")
    assert row["gbps"] == pytest.approx(2 * 576 / 4.0 / 1e3)


def test_bench_point_adds_the_copy_row_last_only_when_asked(monkeypatch):
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (5.0, (6.0, 9.0)))[1])
    reference = contract("rowwise_2d_scale_and_cast").reference
    point = bench.Point("rowwise_2d_scale_and_cast", (8, 40))
    rows = bench.bench_point(point, {"reference": reference}, 4000.0, 1 << 12, device="cpu", copy_reference=True)
    assert [(r["impl"], r["bitwise_ok"]) for r in rows] == [("reference", True), (bench.COPY_IMPL, None)]
    rows = bench.bench_point(point, {"reference": reference}, 4000.0, 1 << 12, device="cpu")
    assert [r["impl"] for r in rows] == ["reference"]
    # no implementation (prepared call 27): only the copy row, and no reference run for outputs nothing compares
    monkeypatch.setattr(type(contract(point.op)), "call", lambda *a, **k: pytest.fail("the reference ran"))
    rows = bench.bench_point(point, {}, 4000.0, 1 << 12, device="cpu", copy_reference=True)
    assert [(r["impl"], r["us"]) for r in rows] == [(bench.COPY_IMPL, 5.0)]
    assert bench.parse_args([]).copy_rows
    assert not bench.parse_args(["--no-copy-rows"]).copy_rows


def test_host_us_is_the_median_burst_wall_time_per_call_after_a_sync(monkeypatch):
    """HOST_BURSTS bursts of HOST_BURST_CALLS calls, a device sync before each burst and none inside: what the host
    takes per call while nothing waits for the device."""
    events = []
    monkeypatch.setattr(bench, "_sync", lambda device: events.append("sync"))
    starts = [float(b) for b in range(bench.HOST_BURSTS)]
    per_call = [(b % 5 + 1) * 1e-6 for b in range(bench.HOST_BURSTS)]  # 1-5 us per call, four bursts each
    ticks = iter(t for start, us in zip(starts, per_call) for t in (start, start + us * bench.HOST_BURST_CALLS))
    us = bench.host_us(lambda: events.append("call"), "cpu", clock=lambda: next(ticks))
    assert us == pytest.approx(3.0)
    burst = ["sync", *["call"] * bench.HOST_BURST_CALLS]
    assert events == burst * bench.HOST_BURSTS + ["sync"]


def test_loop_us_is_the_median_batch_wall_time_per_call():
    """Five batches of back-to-back calls, one sync each; a batch aims at LOOP_BATCH_US of calls, at least
    LOOP_MIN_CALLS (so a slow call's batch still spreads the first launch and the sync over 20 calls)."""
    ticks = iter([0.0, 0.010, 1.0, 1.020, 2.0, 2.030, 3.0, 3.040, 4.0, 4.050])  # 10/20/30/40/50 ms batches
    calls = []
    us = bench.loop_us(lambda: calls.append(1), "cpu", per_call_us=400.0, clock=lambda: next(ticks))
    assert bench.LOOP_MIN_CALLS == 20
    assert us == pytest.approx(30e3 / 20)  # 2000 us / 400 us = 5 calls would do: the floor of 20 applies
    assert len(calls) == 1 + 5 * 20  # one warm-up call, then 5 batches
    ticks = iter([0.0, 0.010, 1.0, 1.020, 2.0, 2.030, 3.0, 3.040, 4.0, 4.050])
    calls.clear()
    us = bench.loop_us(lambda: calls.append(1), "cpu", per_call_us=10.0, clock=lambda: next(ticks))
    assert us == pytest.approx(30e3 / 200)  # 2000 us / 10 us = 200 calls per batch
    assert len(calls) == 1 + 5 * 200


def test_the_jagged_coop_probe_times_the_g16_point_or_every_colwise_point():
    """benchmarks/probe_jagged_coop.py: ``G16`` is the colwise 65536 x 4096 point alone, ``colwise`` every per-group
    colwise point of issue #11 (the dual op's are another op)."""
    probe = pytest.importorskip("probe_jagged_coop")
    [g16] = probe.points("G16")
    assert (g16.op, g16.shape, g16.groups) == ("per_group_colwise_scales", (65536, 4096), 16)
    colwise = probe.points("colwise")
    assert len(colwise) == 8
    assert {p.op for p in colwise} == {"per_group_colwise_scales"}
    long = probe.points("long")
    assert long[-1] == g16
    assert all(p.shape[0] / p.groups >= 2048 for p in long), long


def _on_the_interpreter(probe, monkeypatch) -> None:
    """A probe script's inputs on the CPU (the interpreter runs its kernels) and its GPU timers stubbed: every call
    runs once and times 10 us, the copy bandwidth 1000 GB/s."""
    monkeypatch.setattr(probe, "DEVICE", "cpu")
    monkeypatch.setattr(probe, "copy_bandwidth_gbps", lambda: 1000.0)
    monkeypatch.setattr(probe, "_time", lambda fn: (fn() and 10.0, (10.0, 10.0)))
    monkeypatch.setattr(probe.torch.cuda, "get_device_name", lambda: "interpreter")


@needs_interpreter
def test_the_jagged_coop_probe_runs_both_kernels_and_checks_their_bytes(monkeypatch, capsys):
    """benchmarks/probe_jagged_coop.py end to end in the interpreter at a small twin of its point (no timing: the
    GPU timers stubbed): one row per kernel, with --cap a third with the cooperative tile capped (which the
    interpreter runs as the uncapped one), with --lines one with its counters a line apart (the launch's layout
    spied on), each bitwise against fp8ref; the kernel settings put back after."""
    from fp8moe.kernels import _coop_slices

    probe = pytest.importorskip("probe_jagged_coop")
    small = bench.Point("per_group_colwise_scales", (300, 24), 2, "aligned16")
    monkeypatch.setattr(probe, "points", lambda which: [small])
    _on_the_interpreter(probe, monkeypatch)
    monkeypatch.setattr(probe.configs, "PER_GROUP_KERNEL", dict(probe.configs.PER_GROUP_KERNEL))
    monkeypatch.setattr(probe.configs, "GROUP_COOP_CAP", None)
    words_seen = []
    real_count_words = _coop_slices.count_words
    monkeypatch.setattr(_coop_slices, "count_words", lambda u: words_seen.append(real_count_words(u)) or words_seen[-1])
    before = dict(probe.configs.PER_GROUP_KERNEL)
    for args, kernels, words in (
        (["--points", "G16"], ["auto", "coop"], {1}),
        (["--cap", "128"], ["auto", "coop", "coop/r128"], {1}),
        (["--lines"], ["auto", "coop", "coop/lines"], {1, 32}),
    ):
        words_seen.clear()
        probe.main(args)
        rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| per_group")]
        assert [row.split("|")[5].strip() for row in rows] == kernels
        assert all(row.rstrip(" |").endswith("yes") for row in rows), rows
        assert set(words_seen) == words, args
    assert probe.configs.GROUP_COOP_CAP is None  # put back by the probe
    assert probe.configs.GROUP_COOP_COUNT_LINES is False
    assert before == probe.configs.PER_GROUP_KERNEL


def test_bench_point_filters_take_an_op_substring_and_any_of_several_selections():
    """fp8moe.bench --only and --select (comma-separated, any)."""
    picked = bench.select_points(bench.ISSUE11_POINTS, "3d", "- row_major,method=atomic")
    assert [(p.op, p.layout, p.kwargs) for p in picked] == [
        *[("colwise_3d_scale_and_cast", "row_major", {})] * 4,
        *[("rowwise_3d_transpose_rhs", "row_major", {"method": "atomic"})] * 4,
    ]
    assert bench.select_points(bench.ISSUE11_POINTS, None, None) == list(bench.ISSUE11_POINTS)
    assert bench.select_points(bench.ISSUE11_POINTS, "rowwise_2d", "nothing") == []
    either = [p for p in bench.ISSUE11_POINTS if "rowwise_2d" in p.op or "dual" in p.op]
    assert bench.select_points(bench.ISSUE11_POINTS, "rowwise_2d,dual", None) == either != []


def test_tune_point_filters_combine_ops_select_and_size():
    points = bench.ISSUE11_POINTS
    per_group = tune_configs.select_points(points, only="per_group_rowwise,rowwise_2d")
    assert {p.op for p in per_group} == {"per_group_rowwise_scales", "rowwise_2d_scale_and_cast"}
    small = tune_configs.select_points(points, only="colwise_3d", max_elements=2e9)
    assert small
    assert all(p.shape != (128, 5120, 8192) for p in small)
    assert tune_configs.select_points(points, select="offs=random") == [p for p in points if "offs=random" in p.variant]
    assert tune_configs.select_points(points) == list(points)


def test_tune_candidates_parse_as_describe_writes_them_and_extend_or_replace_a_list_only_inside_the_block():
    from fp8moe import configs

    per_group = tune_configs.kernel_configs_of("per_group_rowwise_scales", {})[0].name  # the list CUDA runs
    extra = tune_configs.parse_candidates(
        [
            "rowwise_scale_and_cast=64x256/w8,32x256/w4,16x512/w4",
            f"{per_group}=8x1024/w8,64x128/w4/g,64x64/w4/r96/g,32x128/w8/t,64x64/w4/g/t,64x64/w4/g/o128,64x64/w4/o128/e",
            f"{per_group}=64x64/w4/g/l,32x128/w8/t/l,64x64/w4/o128/e/l,32x128/w8/g/t/ev2,64x64/w4/o128/x1/l/ev1",
        ]
    )
    assert [configs.describe(c) for c in extra["rowwise_scale_and_cast"]] == ["64x256/w8", "32x256/w4", "16x512/w4"]
    assert extra["rowwise_scale_and_cast"][1].kwargs == {"BLOCK_S": 32, "BLOCK_L": 256}
    assert extra[per_group][0].kwargs == {"BLOCK_R": 8, "BLOCK_K": 1024}
    assert extra[per_group][1].kwargs == {"BLOCK_R": 64, "BLOCK_K": 128, "GROUPS_FASTEST": True}
    assert extra[per_group][3].kwargs == {"BLOCK_R": 32, "BLOCK_K": 128, "ONE_READ": False}
    assert extra[per_group][4].kwargs == {"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "ONE_READ": False}
    assert extra[per_group][5].kwargs == {"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "ONE_READ_K": 128}
    assert extra[per_group][6].kwargs == {"BLOCK_R": 64, "BLOCK_K": 64, "ONE_READ_K": 128, "EDGES_IN_TILE": True}
    assert extra[per_group][7].kwargs == {"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "EDGE_LOOP": True}
    assert extra[per_group][8].kwargs == {"BLOCK_R": 32, "BLOCK_K": 128, "ONE_READ": False, "EDGE_LOOP": True}
    assert extra[per_group][10].kwargs == {
        "BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True, "ONE_READ": False, "L2_HINTS": 2,
    }  # fmt: skip
    assert extra[per_group][11].kwargs == {
        "BLOCK_R": 64, "BLOCK_K": 64, "ONE_READ_K": 128, "EXTRA_CHUNKS": 1, "EDGE_LOOP": True, "L2_HINTS": 1,
    }  # fmt: skip
    assert [configs.describe(c) for c in extra[per_group]] == [
        "8x1024/w8", "64x128/w4/g", "64x64/w4/r96/g", "32x128/w8/t", "64x64/w4/g/t", "64x64/w4/g/o128",
        "64x64/w4/o128/e", "64x64/w4/g/l", "32x128/w8/t/l", "64x64/w4/o128/e/l", "32x128/w8/g/t/ev2",
        "64x64/w4/o128/x1/l/ev1",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="64x128/w4/s64"):  # LARGEST_FIRST (sessions 26-27) was removed
        configs.parse_config("64x128/w4/s64", ["BLOCK_R", "BLOCK_K"])
    for level in ("ev0", "ev3", "ev"):  # L2_HINTS is 1 or 2 (fp8moe.kernels._span.quantize_group_span)
        with pytest.raises(ValueError, match=level):
            configs.parse_config(f"64x64/w4/g/{level}", ["BLOCK_R", "BLOCK_K"])
    assert extra[per_group][2].maxnreg == 96
    assert extra[per_group][0].maxnreg is None
    listed, smallest = configs.ROWWISE.cuda, configs.ROWWISE.smallest_cuda
    with tune_configs.extra_candidates(extra):
        assert configs.ROWWISE.cuda == (*listed, *extra["rowwise_scale_and_cast"])
    assert configs.ROWWISE.cuda == listed
    with tune_configs.extra_candidates(extra, replace=True):
        assert configs.ROWWISE.cuda == tuple(extra["rowwise_scale_and_cast"])
        assert (
            configs.ROWWISE.smallest_cuda == extra["rowwise_scale_and_cast"][1]
        )  # 32 x 256, the first of the smallest
    assert configs.ROWWISE.cuda == listed
    assert configs.ROWWISE.smallest_cuda == smallest
    bad_tiles = (
        "per_group_scales=64x64x64/w4",
        "rowwise_scale_and_cast=8x1024/8",
        "nope=1x1/w1",
        "per_group_scales=64x64/w4/x",
        "per_group_scales=64x64/g/w4",
        "per_group_scales=64x64/w4/g/r96",
        "per_group_scales=64x64/w4/r",
        "per_group_scales=64x64/w4/t/g",
        "per_group_scales=64x64/w4/t/t",
        "per_group_scales=64x64/w4/t/o128",
        "per_group_scales=64x64/w4/o96",
        "per_group_scales=64x64/w4/o128/g",
        "per_group_scales=64x64/w4/e/o128",
        "per_group_scales=64x64/w4/t/e",
        "per_group_scales=64x64/w4/l/g",
        "per_group_scales=64x64/w4/l/e",
        "per_group_scales=64x64/w4/l/l",
    )
    for bad in bad_tiles:
        with pytest.raises(SystemExit):
            tune_configs.parse_candidates([bad])


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
@pytest.mark.parametrize("slice_len", [0, 32, 64])
@pytest.mark.parametrize("mode", ["ptr", "tma", "ptr+tma", "tma+ptr", "join4", "rows"])
def test_transpose_ceiling_kernels_write_what_the_script_expects(mode, slice_len):
    """Integers in [-7, 7] with a 7 in every (slice, column): the per-slice scale is 448 / 7 = 64, so every scaled
    value is an exact e4m3 code and the interpreter's cast (wrong only for inexact values) gives true bytes."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    transpose_ceiling = pytest.importorskip("transpose_ceiling")
    kt, n, block_k, block_n = 128, 64, 32, 32
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-6, 7, (kt, n), generator=g).float()
    if slice_len:
        x[::slice_len] = 7.0  # one 7 per slice and column (slice 0: the constant scale 64 needs none)
    x = x.to(torch.bfloat16)
    q = torch.empty((kt, n) if mode == "rows" else (n, kt), dtype=torch.float8_e4m3fn)
    x_desc = TensorDescriptor.from_tensor(x, [block_k, block_n])
    q_desc = TensorDescriptor.from_tensor(q, [block_n, block_k]) if mode != "rows" else x_desc
    grid = (kt // (slice_len or block_k), n // block_n)
    transpose_ceiling._cast_t_kernel[grid](
        x, q, x_desc, q_desc, kt, n, SLICE=slice_len, BLOCK_K=block_k, BLOCK_N=block_n,
        MODE=transpose_ceiling.MODES[mode],
    )  # fmt: skip
    expected = transpose_ceiling.expected(x, slice_len, mode)
    assert torch.equal(q.view(torch.uint8), expected.view(torch.uint8))


def test_ncu_summary_groups_launches_by_marker_and_converts_units(tmp_path):
    # Two points; the second launches two kernels (the atomic transpose) plus its own float fill, which must not be
    # taken for the marker (FillFunctor<double>).
    profile_kernels = pytest.importorskip("profile_kernels")
    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
    stall = "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"
    rows = [
        (0, "at::FillFunctor<double> fill", "Duration", "ns", "1000"),
        (1, "_per_group_rows_kernel", "Duration", "ns", "86,171"),
        (1, "_per_group_rows_kernel", "dram__bytes_read.sum", "byte", "170000000"),
        (1, "_per_group_rows_kernel", "dram__bytes_write.sum", "Mbyte", "85"),
        (1, "_per_group_rows_kernel", "Registers Per Thread", "register/thread", "80"),
        (1, "_per_group_rows_kernel", stall, "", "2.24"),
        (1, "_per_group_rows_kernel", "Elapsed Cycles", "cycle", "200,000"),
        (1, "_per_group_rows_kernel", "SM Active Cycles", "cycle", "170,000"),
        (2, "at::FillFunctor<double> fill", "Duration", "ns", "1000"),
        (3, "at::FillFunctor<float> zero", "Duration", "ns", "1000"),
        (4, "_transpose_rhs_amax_kernel", "Duration", "us", "303.4"),
        (5, "_transpose_rhs_quantize_kernel", "Duration", "ms", "0.47"),
    ]
    log = tmp_path / "ncu.csv"
    log.write_text(
        "# point | per_group_rowwise_scales | 5120x16640 G=64 | offs=aligned16 | row_major | 255000000\n"
        "# point | rowwise_3d_transpose_rhs | 16x8192x5120 G=1 | method=atomic | row_major | 2013790208\n"
        + header
        + "\n"
        + "\n".join(",".join(f'"{v}"' for v in row) for row in rows)
        + "\n"
    )
    table = profile_kernels.summarize(str(log)).splitlines()
    body = [line.split(" | ") for line in table[2:]]
    assert [(cells[0].lstrip("| "), cells[1]) for cells in body] == [
        ("per_group_rowwise_scales 5120x16640 G=64", "_per_group_rows_kernel"),
        # a non-default variant (or layout) is part of the label: it tells apart points of one shape
        ("rowwise_3d_transpose_rhs 16x8192x5120 G=1 method=atomic", "at::FillFunctor<float> zero"),
        ("rowwise_3d_transpose_rhs 16x8192x5120 G=1 method=atomic", "_transpose_rhs_amax_kernel"),
        ("rowwise_3d_transpose_rhs 16x8192x5120 G=1 method=atomic", "_transpose_rhs_quantize_kernel"),
    ]
    assert body[0][2] == "86.2"  # us, from ns with a thousands separator
    assert (body[0][-4], body[0][-3]) == ("170.0", "85.0")  # DRAM read and written, MB
    assert body[0][-2] == "1.00"  # (170 MB + 85 MB) / 255 MB ideal
    assert (body[0][-5], body[2][-5]) == ("15.0", "-")  # SMs idle: 1 - 170k / 200k active cycles; none reported
    assert body[0][-1].startswith("not_selected 2.24")
    assert (body[2][2], body[3][2]) == ("303.4", "470.0")


def test_ncu_idle_split_divides_each_layouts_time_into_idle_and_active_factors(tmp_path):
    """profile_kernels --idle-split: a layout's time over its aligned16 twin's (same op, shape and tile) is the
    factor of SM idle time times the factor of active cycles: aligned16 at 100 us with 5% idle, random16 at 132 us
    with 14.5% idle: x1.32 = 1.111 (95 / 85.5) x 1.188. A point without an aligned16 twin gives no line."""
    profile_kernels = pytest.importorskip("profile_kernels")
    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
    launches = [("aligned16", "100", "100,000", "95,000"), ("random16", "132", "132,000", "112,860")]
    rows, points = [], []
    for i, (layout, us, elapsed, active) in enumerate(launches):
        points.append(
            f"# point | per_group_colwise_scales_dual | 16640x2048x2048 G=64 | offs={layout} 64x64/w4/g/t "
            "| row_major | 205520896"
        )
        rows += [
            (2 * i, "at::FillFunctor<double> fill", "Duration", "ns", "1000"),
            (2 * i + 1, "_dual_kernel", "Duration", "us", us),
            (2 * i + 1, "_dual_kernel", "Elapsed Cycles", "cycle", elapsed),
            (2 * i + 1, "_dual_kernel", "SM Active Cycles", "cycle", active),
        ]
    points.append("# point | per_group_rowwise_scales | 5120x16640 G=64 | offs=random16 64x64/w4/g | row_major | 1")
    rows += [(4, "at::FillFunctor<double> fill", "Duration", "ns", "1000"), (5, "_rows", "Duration", "us", "9")]
    log = tmp_path / "ncu.csv"
    log.write_text("\n".join([*points, header, *(",".join(f'"{v}"' for v in row) for row in rows)]) + "\n")
    _, _, aligned, random = profile_kernels.idle_split(str(log)).splitlines()
    assert aligned.endswith("| offs=aligned16 | 100.0 | 1.00 | 5.0 | 1.000 | 1.000 |")
    assert random == (
        "| per_group_colwise_scales_dual | 16640x2048x2048 G=64 | 64x64/w4/g/t | offs=random16 | 132.0 | 1.32 | 14.5 "
        "| 1.111 | 1.188 |"
    )


@pytest.mark.parametrize("frozen", [False, True])
def test_quantization_floor_is_the_step_inputs_read_once_and_every_operand_the_reference_path_writes(frozen):
    # Counted from what a step's quantization must produce, not from the formula: the reference path's fp8 operands
    # and scales for all three GEMMs (each tensor once, though two GEMMs share it) plus each bf16 input read once.
    bench_grouped_mm = pytest.importorskip("bench_grouped_mm")
    import torch

    from fp8ref import grouped_mm as ref

    m, k, n, e = 48, 32, 64, 3
    A, B_t, grad_out = (torch.randn(*s).to(torch.bfloat16) for s in ((m, k), (e, k, n), (m, n)))
    offs = torch.tensor([16, 16, 48], dtype=torch.int32)
    paths = ref.quantize_operands(A, B_t, offs, grad_out)
    weight_operands = (paths.forward.b, paths.forward.b_scale, paths.dgrad.b, paths.dgrad.b_scale)
    written = {
        t.data_ptr(): t.numel() * t.element_size()  # a view's elements (some scales are views of a larger buffer)
        for gemm in paths
        for t in gemm
        if not (frozen and any(t is w for w in weight_operands))
    }
    read = sum(2 * t.numel() for t in (A, grad_out) + (() if frozen else (B_t,)))
    floor = bench_grouped_mm.quantization_floor_bytes(m, k, n, e, frozen_weights=frozen)
    assert floor == read + sum(written.values())


@needs_interpreter
def test_micro_batch_bench_runs_on_the_cpu_and_finds_frozen_weights_bitwise_equal(monkeypatch):
    # The GPU run of bench_grouped_mm --micro-batches (fp8moe.frozen_weights) is a table of times; its logic, and the
    # equality of the frozen and plain steps it reports, run here on the interpreter.
    bench_grouped_mm = pytest.importorskip("bench_grouped_mm")
    monkeypatch.setattr(bench_grouped_mm, "DEVICE", "cpu")
    lines = []
    bench_grouped_mm.micro_batches([(32, 32, 32, 2)], 2, lambda line="": lines.append(line))
    [row] = [line for line in lines if line.startswith("| 32, 32, 32, 2 |")]
    assert row.endswith("| yes |"), row


@needs_interpreter
def test_tune_point_times_groups_fastest_twins_in_their_own_grid_order_and_checks_each_bitwise(monkeypatch):
    import triton  # fp8moe, imported at the top of this module, came first

    from fp8moe import configs
    from fp8moe.kernels import _per_group

    orders, jagged_grid = [], _per_group.jagged_grid

    def recording_grid(row_blocks, groups, groups_fastest):
        orders.append(groups_fastest)
        return jagged_grid(row_blocks, groups, groups_fastest)

    monkeypatch.setattr(_per_group, "jagged_grid", recording_grid)
    monkeypatch.setitem(configs.PER_GROUP_KERNEL, "interpreter", "span")
    twins = tune_configs.groups_fastest_twins()
    listed = configs.PER_GROUP.cuda
    candidates = (*listed, *twins[configs.PER_GROUP.name])
    names = [configs.describe(c) for c in candidates]
    groups_fastest = [bool(c.kwargs.get("GROUPS_FASTEST")) for c in candidates]
    tiles = [configs.describe(triton.Config({**c.kwargs, "GROUPS_FASTEST": False}, c.num_warps)) for c in candidates]
    assert Counter(zip(tiles, groups_fastest)) == {(t, order): 1 for t in tiles for order in (False, True)}
    point = bench.Point("per_group_colwise_scales", (160, 24), 3, "random")
    with tune_configs.extra_candidates(twins):
        rows = tune_configs.tune_point(point, lambda fn, rep: 1.0, device="cpu")
    assert [r.split("|")[4].strip() for r in rows] == names
    assert all(r.endswith("| yes |") for r in rows)  # every forced run bitwise, in both orders
    # after the call that finds the kernel that runs (tune_configs.lists_that_ran), one checked launch per
    # candidate, each in its config's order
    assert orders[1:] == groups_fastest
    assert configs.PER_GROUP.cuda == listed


@needs_interpreter
def test_tune_point_times_every_candidate_with_word_and_byte_stores_and_checks_each_bitwise(monkeypatch):
    from fp8moe import configs

    packs = []
    launch = configs.launch

    def recording_launch(kernel, kernel_configs, backend, grid, **args):
        packs.append(args["PACK_K"])
        return launch(kernel, kernel_configs, backend, grid, **args)

    monkeypatch.setattr(configs, "launch", recording_launch)
    # K = 64 of a row-major (E, K, N) input: a transposing view with 4-byte aligned rows, so the launcher's own
    # choice is word stores.
    point = bench.Point("colwise_3d_scale_and_cast", (2, 64, 40))
    rows = tune_configs.tune_point(point, lambda fn, rep: float(len(packs)), device="cpu", with_byte_stores=True)
    n = len(tune_configs.kernel_configs_of(point.op, {})[0].cuda)
    # the call that finds the kernel that runs (tune_configs.lists_that_ran), then one checked launch per run: words
    # for each candidate, then bytes
    assert packs == [4] + [4] * n + [1] * n
    assert [r.split("|")[4].strip().endswith("/bytes") for r in rows] == [False] * n + [True] * n
    assert all(r.endswith("| yes |") for r in rows)  # every forced run bitwise
    import fp8moe.kernels._rows as rows_module
    from fp8moe.kernels._span import pack_k

    assert rows_module.pack_k is pack_k  # byte_stores() restored the launcher's choice


def test_sigterm_inside_the_bench_loop_raises_stopped_and_the_handler_is_restored():
    import os
    import signal

    before = signal.getsignal(signal.SIGTERM)
    reached = []

    def one_point():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # os.kill runs the handler before it returns
            reached.append("after kill")
        except Exception:  # an ordinary error handler (one failing point) must not swallow it
            reached.append("swallowed")

    with bench.sigterm_stops(), pytest.raises(bench.Stopped):
        one_point()
    assert reached == []
    assert signal.getsignal(signal.SIGTERM) is before


@needs_interpreter
def test_tune_point_marks_the_tile_a_rule_list_picks(monkeypatch):
    """A candidate list chosen by a rule (fp8moe.configs.GROUP_TILES) has no untuned-small choice: the row of the tile
    the rule picks for the point is marked "rule" (here a stand-in rule picking candidate 2), every run bitwise."""
    from fp8moe import configs

    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, "tiles"))
    monkeypatch.setitem(configs.CONFIGS_BY_SPEC, "per_group_colwise_scales", (configs.GROUP_TILES,))
    original = configs.KernelConfigs.fixed

    def rule_everywhere(self, backend, args):  # the interpreter sizes its own tiles; stand in for the CUDA rule
        return self.cuda[2] if self is configs.GROUP_TILES else original(self, backend, args)

    monkeypatch.setattr(configs.KernelConfigs, "fixed", rule_everywhere)
    point = bench.Point("per_group_colwise_scales", (64, 40), groups=3, offs="aligned16")
    rows = tune_configs.tune_point(point, lambda fn, rep: 1.0, device="cpu")
    assert len(rows) == len(configs.GROUP_TILES.cuda)
    marked = [r.split("|")[4].strip() for r in rows if " rule" in r.split("|")[7]]
    assert marked == [configs.describe(configs.GROUP_TILES.cuda[2])]
    assert all(r.endswith("| yes |") for r in rows)


@needs_interpreter  # CPU tensors
@pytest.mark.parametrize(("kernel", "kernel_list"), [("rows", "rowwise_scale_and_cast"), ("coop", "coop_columns")])
def test_tune_point_forces_the_candidates_of_the_kernel_that_ran(kernel, kernel_list, monkeypatch, tmp_path):
    """colwise 3D runs the row kernel or the cooperative slice kernel by its setting and the input
    (fp8moe.configs.COLWISE_3D_KERNEL), while CONFIGS_BY_SPEC names the row kernel's list: tune_point forces the
    candidates of the list whose kernel the call launched, names that list in the variant where it is not the spec's
    owner, and the summary counts each row under it. Each forced candidate is seen launching (no row times a tile
    that never ran)."""
    from fp8moe import configs

    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, kernel))
    owner = {k.name: k for k in bench.config_lists(bench.Point("colwise_3d_scale_and_cast", (1, 8, 8)))}[kernel_list]
    launched = []
    real = configs.launch

    def spy(kernel_fn, kernel_configs, backend, grid, config=None, **args):
        if kernel_configs is owner:  # the config the launcher chose (the cooperative ones size a workspace by it)
            launched.append(configs.describe(config if config is not None else kernel_configs.fixed(backend, args)))
        real(kernel_fn, kernel_configs, backend, grid, config, **args)

    monkeypatch.setattr(configs, "launch", spy)
    point = bench.Point("colwise_3d_scale_and_cast", (2, 64, 48), layout="row_major")
    rows = tune_configs.tune_point(point, lambda fn, rep: 1.0, device="cpu")
    configs_timed = [r.split("|")[4].strip() for r in rows]
    assert configs_timed == [configs.describe(c) for c in owner.cuda]
    assert set(configs_timed) <= set(launched)
    assert all(r.endswith("| yes |") for r in rows)
    variants = {r.split("|")[3].strip() for r in rows}
    assert variants == ({"list=coop_columns"} if kernel == "coop" else {"-"})
    table = tmp_path / "configs.md"
    table.write_text("\n".join(rows) + "\n")
    assert {line.split("|")[1].strip() for line in tune_configs.summarize([str(table)])[2:]} == {kernel_list}


@needs_interpreter  # CPU tensors: on the GPU machine this failed with "fp8moe kernels need tensors on a CUDA/ROCm
# device" (benchmarks/results/h200-s14-call3-pytest.log)
@pytest.mark.parametrize(("groups", "kernel_list"), [(3, "group_chunks"), (8, "per_group_colwise_scales_dual")])
def test_bench_reports_the_config_of_the_jagged_kernel_that_ran(groups, kernel_list, monkeypatch):
    """Under "auto" a dual call runs the chunked or the span kernel by its mean group length: the row's config is
    the one of the kernel that ran, none left from earlier calls or the shape checks (fp8moe.bench._launch_configs).
    """
    from fp8moe import configs

    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, "auto"))
    monkeypatch.setattr(configs, "CHUNKS_MEAN_GROUP", (64, 256))  # interpreter-sized: 300 / 3 = 100 is inside
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (5.0, (6.0, 6.5)))[1])
    monkeypatch.setattr(bench, "loop_us", lambda fn, device, per_call_us: 7.0)
    monkeypatch.setattr(bench, "host_us", lambda fn, device: 3.0)
    fp8moe.replay.forget()
    configs.LAST_CONFIG["group_chunks"] = configs.GROUP_CHUNKS.cuda[0]  # stale: from some earlier call
    point = bench.Point("per_group_colwise_scales_dual", (300, 24, 40), groups, "aligned16")
    [row] = bench.bench_point(point, {"fp8moe": fp8moe.per_group_colwise_scales_dual}, 4000.0, 1 << 12, device="cpu")
    assert row["bitwise_ok"]
    assert row["config"] == configs.describe(configs.LAST_CONFIG[kernel_list])
    assert "+" not in row["config"]  # one kernel ran, one config reported
    fp8moe.replay.forget()


@needs_interpreter  # CPU tensors (see the test above)
@pytest.mark.parametrize(("kernel", "kernel_list"), [("rows", "rowwise_scale_and_cast"), ("coop", "coop_columns")])
def test_bench_reports_the_config_of_the_colwise_3d_kernel_that_ran(kernel, kernel_list, monkeypatch):
    """colwise 3D on a row-major input runs the row kernel or the cooperative column kernel
    (fp8moe.configs.COLWISE_3D_KERNEL): the row's config is the one of the kernel that ran, and only that one."""
    from fp8moe import configs

    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, kernel))
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (5.0, (6.0, 6.5)))[1])
    monkeypatch.setattr(bench, "loop_us", lambda fn, device, per_call_us: 7.0)
    monkeypatch.setattr(bench, "host_us", lambda fn, device: 3.0)
    fp8moe.replay.forget()
    point = bench.Point("colwise_3d_scale_and_cast", (2, 40, 24), layout="row_major")
    [row] = bench.bench_point(point, {"fp8moe": fp8moe.colwise_3d_scale_and_cast}, 4000.0, 1 << 12, device="cpu")
    assert row["bitwise_ok"]
    assert row["config"] == configs.describe(configs.LAST_CONFIG[kernel_list])
    assert "+" not in row["config"]
    fp8moe.replay.forget()


@needs_interpreter  # CPU tensors (see the test above)
def test_bench_forgets_the_autotuners_choice_before_each_jagged_point_and_only_there(monkeypatch):
    """The per-group autotune key is the shape, not the group layout: each jagged row must be tuned at its own
    layout, not inherit the tile of the previous layout of the same shape (fp8moe.bench._forget_tuning)."""
    from fp8moe import configs

    forgotten = []
    monkeypatch.setattr(configs, "forget_tuning", lambda names: forgotten.append(sorted(names)))
    monkeypatch.setattr(bench, "_time", lambda fn: (fn(), (5.0, (6.0, 6.5)))[1])
    monkeypatch.setattr(bench, "loop_us", lambda fn, device, per_call_us: 7.0)
    monkeypatch.setattr(bench, "host_us", lambda fn, device: 3.0)
    jagged = bench.Point("per_group_rowwise_scales", (24, 300), 3, "random16")
    dense = bench.Point("rowwise_2d_scale_and_cast", (24, 40))
    for point, op in ((jagged, fp8moe.per_group_rowwise_scales), (dense, fp8moe.rowwise_2d_scale_and_cast)):
        [row] = bench.bench_point(point, {"fp8moe": op}, 4000.0, 1 << 12, device="cpu")
        assert row["bitwise_ok"]
    assert forgotten == [sorted(k.name for k in bench.config_lists(jagged))]
    assert configs.PER_GROUP.name in forgotten[0]
    fp8moe.replay.forget()


@needs_interpreter  # the GPU runs the script itself; here its variants' logic on small shapes
def test_unaligned_probe_variants_take_effect_and_the_main_variant_is_bitwise(monkeypatch):
    probe_unaligned = pytest.importorskip("probe_unaligned")
    from fp8moe import configs
    from fp8moe.kernels import _span

    points = probe_unaligned.SMALL_POINTS
    assert probe_unaligned.layout_offs("shifted8", 64, 4) == (24, 40, 56, 64)
    # random16: the random layout's cuts moved down to multiples of 16, the end kept
    random, random16 = (probe_unaligned.layout_offs(name, 16640, 64) for name in ("random", "random16"))
    assert random16 == (*(end // 16 * 16 for end in random[:-1]), 16640)
    assert any(end % 16 for end in random)
    assert all(end % 16 == 0 for end in random16)
    rows = []
    # the "_alone" variants run the deferred variants' edge kernel on main's outputs, and the 128-column windows are
    # the 32-column ones wider (test_edge_chunk_kernel_writes_exactly_the_unaligned_chunks checks every width)
    for variant in [v for v in probe_unaligned.VARIANTS if not v.endswith(("_alone", "_w128"))]:
        # what a variant run changes, restored after it: the span loop's functions (the interpreter reads them per
        # call) and the forced jagged kernel (probe_per_group_kernels.use_jagged_kernel)
        for name in ("_edges_cast", "_edges_amax", "span_amax", "cast_span"):
            monkeypatch.setattr(_span, name, getattr(_span, name))
        monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict(configs.PER_GROUP_KERNEL))
        monkeypatch.setattr(configs.KernelConfigs, "fixed", configs.KernelConfigs.fixed)
        # "dominant": one group spans most of the jagged dim, past the interpreter's one-pass tile, so its two-pass
        # loop (where the candidate fix changes the edges' casts) runs with unaligned edges
        rows += probe_unaligned.run_variant(variant, "cpu", points, ("aligned16", "shifted8", "dominant", "random16"))
        monkeypatch.undo()
        fp8moe.replay.forget()
    assert probe_unaligned.check_rows(rows) == []
    by = {(r["variant"], r["op"], r["layout"]): r["bitwise"] for r in rows}
    for op, _, _ in points:
        assert by["main", op, "aligned16"]
        assert by["main", op, "shifted8"]
        # aligned groups have no edges, so removing the edge code changes nothing there; shifted ones break
        assert by["no_edges", op, "aligned16"]
        assert not by["no_edges", op, "shifted8"]
        assert not by["no_edge_stores", op, "shifted8"]
        assert by["edges_beside_first_tile", op, "dominant"]  # the candidate is exact (check_rows: every layout)
        assert by["deferred_edges", op, "shifted8"]
        assert by["deferred_edges", op, "dominant"]
        assert not by["no_edges", op, "dominant"]
        assert by["main", op, "random16"]
        assert by["no_edges", op, "random16"]  # aligned: no edge code runs
    # a variant that did not take effect is reported
    assert probe_unaligned.check_rows([{**rows[-1], "variant": "no_edges", "unaligned_edges": True, "bitwise": True}])


def _edge_chunk_columns(ends: tuple[int, ...], length: int, width: int) -> set[int]:
    """The columns of every ``width``-column window that holds an unaligned group end, cut at offs[-1] (and
    ``length``)."""
    chunks = {end // width * width for end in ends if end % 16}
    return {c for chunk in chunks for c in range(chunk, chunk + width) if c < min(ends[-1], length)}


@needs_interpreter  # the GPU runs the probe itself; here the edge-chunk kernel's bytes on every named layout
@pytest.mark.parametrize("width", [16, 32, 128])
@pytest.mark.parametrize("jagged", ["rows", "cols"])
def test_edge_chunk_kernel_writes_exactly_the_unaligned_chunks(jagged, width):
    """Codes poisoned (0x7F), the kernel given fp8ref's scales: the codes of every ``width``-column window that holds
    an unaligned group end equal fp8ref's, and every other code, the interiors and the columns past offs[-1]
    included, is still poison. Layouts with empty groups, size-1 groups (many ends in one window) and a tail past
    the end are among them."""
    import torch

    probe_unaligned = pytest.importorskip("probe_unaligned")
    from fp8ref import ops as ref_ops
    from fp8ref.layouts import OFFS_LAYOUTS, make_offs

    length, other, poison = 200, 24, 0x7F
    checked_columns = 0
    for layout in OFFS_LAYOUTS:
        for groups in (1, 5, 19) if width == 16 else (19,):  # the wider windows: the many-group layouts alone
            ends = make_offs(layout, length, groups, torch.Generator().manual_seed(groups))
            offs = torch.tensor(ends, dtype=torch.int32)
            gen = torch.Generator().manual_seed(len(layout) + groups)
            if jagged == "rows":  # per_group_colwise_scales: x (Ktot, N), the kernels' view x.t()
                x = torch.randn((length, other), generator=gen).to(torch.bfloat16)
                q_ref, scales = ref_ops.per_group_colwise_scales(x, offs)
                view, ref_view = x.t(), q_ref.t()
            else:  # per_group_rowwise_scales: x (M, Ktot)
                x = torch.randn((other, length), generator=gen).to(torch.bfloat16)
                q_ref, scales = ref_ops.per_group_rowwise_scales(x, offs)
                view, ref_view = x, q_ref
            q = torch.full(view.shape, poison, dtype=torch.uint8).view(torch.float8_e4m3fn)
            probe_unaligned.launch_edge_chunks(view, offs, q, scales.clone(), width, elements=256)
            written = sorted(_edge_chunk_columns(ends, length, width))
            untouched = [c for c in range(length) if c not in set(written)]
            where = f"{layout} G={groups} ends={ends}"
            assert torch.equal(q[:, written].view(torch.uint8), ref_view[:, written].view(torch.uint8)), where
            assert bool((q[:, untouched].view(torch.uint8) == poison).all()), where
            checked_columns += len(written)
    assert checked_columns > 200  # the layouts do have unaligned ends


@needs_interpreter  # the GPU runs the probe itself; here whether it sees bytes an op never writes
def test_the_repeat_probe_poisons_the_outputs_so_a_code_never_written_differs(monkeypatch):
    """probe_coop_repeat runs the op with every torch.empty/empty_strided result filled with 0x5A bytes: the real op
    matches fp8ref on every run, poisoned; an op that leaves its last expert's codes unwritten differs at exactly
    those of its codes that are not 0x5A in fp8ref's output, and the line says where."""
    import torch

    probe = pytest.importorskip("probe_coop_repeat")
    shape = (2, 32, 64)
    rows = probe.run(shape, 1, "cpu")
    assert [r["tile"] for r in rows] == list(probe.TILES)
    assert all(r["poisoned"] and r["strides_match"] for r in rows)
    assert all(r["codes_wrong"] == r["scales_wrong"] == 0 for r in rows)

    real = fp8moe.colwise_3d_scale_and_cast

    def leaves_the_last_expert_unwritten(x, **kwargs):
        q, scales = real(x, **kwargs)
        out = torch.empty_strided(q.shape, q.stride(), dtype=q.dtype, device=q.device)
        out[:-1] = q[:-1]
        return out, scales

    c = contract("colwise_3d_scale_and_cast")
    xs, offs = bench.make_inputs(c, bench.Point(c.name, shape, layout="row_major"), "cpu")
    q_ref, _ = c.call(c.reference, xs, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False)
    never_written = int((q_ref[-1].view(torch.uint8) != probe.POISON).sum())
    assert never_written > 0.9 * 32 * 64  # the poison is a code fp8ref seldom writes here
    monkeypatch.setattr(fp8moe, "colwise_3d_scale_and_cast", leaves_the_last_expert_unwritten)
    for row in probe.run(shape, 1, "cpu"):
        assert row["poisoned"]
        assert row["codes_wrong"] == never_written
        assert row["first_code"][0] == 1
        assert row["experts"] == 1
        assert row["scales_wrong"] == 0


@needs_interpreter  # the GPU runs the probe's two forms; here its inputs, its "barrier" form and its comparison
def test_the_race_probe_spikes_each_slice_once_and_counts_the_bytes_a_missed_fold_changes():
    """probe_coop_race's input holds exactly one spike per slice along the op's reduced axis (K for colwise 3D, N
    for the transpose); the kernel as it ships ("barrier") matches fp8ref on the interpreter; and the comparison
    counts the codes and scales of an output cast as if the spikes' folds were missed (most codes and every scale
    differ), so a racy run cannot pass for a clean one."""
    import torch

    probe = pytest.importorskip("probe_coop_race")
    for reduced, shape in ((1, (2, 64, 8)), (2, (2, 8, 64))):
        spikes = (probe.spiked_input(shape, reduced, "cpu") == probe.SPIKE).sum(dim=reduced)
        assert spikes.shape == (2, 8)
        assert bool((spikes == 1).all()), spikes
    summary = probe.run_form("barrier", "transpose_atomic", (2, 16, 512), 1, "cpu")
    assert summary["differing_runs"] == 0
    assert summary["runs"] == 1
    x = probe.spiked_input((1, 1024, 8), 1, "cpu")
    expected = contract("colwise_3d_scale_and_cast").reference(x)
    assert probe.differing(fp8moe.colwise_3d_scale_and_cast(x), expected) == (0, 0)
    missed = torch.where(x == probe.SPIKE, torch.full_like(x, 4.0), x)
    codes, scales = probe.differing(fp8moe.colwise_3d_scale_and_cast(missed), expected)
    assert codes > 0.5 * x.numel(), codes
    assert scales == 8, scales


def test_the_race_probe_refuses_a_tile_not_in_colwise_3ds_list_before_any_run(capsys):
    """probe_coop_race --colwise-tiles: every tile is looked up in COOP_COLUMNS' CUDA list before the first process
    starts, so a misspelt tile ends the call at once (naming the list) instead of after the tiles before it ran."""
    probe = pytest.importorskip("probe_coop_race")
    cuda_tiles = fp8moe.configs.COOP_COLUMNS.cuda
    assert fp8moe.configs.describe(cuda_tiles[probe.columns_tile_index("256x64/w4/r128")]) == "256x64/w4/r128"
    with pytest.raises(SystemExit, match=r"no COOP_COLUMNS tile '256x64/w5'.*256x64/w4/r128"):
        probe.main(["--device", "cpu", "--ops", "colwise_3d", "--colwise-tiles", "256x64/w4,256x64/w5"])
    assert capsys.readouterr().out == ""  # no process ran
    with pytest.raises(SystemExit):  # argparse's error: an op the probe does not know
        probe.main(["--device", "cpu", "--ops", "colwise_3d,colwise_4d"])
    assert "unknown ops ['colwise_4d']" in capsys.readouterr().err


def test_the_race_probe_refuses_the_inline_ptx_form_in_the_interpreter_before_any_run(capsys):
    """probe_coop_race's "poll-acquire" form polls with inline PTX, which the interpreter cannot run: asked for on
    the CPU the parent refuses it before the first process starts, and so does a child given it; a form
    benchmarks/arrival_forms.py does not know is refused before anything is replaced."""
    probe = pytest.importorskip("probe_coop_race")
    import arrival_forms

    assert "poll-acquire" in arrival_forms.CUDA_ONLY_FORMS
    assert "poll-acquire" in probe.FORMS
    with pytest.raises(SystemExit):
        probe.main(["--device", "cpu", "--ops", "transpose_atomic", "--forms", "barrier,poll-acquire"])
    captured = capsys.readouterr()
    assert "forms ['poll-acquire'] poll with inline PTX" in captured.err
    assert captured.out == ""  # no process ran
    with pytest.raises(SystemExit, match="inline PTX"):
        probe.run_form("poll-acquire", "transpose_atomic", (2, 16, 512), 1, "cpu")
    with pytest.raises(ValueError, match="unknown arrival form 'polled'"):
        arrival_forms.apply("polled")


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
def test_one_read_gap_variants_all_write_what_they_must_and_the_check_can_fail():
    """Integers in [-6, 6] with a 7 in every (group, column): the ceiling's scale 448 / 7 = 64 makes every scaled
    value an exact e4m3 code (the interpreter's cast is wrong only for inexact ones); fp8moe's variants cast exactly
    anyway. Uneven offs over random values make the fixed-bounds variant wrong: its check must say so."""
    import torch

    probe = pytest.importorskip("probe_one_read_gap")
    ktot, n, group = 96, 16, 32
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-6, 7, (ktot, n), generator=g).float()
    x[::group] = 7.0
    x = x.to(torch.bfloat16)
    offs = probe.uniform_offs(ktot, group, "cpu")
    assert offs.tolist() == [32, 64, 96]
    for variant in probe.VARIANTS:
        _, check = probe.variant_call(variant, x, offs, group, 8, 4)
        assert check(), variant
    uneven = torch.tensor([20, 50, 96], dtype=torch.int32)  # unaligned edges, interiors of at most 32
    x = torch.randn((ktot, n), generator=g).to(torch.bfloat16)
    _, check = probe.variant_call("one_read_fixed_bounds", x, uneven, group, 8, 4)
    assert not check()
    _, check = probe.variant_call("one_read_no_edges", x, uneven, group, 8, 4)
    assert not check()  # no edge code: unaligned edges stay unwritten
    _, check = probe.variant_call("one_read", x, uneven, group, 8, 4)
    assert check()  # bounds from offs: right for any groups whose interior fits the tile
    _, check = probe.variant_call("one_read_edge_loop", x, uneven, group, 8, 4)
    assert check()  # the edge chunks one at a time: the same bytes
    _, ok = probe.checked_call("one_read_edge_loop", x, uneven, group, 8, 4)  # what main times: checked first
    assert ok
    with pytest.raises(SystemExit):
        probe.uniform_offs(100, group, "cpu")


@needs_interpreter
def test_one_read_gap_op_check_sees_outputs_the_op_never_wrote(monkeypatch):
    """The op variant's outputs are fresh allocations: the check poisons them, so a launcher that writes nothing
    fails it even where the allocator hands back the memory of an earlier, correct run."""
    import torch

    probe = pytest.importorskip("probe_one_read_gap")
    x = torch.randn((96, 16), generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    offs = probe.uniform_offs(96, 32, "cpu")
    _, check = probe.variant_call("op", x, offs, 32, 8, 4)
    assert check()
    real = probe.per_group_colwise_scales.launch

    def writes_nothing(x, offs, fp8_dtype, pow2, backend):
        q, s = real(x, offs, fp8_dtype, pow2, backend)
        return torch.empty_strided(q.shape, q.stride(), dtype=q.dtype), torch.empty_like(s)

    monkeypatch.setattr(probe.per_group_colwise_scales, "launch", writes_nothing)
    assert not check()


def test_probe_rows_time_each_variant_against_the_first_and_say_which_failed(monkeypatch, capsys):
    """probe_timing.time_variants: one row per variant that ran, its time over the first variant's, the extra cells
    between variant and time, "NO" for a variant that was not bitwise; status 1 for that and for one that could not
    run (no row), 0 when every variant ran bitwise."""
    import probe_timing

    times = {"base": (10.0, True, (4,)), "half": (5.0, True, (8,)), "wrong": (20.0, False, (2,)), "broken": None}
    monkeypatch.setattr(probe_timing, "check_and_time", lambda label, prepare: (prepare(), times[label.split()[1]])[1])
    prepared = []
    lines: list[str] = []
    args = ("16x8", ["base", "half"], prepared.append, 384_000, 40.0, lambda extra: extra)  # 38.4 GB/s at 10 us
    assert probe_timing.time_variants(lines, *args) == 0
    assert prepared == ["base", "half"]
    assert lines == ["| 16x8 | base | 4 | 10.0 | 96% | 1.00 | yes |", "| 16x8 | half | 8 | 5.0 | 192% | 0.50 | yes |"]
    lines.clear()
    assert probe_timing.time_variants(lines, "16x8", ["base", "wrong", "broken"], str, 384_000, 40.0) == 1
    assert lines == ["| 16x8 | base | 10.0 | 96% | 1.00 | yes |", "| 16x8 | wrong | 20.0 | 48% | 2.00 | NO |"]
    assert "| 16x8 | wrong |" in capsys.readouterr().out


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
def test_pipelined_slice_walks_write_every_tile_once_and_the_check_can_fail():
    """benchmarks/probe_pipelined_slices.py: every default variant, with a grid of fewer programs than tiles so that
    each walk takes several tiles (and one walk a number of tiles the grid does not divide), writes the bytes of
    transpose_ceiling.expected. Integers in [-6, 6] with a 7 in every (group, column) make 448 / 7 = 64 the scale
    and every scaled value an exact e4m3 code (the interpreter's cast is wrong only for inexact ones). Offs that
    disagree with the uniform groups the expectation assumes make the check fail."""
    import torch

    probe = pytest.importorskip("probe_pipelined_slices")
    kt, n, group, block_n = 96, 32, 32, 8
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-6, 7, (kt, n), generator=g).float()
    x[::group] = 7.0
    x = x.to(torch.bfloat16)
    offs = torch.tensor([32, 64, 96], dtype=torch.int32)
    tiles = (n // block_n) * offs.numel()  # 12: walk4 and walk3 divide it, walk2 too; sms=5 leaves remainders
    for sms in (1, 5):
        for variant in probe.VARIANTS:
            _, ok, programs = probe.variant_call(variant, x, offs, group, block_n, 4, sms=sms)
            assert ok, (variant, sms)
            per_sm = None if variant.startswith("one") else int(variant.split("/")[0].removeprefix("walk"))
            assert programs == (tiles if per_sm is None else min(tiles, per_sm * sms)), (variant, sms)
    shifted = torch.tensor([16, 64, 96], dtype=torch.int32)  # a group boundary the expectation does not have
    _, ok, _ = probe.variant_call("walk2/s2/offs", x, shifted, group, block_n, 4, sms=1)
    assert not ok


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
def test_coop_slice_rungs_write_the_bytes_of_their_slice_length(monkeypatch):
    """benchmarks/probe_coop_slices.py: the full cooperative variant, with a ticket or the program id, its amax read
    back by atomics or by loads (/ld), deferred (/defer<D>) or pipelined over a persistent grid (/pipe<P>: its fold
    and cast launches, as the interpreter runs them, grids of 1, 3 and 16 programs for the 8 chunks), writes the bytes
    of transpose_ceiling.expected at the slice's length; the rungs that cast with each chunk's own amax (/arrive,
    /local) those at the chunk's length, and not the slice's (the chunks' amaxes differ here, so a rung that met
    its slice-mates, or a check at the wrong length, fails). Exact inputs: integers in [-6, 6], a 7 in the first
    row of every slice, every second chunk capped at 5."""
    import torch

    probe = pytest.importorskip("probe_coop_slices")
    transpose_ceiling = pytest.importorskip("transpose_ceiling")
    kt, n, slice_len = 64, 32, 32
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-6, 7, (kt, n), generator=g).float()
    x[16:32] = x[16:32].clamp(-5, 5)
    x[48:64] = x[48:64].clamp(-5, 5)
    x[::slice_len] = 7.0
    x = x.to(torch.bfloat16)
    checked = []  # the slice lengths coop_call checks the bytes at
    monkeypatch.setattr(
        probe, "expected", lambda x, k, mode: checked.append(k) or transpose_ceiling.expected(x, k, mode)
    )
    for variant, length in [("coop16x16/w4", 32), ("coop16x16/w4/pid", 32), ("coop16x16/w4/ld", 32),
                            ("coop16x16/w4/arrive", 16), ("coop16x16/w4/local", 16),
                            ("coop16x16/w4/pid/local", 16), ("coop16x16/w4/pad", 32), ("coop16x16/w4/pad/sleep64", 32),
                            ("coop16x16/w4/defer2", 32), ("coop16x16/w4/defer5", 32),
                            ("coop16x16/w4/pipe1", 32), ("coop16x16/w4/pad/pipe3", 32),
                            ("coop16x16/w4/pipe16", 32)]:  # fmt: skip
        checked.clear()
        _, ok = probe.coop_call(variant, x, slice_len)
        assert ok, variant
        assert checked == [length], (variant, checked)
    chunk_bytes, slice_bytes = (transpose_ceiling.expected(x, k, "ptr").view(torch.uint8) for k in (16, slice_len))
    assert not torch.equal(chunk_bytes, slice_bytes)  # so each variant's check told the two meetings apart
    with pytest.raises(ValueError, match="unknown suffix /wait"):
        probe.parse_variant("coop16x16/w4/wait")
    with pytest.raises(ValueError, match="unknown suffix /defer2"):  # deferral is a variant of its own
        probe.parse_variant("coop16x16/w4/pid/defer2")
    assert probe.parse_variant("coop256x64/w4/pid/pad/sleep128") == probe.Variant(
        256, 64, 4, ticket=False, pad=probe.PAD_WORDS, sleep=128
    )
    assert probe.parse_variant("coop256x64/w4/defer64") == probe.Variant(256, 64, 4, defer=64)
    assert probe.parse_variant("coop128x64/w4/pad/pipe3") == probe.Variant(128, 64, 4, pad=probe.PAD_WORDS, pipe=3)
    for wrong in ("coop16x16/w4/arrive/pipe2", "coop16x16/w4/pipe2/sleep64", "coop16x16/w4/pipe2/defer2"):
        with pytest.raises(ValueError, match="unknown suffix"):  # the pipelined kernel has no other rung
            probe.parse_variant(wrong)
    with pytest.raises(ValueError, match="less than the 2 chunks per slice"):
        probe.coop_call("coop16x16/w4/defer1", x, slice_len)


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
def test_ramp_wave_variants_cover_every_tile_once_in_halves_and_wholes(monkeypatch):
    """benchmarks/probe_ramp_waves.py: with the first and last k "SMs" of tiles split into half-width programs
    (k up to half the tiles, where head and tail meet), every variant writes the bytes of transpose_ceiling.expected
    with one program per whole tile and two per split one. Exact inputs as in the other ceiling probes (a 7 in
    every (group, column), integers otherwise). A grid that skips the split tiles' second halves fails the check."""
    import torch

    probe = pytest.importorskip("probe_ramp_waves")
    kt, n, group, block_n = 96, 64, 32, 16
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-6, 7, (kt, n), generator=g).float()
    x[::group] = 7.0
    x = x.to(torch.bfloat16)
    tiles = (kt // group) * (n // block_n)  # 12
    for sms in (1, 2):
        for variant in probe.VARIANTS:
            _, ok, programs = probe.variant_call(variant, x, group, block_n, 4, sms=sms)
            assert ok, (variant, sms)
            head = min(tiles // 2, int(variant.removeprefix("head")) * sms)
            assert programs == tiles + 2 * head, (variant, sms)
    real = probe._ramp_kernel

    class FirstHalvesOnly:  # launches the grid without its last program: one split tile's second half unwritten
        def __getitem__(self, grid):
            return real[(grid[0] - 1,)]

    monkeypatch.setattr(probe, "_ramp_kernel", FirstHalvesOnly())
    _, ok, _ = probe.variant_call("head1", x, group, block_n, 4, sms=1)
    assert not ok


@needs_interpreter  # the GPU runs the script itself, which checks every variant before timing it
@pytest.mark.parametrize("kind", ["colwise_3d", "per_group"])
def test_long_slice_variants_write_what_fp8ref_does_and_the_check_can_fail(kind):
    """Every variant of benchmarks/probe_long_slices.py at two tiles per slab and two strips per expert, so that a
    persistent program walks several slabs (the interpreter's grid is 4 programs per "SM"), both passes loop, and
    pass 2's backward walk and the strides of both output layouts are exercised; a NaN in one slab must give that
    slab's columns fp8ref's NaN scale. A wrong expectation must fail the check."""
    import torch

    probe = pytest.importorskip("probe_long_slices")
    for variant in probe.VARIANTS + probe.SHORT_VARIANTS:  # the descriptor loads (/d) too
        v = probe.parse_variant(variant)
        shape = (3, 2 * v["block_k"], 2 * v["block_n"])
        x = probe.make_input(kind, shape, "cpu", seed=v["block_k"])
        x.view(-1)[shape[2] + 1] = float("nan")  # expert / group 0, token 1, column 1
        expected = probe.reference(kind, x, shape)
        call, outputs = probe.variant_call(variant, kind, x, shape)
        assert probe.check(call, outputs, expected), variant
    q_ref, s_ref = expected
    wrong = q_ref.clone()
    wrong.view(torch.uint8)[(-1,) * wrong.ndim] ^= 1  # one code of the last slab
    assert not probe.check(call, outputs, (wrong, s_ref))
    _, op_check = probe.op_call(kind, x, shape)
    assert op_check(expected)
    assert not op_check((wrong, s_ref))


def test_long_slice_names_and_shapes_are_checked():
    probe = pytest.importorskip("probe_long_slices")
    assert probe.parse_variant("512x16/w8/s4/p1") == {
        "block_k": 512, "block_n": 16, "warps": 8, "stages": 4, "per_sm": 1, "hints": False, "descriptor": False
    }  # fmt: skip
    assert probe.parse_variant("512x16/w8/s4/p1/h")["hints"] is True
    assert probe.parse_variant("128x64/w4/s3/p0/d")["descriptor"] is True
    with pytest.raises(ValueError, match="BLOCK_KxBLOCK_N"):
        probe.parse_variant("512x16/s4/w8/p1")
    with pytest.raises(ValueError, match="descriptor box"):
        probe.parse_variant("512x16/w8/s4/p1/d")  # 512 tokens: past the bulk copy engine's 256
    with pytest.raises(ValueError, match="descriptor box"):
        probe.parse_variant("256x4/w4/s2/p0/d")  # 8 bytes wide
    assert {"long", "short"} == set(probe.POINT_SETS) == set(probe.VARIANT_SETS)
    assert all(probe.parse_point(p)[0] == "per_group" for p in probe.SHORT_POINTS)
    with pytest.raises(ValueError, match="colwise_3d or per_group"):
        probe.parse_point("rowwise:1x2x3")
    assert probe.parse_point("per_group:16x4096x4096") == ("per_group", (16, 4096, 4096))
    x = probe.make_input("colwise_3d", (1, 48, 16), "cpu")
    with pytest.raises(ValueError, match="multiples of the tile"):
        probe.variant_call("32x16/w4/s1/p0", "colwise_3d", x, (1, 48, 16))


def test_long_slice_footprint_is_the_resident_programs_slabs():
    """probe_long_slices.slabs_in_flight: 512x16/w8/s4/p1 at 128 registers and 48 KB of shared memory holds 2
    programs per SM, but its persistent grid launches 132 (one per SM of an H200), each on a 8192 x 16 bf16 slab:
    34.6 MB in flight, inside L2. The plain grid of 256x16/w4 (110 registers, 4 KB) keeps 4 per SM resident: 138 MB."""
    from types import SimpleNamespace

    probe = pytest.importorskip("probe_long_slices")

    def compiled(registers, shared):
        return SimpleNamespace(n_regs=registers, metadata=SimpleNamespace(shared=shared))

    shape = (16, 8192, 5120)
    per_sm, megabytes = probe.slabs_in_flight(compiled(128, 49152), "512x16/w8/s4/p1", shape, 132)
    assert (per_sm, round(megabytes, 1)) == (2, 34.6)
    per_sm, megabytes = probe.slabs_in_flight(compiled(110, 4096), "256x16/w4/s1/p0", shape, 132)
    assert (per_sm, round(megabytes)) == (4, 138)
    # 16 warps at 128 registers take half the register file, so 1 program per SM; with few registers, 98 KB of
    # shared memory per program leaves room for 2
    assert probe.slabs_in_flight(compiled(128, 98304), "1024x16/w16/s4/p1", shape, 132)[0] == 1
    assert probe.slabs_in_flight(compiled(32, 98304), "512x16/w4/s4/p0", shape, 132)[0] == 2


def probe_points(points: str, select: str | None):
    return pytest.importorskip("probe_per_group_kernels").select_points(points, select)


def _prepared_candidate_specs() -> list[str]:
    """benchmarks/prepared_calls.sh's candidate lists, as PREPARED_PRINT prints them."""
    import os
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "prepared_calls.sh"
    env = {**os.environ, "PREPARED_PRINT": "1"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_the_prepared_device_calls_time_each_tile_beside_its_hinted_twins_and_refuse_an_unknown_call():
    """benchmarks/prepared_calls.sh is what the next GPU session runs: its candidate lists (calls 1 and 3, the tiles
    call 2 profiles, then calls 6 and 7) must parse as tune_configs reads them (a typo would cost a device call), hold
    each plain tile once beside exactly its hinted twins (/ev1 and /ev2 in calls 1 and 3, /ev1 in calls 6 and 7), the
    profiled tiles among the timed ones; calls 1, 3, 6 and 7 together must cover every plain tile of the lists;
    call 8 must force each /g tile beside its row-blocks-fastest twin, lists of one length; call 9 must time the
    colwise G64 tile in both orders, each beside its /ev1 twin; an unknown call number must run nothing."""
    import subprocess

    from fp8moe import configs

    lists = [configs.PER_GROUP.name, configs.PER_GROUP_DUAL.name]
    everything = _prepared_candidate_specs()
    specs, profiled, rest, orders, row_order = (
        everything[:2],
        everything[2:4],
        everything[4:7],
        everything[7:9],
        everything[9],
    )
    assert [spec.partition("=")[0] for spec in everything] == [*lists, *lists, *lists, lists[0], *lists, lists[0]]
    row_tiles = set(row_order.partition("=")[2].split(","))  # call 9
    tune_configs.parse_candidates([row_order])
    assert {"64x128/w4/g/o256/l", "64x128/w4/o256/l"} <= row_tiles
    assert all(f"{tile}/ev1" in row_tiles for tile in row_tiles if "/ev" not in tile)
    extra = tune_configs.parse_candidates(specs)
    tune_configs.parse_candidates(rest[:2])
    tune_configs.parse_candidates(rest[2:])
    for spec in orders:  # call 8: a /g tile, then the same tile with row blocks fastest
        grouped, plain = spec.partition("=")[2].split(",")
        assert "/g/" in grouped, spec
        assert plain == grouped.replace("/g/", "/", 1), spec
    order_lists = tune_configs.parse_candidates(orders)
    assert {len(tiles) for tiles in order_lists.values()} == {2}  # profile_kernels --force needs equal lengths
    assert [c.kwargs.get("GROUPS_FASTEST", False) for c in order_lists[lists[1]]] == [True, False]
    for timed, forced in zip(specs, profiled):
        assert set(forced.partition("=")[2].split(",")) <= set(timed.partition("=")[2].split(",")), forced
    for spec in everything[:7]:
        tiles = spec.partition("=")[2].split(",")
        suffixes = ("", "/ev1") if spec in rest else ("", "/ev1", "/ev2")
        assert len(tiles) == len(set(tiles)), spec
        plain = [tile for tile in tiles if "/ev" not in tile]
        assert sorted(tiles) == sorted(f"{tile}{suffix}" for tile in plain for suffix in suffixes), spec
    levels = [config.kwargs.get("L2_HINTS", 0) for config in extra[configs.PER_GROUP.name]]
    assert levels == [0, 1, 2] * (len(levels) // 3)
    timed_plain = {tile for spec in specs + rest for tile in spec.partition("=")[2].split(",") if "/ev" not in tile}
    listed_plain = {configs.describe(c) for k in (configs.PER_GROUP, configs.PER_GROUP_DUAL) for c in k.cuda}
    assert {tile for tile in listed_plain if "/ev" not in tile} <= timed_plain
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "prepared_calls.sh"
    refused = subprocess.run(["bash", str(script), "49"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused
    assert "no prepared call 49: 1 to 48, h200, h200-3d, h200-pdl, h100 or short" in refused.stderr


def _run_prepared_call(tmp_path, call: str, stub_steps: str, gpu: str = "") -> tuple[Path, list[str]]:
    """Run ``prepared_calls.sh <call>`` with a stub gpu_session.sh beside it: the stub appends the line
    ``stub_steps`` expands to (shell, e.g. "$STEPS") to a log, then runs in $OUT the shell of the rest of
    ``stub_steps`` after its first newline (the files the real steps would write), ``gpu`` standing for nvidia-smi's
    list of GPUs. Returns ($OUT, the logged lines: none where the call ran no gpu_session.sh step)."""
    import shutil
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "prepared_calls.sh"
    shutil.copy(script, tmp_path / "prepared_calls.sh")
    logged, _, files = stub_steps.partition("\n")
    (tmp_path / "gpu_session.sh").write_text(
        f'echo "{logged}" >> "{tmp_path}/steps"\ncd "$OUT" && touch env.txt\n{files}\n'
    )
    out = tmp_path / "out"
    out.mkdir()
    # The knobs the calls set come from the script alone, not from this process (the suite may run under
    # FP8MOE_PDL=1, as prepared call 13 runs it).
    knobs = {
        "FP8MOE_PDL",
        "FP8MOE_COLWISE_3D_KERNEL",
        "FP8MOE_TRANSPOSE_ATOMIC_KERNEL",
        "FP8MOE_PER_GROUP_KERNEL",
        "FP8MOE_FUSED_ACTIVATIONS",
        "STEPS",
        "GPU_NAME",
        "TUNE_ARGS",
        "JAGGED_ARGS",
        "HOST_ARGS",
        "BENCH_ARGS",
        "PROFILE_ARGS",
        "TEST_PATHS",
        "PREPARED_PRINT",
    }
    env = {k: v for k, v in os.environ.items() if k not in knobs}
    done = subprocess.run(
        ["bash", str(tmp_path / "prepared_calls.sh"), call], env={**env, "OUT": str(out), "GPU_NAME": gpu},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    logged = tmp_path / "steps"
    return out, logged.read_text().splitlines() if logged.exists() else []  # no gpu_session.sh step: none logged


def test_the_h200_call_benches_every_issue_11_point_under_the_defaults(tmp_path):
    """prepared_calls.sh h200: call 41, the bench of every issue #11 point with torch.compile at each op's first
    point, in its own folder with the bench's .md, .json and .png and env.txt left. Run here with a stub
    gpu_session.sh that records what each call asked for and writes every file any step would."""
    out, steps = _run_prepared_call(
        tmp_path, "h200", '$STEPS ${BENCH_ARGS:-} ${BENCH_TIMEOUT:-}\ncase "$STEPS" in bench) touch bench.md '
        "bench.json bench.png bench.log ;; esac",
    )  # fmt: skip
    assert [" ".join(step.split()) for step in steps] == ["bench --compile first 540"]
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"call41/env.txt", "call41/bench.md", "call41/bench.json", "call41/bench.png"}


def test_the_h200_3d_call_runs_the_waiting_calls_in_order_each_in_its_own_folder_and_keeps_8_files(tmp_path):
    """prepared_calls.sh h200-3d: calls 18 and 19 in that order (the cooperative 3D uses first: a time limit cuts the
    last), each with $OUT its own folder, then only 8 files left (the device brings back no more): call 18's env.txt,
    test log and two benches' .md and .json, call 19's table and error log. Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "h200-3d", '$STEPS $FP8MOE_COLWISE_3D_KERNEL $JAGGED_ARGS\ncase "$STEPS" in tests) touch '
        "pytest.log ;; bench) touch bench.md bench.json bench.png bench.log ;; jagged) touch jagged_coop.md "
        "jagged_coop.err ;; esac",
    )  # fmt: skip
    assert steps == ["tests auto ", "bench rows ", "bench auto ", "jagged  --points G16"]
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {
        "call18/env.txt", "call18/coop3d_tests.log", "call18/bench_off.md", "call18/bench_off.json",
        "call18/bench_on.md", "call18/bench_on.json", "call19/jagged_coop.md", "call19/jagged_coop.err",
    }  # fmt: skip


def test_the_h200_pdl_call_runs_the_dependent_launch_calls_in_order_and_keeps_8_files(tmp_path):
    """prepared_calls.sh h200-pdl: calls 12 and 11 in that order, each in its own folder, 8 files: call 12's env.txt,
    test log and two benches' .md and .json, call 11's two host tables. Stub, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "h200-pdl", '$STEPS $FP8MOE_PDL $HOST_ARGS\ncase "$STEPS" in tests) touch pytest.log ;; '
        "bench) touch bench.md bench.json bench.png bench.log ;; host) touch host_overhead.txt ;; esac",
    )  # fmt: skip
    assert steps == ["tests 1 ", "bench 0 ", "bench 1 ", "host  --split", "host  --points"]
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {
        "call12/env.txt", "call12/pdl_tests.log", "call12/bench_off.md", "call12/bench_off.json",
        "call12/bench_on.md", "call12/bench_on.json", "call11/host_split.txt", "call11/host_points.txt",
    }  # fmt: skip


def test_call_40_benches_the_3d_ops_under_the_rules_then_runs_their_gpu_tests(tmp_path):
    """prepared_calls.sh 40 (ran in session 46): the 3D ops read along N benched with torch.compile at each first
    point, then the GPU tests of the cooperative kernel, the dense ops' cooperative tests and the rules, with only
    the bench's .md and .json, the test log and env.txt left. Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "40", '$STEPS ${BENCH_ARGS:-} ${TEST_PATHS:-}\ncase "$STEPS" in tests) touch pytest.log ;; '
        "bench) touch bench.md bench.json bench.png bench.log ;; esac",
    )  # fmt: skip
    bench_step, tests_step = (" ".join(step.split()) for step in steps)
    assert bench_step == "bench --only 3d --select row_major --compile first"
    assert tests_step == (
        "tests tests/test_kernels_coop_slices.py tests/test_kernels_dense.py tests/test_configs.py -k coop"
    )
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "bench.md", "bench.json", "pytest.log"}


def test_call_44_probes_the_edge_kernels_windows_then_benches_colwise_3d(tmp_path):
    """prepared_calls.sh 44 (ran in session 47): the unaligned-edge probe's main and no-edge-store variants beside the
    edge-chunk kernel at its three windows, deferred and alone (every name one the probe knows), then colwise 3D's
    bench on row-major input without torch.compile: env.txt, the probe's table and log, the bench's .md and .json.
    Stub gpu_session.sh, as above."""
    probe_unaligned = pytest.importorskip("probe_unaligned")
    out, steps = _run_prepared_call(
        tmp_path, "44", '$STEPS ${UNALIGNED_ARGS:-}${BENCH_ARGS:-}\ncase "$STEPS" in bench) touch bench.md '
        "bench.json bench.png bench.log ;; unaligned) touch unaligned.md unaligned.log ;; esac",
    )  # fmt: skip
    unaligned, bench_step = (" ".join(step.split()) for step in steps)
    variants = unaligned.split()[-1].split(",")
    assert unaligned.split()[:2] == ["unaligned", "--variants"]
    assert set(variants) <= set(probe_unaligned.VARIANTS)
    assert {"main", "no_edge_stores"} | set(probe_unaligned.EDGE_CHUNK_WIDTHS) == set(variants)
    assert bench_step == "bench --only colwise_3d --select row_major --compile none"
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "unaligned.md", "unaligned.log", "bench.md", "bench.json"}


def test_call_45_repeats_colwise_3d_poisoned_then_benches_it_keeping_the_log(tmp_path):
    """prepared_calls.sh 45: probe_coop_repeat with three runs of each tile (stubbed here beside a stub
    device_setup.sh), then colwise 3D's bench on row-major input: env.txt, the probe's log and the bench's .md, .json
    and log (the log says which check failed where a row is not bitwise)."""
    (tmp_path / "device_setup.sh").write_text('touch "$OUT/env.txt"\n')
    (tmp_path / "probe_coop_repeat.py").write_text(f"import sys; open({str(tmp_path / 'probe_args')!r}, 'w').write("
                                                   "' '.join(sys.argv[1:]))\n")  # fmt: skip
    out, steps = _run_prepared_call(
        tmp_path, "45", '$STEPS ${BENCH_ARGS:-}\ncase "$STEPS" in bench) touch bench.md bench.json bench.png '
        "bench.log ;; esac",
    )  # fmt: skip
    assert (tmp_path / "probe_args").read_text() == "--runs 3"
    [bench_step] = (" ".join(step.split()) for step in steps)
    assert bench_step == "bench --only colwise_3d --select row_major --compile none"
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "repeat.log", "bench.md", "bench.json", "bench.log"}


def _stub_race_probe(tmp_path) -> Path:
    """A stub device_setup.sh and probe_coop_race.py beside the copied prepared_calls.sh: the probe writes its
    arguments to the returned file."""
    args = tmp_path / "probe_args"
    (tmp_path / "device_setup.sh").write_text('touch "$OUT/env.txt"\n')
    (tmp_path / "probe_coop_race.py").write_text(
        f"import sys; open({str(args)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
    )
    return args


def test_call_46_runs_every_arrival_form_then_the_cooperative_kernels_gpu_tests(tmp_path):
    """prepared_calls.sh 46 (ran in session 49): probe_coop_race with 4000 runs of each form (stubbed), then the GPU
    tests of the cooperative kernels: env.txt, the probe's log and pytest's."""
    args = _stub_race_probe(tmp_path)
    out, steps = _run_prepared_call(
        tmp_path, "46", '$STEPS ${TEST_PATHS:-}\ncase "$STEPS" in tests) touch pytest.log ;; esac'
    )
    assert args.read_text() == "--runs 4000"
    [test_step] = (" ".join(step.split()) for step in steps)
    assert test_step == "tests tests/test_kernels_coop_slices.py tests/test_kernels_dense.py -k coop"
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "pytest.log", "race.log"]


def test_call_48_races_and_times_the_acquiring_polls_beside_the_kernel_as_it_ships(tmp_path):
    """prepared_calls.sh 48: probe_coop_race (stubbed) at its three default uses, the kernel as it ships, the
    poll-acquire form and the acquire form, then the first two again; every form one the probe knows."""
    args = _stub_race_probe(tmp_path)
    out, steps = _run_prepared_call(tmp_path, "48", "$STEPS")
    forms = "barrier,poll-acquire,acquire,barrier,poll-acquire"
    assert args.read_text().split() == ["--forms", forms, "--runs", "2000"]
    import arrival_forms

    assert set(forms.split(",")) <= set(arrival_forms.FORMS)
    assert steps == []
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "race.log"]


def test_the_h100_call_races_session_47s_point_under_both_tiles_then_benches_the_3d_points(tmp_path):
    """prepared_calls.sh h100: call 47, probe_coop_race at (128, 5120, 8192) with colwise 3D's two tiles forced and
    the forms before and after session 48 (stubbed), then the 3D bench on row-major input with its log kept, in its
    own folder."""
    args = _stub_race_probe(tmp_path)
    out, steps = _run_prepared_call(
        tmp_path, "h100", '$STEPS ${BENCH_ARGS:-}\ncase "$STEPS" in bench) touch bench.md bench.json bench.png '
        "bench.log ;; esac",
    )  # fmt: skip
    assert args.read_text().split() == [
        "--ops", "colwise_3d", "--colwise-shape", "128,5120,8192", "--colwise-tiles", "256x64/w4,256x64/w4/r128",
        "--forms", "no-barrier,barrier", "--runs", "1000",
    ]  # fmt: skip
    listed = {fp8moe.configs.describe(cfg) for cfg in fp8moe.configs.COOP_COLUMNS.cuda}
    assert {"256x64/w4", "256x64/w4/r128"} <= listed  # the probe refuses a tile not in the list: a lost device call
    assert [" ".join(step.split()) for step in steps] == ["bench --only colwise_3d --select row_major --compile none"]
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"call47/env.txt", "call47/race.log", "call47/bench.md", "call47/bench.json", "call47/bench.log"}


def test_call_42_forces_colwise_3ds_tile_capped_and_uncapped_between_two_3d_points(tmp_path):
    """prepared_calls.sh 42 (ran in session 47): colwise 3D's cooperative tile capped and uncapped forced at the
    seven --points cap shapes, with env.txt, the table and the log. Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "42", '$STEPS ${TUNE_ARGS:-}\ncase "$STEPS" in tune) touch configs.md tune.log ;; esac'
    )
    [tune] = (" ".join(step.split()) for step in steps)
    assert tune == ("tune --points cap --only colwise_3d --replace --candidates coop_columns=256x64/w4/r128,256x64/w4")
    [tiles] = tune_configs.parse_candidates([tune.split("--candidates ")[1]]).values()
    assert [fp8moe.configs.describe(t) for t in tiles] == [
        fp8moe.configs.describe(t) for t in fp8moe.configs.COOP_COLUMNS_CUDA[1::-1]
    ]  # the capped tile first, then the uncapped one
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "configs.md", "tune.log"}


def test_call_30_profiles_the_3d_ops_under_the_rules_then_colwise_3d_capped_and_uncapped(tmp_path):
    """prepared_calls.sh 30: Nsight Compute of the 3D ops read along N under the defaults, then colwise 3D with its
    tile forced capped and uncapped, the second env.txt removed: 7 files. Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "30", '$STEPS ${PROFILE_ARGS:-}\ncase "$STEPS" in profile) touch ncu.csv ncu.md ncu.err ;; esac',
    )  # fmt: skip
    first, forced = (" ".join(step.split()) for step in steps)
    assert first == "profile --only 3d --select row_major"
    assert forced == "profile --only colwise_3d --select row_major --force coop_columns=256x64/w4/r128,256x64/w4"
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {
        "env.txt", "ncu.csv", "ncu.md", "ncu.err", "forced/ncu.csv", "forced/ncu.md", "forced/ncu.err",
    }  # fmt: skip


def test_call_36s_tiles_parse_and_keep_128_elements_per_thread_for_the_transpose(tmp_path):
    """prepared_calls.sh 36 (ran in session 45): the tiles of colwise 3D's and the atomic transpose's cooperative
    uses forced at their row-major points, each tune's table and log renamed so the second cannot overwrite the
    first; every tile parses, none twice, and the transpose's keep 128 elements per thread as every listed one.
    Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "36", '$STEPS ${TUNE_ARGS:-}\ncase "$STEPS" in tune) touch configs.md tune.log ;; esac',
    )  # fmt: skip
    columns, transpose = (" ".join(step.split()) for step in steps)
    assert columns.startswith("tune --only colwise_3d --select row_major --replace --candidates coop_columns=")
    assert transpose.startswith(
        "tune --only rowwise_3d_transpose_rhs --select method=atomic --replace --candidates coop_transpose="
    )
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "configs_columns.md", "tune_columns.log", "configs_transpose.md", "tune_transpose.log"}
    describe = fp8moe.configs.describe
    [cols] = tune_configs.parse_candidates([columns.split("--candidates ")[1]]).values()
    [trans] = tune_configs.parse_candidates([transpose.split("--candidates ")[1]]).values()
    assert len({describe(c) for c in cols}) == len({describe(c) for c in trans}) == 6
    for tile in (*trans, *fp8moe.configs.COOP_TRANSPOSE_CUDA):  # 128 elements per thread
        assert tile.kwargs["BLOCK_L"] * tile.kwargs["BLOCK_M"] == 128 * 32 * tile.num_warps, describe(tile)


def test_call_38_benches_the_colwise_ops_then_forces_the_jagged_cooperative_tiles_under_coop(tmp_path):
    """prepared_calls.sh 38: the bench of both per-group colwise ops under the defaults (no torch.compile), then
    tune_configs under FP8MOE_PER_GROUP_KERNEL=coop forcing GROUP_COOP tiles at the same ops' points; every tile
    parses, none twice, the first the tile the rule gives a transposing view (so each point's first row is the
    cooperative kernel's default). Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "38", '$STEPS ${FP8MOE_PER_GROUP_KERNEL:-auto} ${BENCH_ARGS:-} ${TUNE_ARGS:-}\ncase "$STEPS" in '
        "tune) touch configs.md tune.log ;; bench) touch bench.md bench.json bench.png bench.log ;; esac",
    )  # fmt: skip
    bench_step, tune_step = (" ".join(step.split()) for step in steps)
    assert bench_step == "bench auto --only per_group_colwise --compile none"
    assert tune_step.startswith("tune coop --only per_group_colwise --replace --candidates group_coop=")
    [tiles] = tune_configs.parse_candidates([tune_step.split("--candidates ")[1]]).values()
    described = [fp8moe.configs.describe(t) for t in tiles]
    assert len(described) == len(set(described)) == 6
    assert described[0] == fp8moe.configs.describe(fp8moe.configs.GROUP_COOP.cuda[0])
    kept = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert kept == {"env.txt", "bench.md", "bench.json", "configs.md", "tune.log"}


def test_call_28s_tiles_parse_and_its_first_is_colwise_3ds_tile_past_one_expert():
    """The tiles prepared call 28 forces on colwise 3D are tiles of its candidate list's form (tune_configs parses
    each), the first the tile the rule gives more than one expert (every E since session 45), so the table's first row
    is the default."""
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "prepared_calls.sh"
    [line] = [line for line in script.read_text().splitlines() if line.startswith("COOP_COLUMNS_WARPS=")]
    tiles = line.partition("=")[2].strip('"')
    [parsed] = tune_configs.parse_candidates([f"coop_columns={tiles}"]).values()
    assert len(parsed) == len(tiles.split(",")) == 5
    assert fp8moe.configs.describe(parsed[0]) == fp8moe.configs.describe(fp8moe.configs.COOP_COLUMNS_CUDA[1])
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0


@pytest.mark.parametrize(
    ("gpu", "step", "files"),
    [
        ("GPU 0: NVIDIA H200 (UUID: GPU-0)", "bench --only per_group --compile none", ["bench.json", "bench.md"]),
        ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)", "", ["race.log"]),
    ],
)  # fmt: skip
def test_the_short_call_benches_the_per_group_ops_on_an_h200_and_races_the_slice_kernel_elsewhere(
    tmp_path, gpu, step, files
):
    """prepared_calls.sh short, for a budget that fits one short call: on an H200 the per-group bench without
    torch.compile (the bench's png and log dropped), on any other GPU call 47's race at 500 runs of each form and
    tile (stubbed beside a stub device_setup.sh). Stub gpu_session.sh, as above, with nvidia-smi's list given."""
    args = _stub_race_probe(tmp_path)
    out, steps = _run_prepared_call(
        tmp_path, "short", '$STEPS ${BENCH_ARGS:-}\ncase "$STEPS" in bench) touch '
        "bench.md bench.json bench.png bench.log ;; esac", gpu=gpu,
    )  # fmt: skip
    assert [" ".join(line.split()) for line in steps] == ([step] if step else [])
    assert sorted(p.name for p in out.iterdir()) == sorted(["env.txt", *files])
    if not step:
        assert args.read_text().split()[-6:] == [
            "--colwise-tiles", "256x64/w4,256x64/w4/r128", "--forms", "no-barrier,barrier", "--runs", "500"
        ]  # fmt: skip


def test_the_host_call_keeps_the_split_and_the_points_each_in_its_own_file(tmp_path):
    """prepared_calls.sh 11 runs gpu_session.sh's host step twice, --split then --points: each run's table must
    survive the other (the step writes one host_overhead.txt). Run with a stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(tmp_path, "11", '$STEPS $HOST_ARGS\necho "$HOST_ARGS" > host_overhead.txt')
    assert steps == ["host --split", "host --points"]
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "host_points.txt", "host_split.txt"]
    assert (out / "host_split.txt").read_text().strip() == "--split"
    assert (out / "host_points.txt").read_text().strip() == "--points"


def test_the_dependent_launch_call_tests_under_it_then_benches_without_and_with_it(tmp_path):
    """prepared_calls.sh 12: the GPU tests with FP8MOE_PDL=1, then the bench with FP8MOE_PDL=0 and =1, each bench's
    table kept under its own name and only the files the device brings back left. Stub gpu_session.sh, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "12", '$STEPS $FP8MOE_PDL\ncase "$STEPS" in tests) echo "$TEST_PATHS" > pytest.log ;; '
        'bench) echo "$FP8MOE_PDL" | tee bench.md > bench.json; touch bench.png bench.log ;; esac',
    )  # fmt: skip
    assert steps == ["tests 1", "bench 0", "bench 1"]
    kept = sorted(p.name for p in out.iterdir())
    assert kept == ["bench_off.json", "bench_off.md", "bench_on.json", "bench_on.md", "env.txt", "pdl_tests.log"]
    assert (out / "bench_off.md").read_text().strip() == "0"
    assert (out / "bench_on.json").read_text().strip() == "1"
    assert "tests/test_dependent_launch_gpu.py" in (out / "pdl_tests.log").read_text()


def test_the_dependent_launch_suite_call_runs_every_test_under_it(tmp_path):
    """prepared_calls.sh 13: the tests step once, with FP8MOE_PDL=1, no TEST_PATHS (the whole suite) and a time limit
    that leaves the call its setup inside the device's 600 s; its log kept as pdl_suite.log. Stub, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "13", '$STEPS $FP8MOE_PDL ${TEST_PATHS:-all} $TEST_TIMEOUT\n'
        'case "$STEPS" in tests) touch pytest.log ;; esac',
    )  # fmt: skip
    assert steps == ["tests 1 all 540"]
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "pdl_suite.log"]


def test_the_cooperative_suite_call_runs_every_test_under_both_cooperative_kernels(tmp_path):
    """prepared_calls.sh 14: the tests step once, FP8MOE_COLWISE_3D_KERNEL=auto and FP8MOE_TRANSPOSE_ATOMIC_KERNEL=
    coop, the whole suite, its log kept as coop_suite.log. Stub, as above."""
    out, steps = _run_prepared_call(
        tmp_path, "14", '$STEPS $FP8MOE_COLWISE_3D_KERNEL $FP8MOE_TRANSPOSE_ATOMIC_KERNEL ${TEST_PATHS:-all} '
        '$TEST_TIMEOUT\ncase "$STEPS" in tests) touch pytest.log ;; esac',
    )  # fmt: skip
    assert steps == ["tests auto coop all 540"]
    assert sorted(p.name for p in out.iterdir()) == ["coop_suite.log", "env.txt"]


def test_the_colwise_3d_call_benches_the_row_kernel_then_auto_on_one_machine(tmp_path):
    """prepared_calls.sh 15: the colwise 3D row-major points benched twice, rows first then auto, torch.compile at
    the first point; each bench's table and JSON kept under its kernel's name, the plot and log dropped. Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "15", '$STEPS $FP8MOE_COLWISE_3D_KERNEL $BENCH_ARGS\n'
        'case "$STEPS" in bench) touch bench.md bench.json bench.png bench.log ;; esac',
    )  # fmt: skip
    args = "--only colwise_3d_scale --select row_major --compile first"
    assert steps == [f"bench rows {args}", f"bench auto {args}"]
    names = ["bench_auto.json", "bench_auto.md", "bench_rows.json", "bench_rows.md", "env.txt"]
    assert sorted(p.name for p in out.iterdir()) == names


def test_the_atomic_transpose_call_benches_both_kernels_then_times_the_cooperative_tiles(tmp_path):
    """prepared_calls.sh 16: the atomic transpose's points benched under the two-launch kernel, then the cooperative
    one, torch.compile at the first point, each bench's table and JSON kept under its kernel's name; then the tune
    step at the same points under the cooperative kernel. Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "16", '$STEPS $FP8MOE_TRANSPOSE_ATOMIC_KERNEL $BENCH_ARGS $TUNE_ARGS\n'
        'case "$STEPS" in bench) touch bench.md bench.json bench.png bench.log ;; tune) touch configs.md tune.log ;; '
        "esac",
    )  # fmt: skip
    args = "--only rowwise_3d_transpose --select atomic"
    assert steps == [f"bench two_launch {args} --compile first ", f"bench coop {args} --compile first ",
                     f"tune coop  {args}"]  # fmt: skip
    names = ["bench_coop.json", "bench_coop.md", "bench_two_launch.json", "bench_two_launch.md", "configs.md",
             "env.txt", "tune.log"]  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == names


def test_the_cooperative_3d_call_tests_both_uses_then_benches_their_points_off_and_on(tmp_path):
    """prepared_calls.sh 18: the cooperative kernel's tests and its dense ops with both 3D uses on, then the 3D
    points read along N benched with both off, then both on, each bench's table and JSON kept under its name.
    Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "18", '$STEPS $FP8MOE_COLWISE_3D_KERNEL $FP8MOE_TRANSPOSE_ATOMIC_KERNEL $BENCH_ARGS\n'
        'case "$STEPS" in tests) echo "$TEST_PATHS" > pytest.log ;; bench) touch bench.md bench.json bench.png '
        "bench.log ;; esac",
    )  # fmt: skip
    args = "--only 3d --select row_major --compile first"
    assert steps == ["tests auto coop ", f"bench rows two_launch {args}", f"bench auto coop {args}"]
    names = ["bench_off.json", "bench_off.md", "bench_on.json", "bench_on.md", "coop3d_tests.log", "env.txt"]
    assert sorted(p.name for p in out.iterdir()) == names
    assert "tests/test_kernels_dense.py -k coop" in (out / "coop3d_tests.log").read_text()


def test_the_cooperative_defaults_call_tests_benches_then_times_more_tiles_of_both_uses(tmp_path):
    """prepared_calls.sh 20: the cooperative kernel's tests and its dense ops under the defaults, the 3D points read
    along N benched, then each use's tiles forced at its own points (the list replaced by the call's tiles, each
    tile of which parses), each tune's table and log kept under the use's name. Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "20", '$STEPS ${FP8MOE_COLWISE_3D_KERNEL:-default} ${TEST_PATHS:-} $BENCH_ARGS $TUNE_ARGS\n'
        'case "$STEPS" in tests) touch pytest.log ;; bench) touch bench.md bench.json bench.png bench.log ;; '
        "tune) touch configs.md tune.log ;; esac",
    )  # fmt: skip
    assert [" ".join(step.split()) for step in steps[:2]] == [
        "tests default tests/test_kernels_coop_slices.py tests/test_kernels_dense.py -k coop",
        "bench default --only 3d --select row_major --compile first",
    ]
    tuned = {}
    for step in steps[2:]:
        words = step.split()
        assert words[:2] == ["tune", "default"], step
        assert len(words) == 9, step
        assert [words[i] for i in (2, 4, 6, 7)] == ["--only", "--select", "--replace", "--candidates"], step
        name, _, tiles = words[-1].partition("=")
        tuned[(words[3], words[5], name)] = tune_configs.parse_candidates([f"{name}={tiles}"])[name]
    assert set(tuned) == {("rowwise_3d_transpose", "atomic", "coop_transpose"),
                          ("colwise_3d", "row_major", "coop_columns")}  # fmt: skip
    assert all(len(tiles) == 7 for tiles in tuned.values())
    names = ["bench.json", "bench.md", "configs_columns.md", "configs_transpose.md", "coop3d_tests.log", "env.txt",
             "tune_columns.log", "tune_transpose.log"]  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == names


def test_the_narrow_columns_call_forces_colwise_tiles_that_keep_128_elements_per_thread(tmp_path):
    """prepared_calls.sh 21: one tune step at colwise 3D's row-major points, the cooperative column list replaced by
    its first tile and 2-warp tiles, each parsing, each at most 128 elements per thread and no more chunks of
    K = 8192 than half an H100's SMs may wait for. Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "21", '$STEPS $TUNE_ARGS\ncase "$STEPS" in tune) touch configs.md tune.log ;; esac'
    )
    [step] = steps
    words = step.split()
    assert words[:6] == ["tune", "--only", "colwise_3d", "--select", "row_major", "--replace"]
    name, _, tiles = words[7].partition("=")
    assert (words[6], name) == ("--candidates", "coop_columns")
    parsed = tune_configs.parse_candidates([words[7]])[name]
    describe = fp8moe.configs.describe
    assert describe(parsed[0]) == describe(fp8moe.configs.COOP_COLUMNS.cuda[0])
    for config in parsed:
        block_l, block_m = config.kwargs["BLOCK_L"], config.kwargs["BLOCK_M"]
        assert block_l * block_m <= 128 * 32 * config.num_warps, tiles
        assert 8192 // block_l <= 132 // 2, tiles
    assert sorted(p.name for p in out.iterdir()) == ["configs.md", "env.txt", "tune.log"]


def test_the_jagged_coop_call_tests_it_then_benches_the_default_kernels_and_it(tmp_path):
    """prepared_calls.sh 17: the cooperative kernel's GPU tests under FP8MOE_PER_GROUP_KERNEL=coop, then the
    per-group bench under "auto" and "coop", each bench's table and JSON kept under its kernel's name. Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "17", '$STEPS $FP8MOE_PER_GROUP_KERNEL $BENCH_ARGS\ncase "$STEPS" in tests) echo "$TEST_PATHS" > '
        "pytest.log ;; bench) touch bench.md bench.json bench.png bench.log ;; esac",
    )  # fmt: skip
    args = "--only per_group --compile none"
    assert steps == ["tests coop ", f"bench auto {args}", f"bench coop {args}"]
    names = ["bench_auto.json", "bench_auto.md", "bench_coop.json", "bench_coop.md", "coop_tests.log", "env.txt"]
    assert sorted(p.name for p in out.iterdir()) == names
    assert "tests/test_kernels_coop_slices.py" in (out / "coop_tests.log").read_text()


@needs_interpreter
def test_prepared_hinted_tiles_are_bitwise_at_small_twins_of_the_size_points(monkeypatch):
    """Every tile of the prepared calls, forced through tune_point in the interpreter at small twins of the size
    points: 600 tokens in groups of 416 and 184 (aligned16_spread128), the first past every one-read tile of the
    lists (256 at most), so both passes of the loop run with their hints; every forced run must be bitwise."""
    from fp8moe import configs

    monkeypatch.setitem(configs.PER_GROUP_KERNEL, "interpreter", "span")
    specs = _prepared_candidate_specs()
    extra = tune_configs.parse_candidates(specs[:2])
    for name, tiles in tune_configs.parse_candidates(specs[7:]).items():  # call 8's tiles, profiled forced
        extra[name] += tiles
    points = [
        bench.Point("per_group_rowwise_scales", (40, 600), 2, "aligned16_spread128"),
        bench.Point("per_group_colwise_scales", (600, 40), 2, "aligned16_spread128"),
        bench.Point("per_group_colwise_scales_dual", (600, 40, 24), 2, "aligned16_spread128"),
    ]
    _, offs = bench.make_inputs(contract(points[0].op), points[0], "cpu")
    assert offs.tolist() == [416, 600]
    with tune_configs.extra_candidates(extra, replace=True):
        rows = [row for point in points for row in tune_configs.tune_point(point, lambda fn, rep: 1.0, device="cpu")]
    timed = [row.split("|")[4].strip() for row in rows]
    assert len(timed) == 2 * len(extra[configs.PER_GROUP.name]) + len(extra[configs.PER_GROUP_DUAL.name])
    hinted = {name: sum(bool(c.kwargs.get("L2_HINTS")) for c in tiles) for name, tiles in extra.items()}
    assert (
        sum("/ev" in name for name in timed) == 2 * hinted[configs.PER_GROUP.name] + hinted[configs.PER_GROUP_DUAL.name]
    )
    assert all(row.endswith("| yes |") for row in rows), rows


def test_order_points_hold_each_random16_point_beside_its_aligned_twin_and_its_sizes_sorted_both_ways():
    """tune_configs --points order (and profile_kernels --points order): every random16 point of issue #11, once per
    layout, same op, shape and groups; the sorted layouts' offs hold random16's sizes largest and smallest first."""
    import torch

    random16 = [p for p in bench.ISSUE11_POINTS if p.offs == "random16"]
    assert random16
    assert [(p.op, p.shape, p.groups, p.offs) for p in tune_configs.ORDER_POINTS] == [
        (p.op, p.shape, p.groups, layout)
        for p in random16
        for layout in ("aligned16", "random16", "random16_desc", "random16_asc")
    ]
    sizes = {}
    for point in tune_configs.ORDER_POINTS[:4]:
        _, offs = bench.make_inputs(contract(point.op), point, "cpu")
        ends = offs.tolist()
        sizes[point.offs] = [b - a for a, b in zip([0, *ends[:-1]], ends)]
    assert sizes["random16_desc"] == sorted(sizes["random16"], reverse=True) != sizes["random16"]
    assert sizes["random16_asc"] == sorted(sizes["random16"])
    assert torch.tensor(sizes["aligned16"]).sum() == torch.tensor(sizes["random16"]).sum()


def test_size_points_hold_each_random16_point_beside_aligned16_its_spreads_and_its_orders():
    """tune_configs --points sizes (timed in session 29, profiled in session 30): every random16 point
    of issue #11 at aligned16, aligned16 with its sizes spread by each of SPREADS, random16 and its two orders; the
    spread layouts move sizes without changing the total, and the widest gives aligned16's sizes random16's spread
    (population standard deviation within 2%)."""
    import statistics

    random16 = [p for p in bench.ISSUE11_POINTS if p.offs == "random16"]
    layouts = ["aligned16", "aligned16_spread64", "aligned16_spread128", "aligned16_spread240", "random16"]
    layouts += ["random16_desc", "random16_asc"]
    assert [(p.op, p.shape, p.groups, p.offs) for p in tune_configs.SIZE_POINTS] == [
        (p.op, p.shape, p.groups, layout) for p in random16 for layout in layouts
    ]
    sizes = {}
    for point in tune_configs.SIZE_POINTS[: len(layouts)]:
        _, offs = bench.make_inputs(contract(point.op), point, "cpu")
        ends = offs.tolist()
        sizes[point.offs] = [b - a for a, b in zip([0, *ends[:-1]], ends)]
    assert len({sum(s) for s in sizes.values()}) == 1
    spread = {name: statistics.pstdev(s) for name, s in sizes.items()}
    assert spread["aligned16"] < spread["aligned16_spread64"] < spread["aligned16_spread128"]
    assert spread["aligned16_spread240"] == pytest.approx(spread["random16"], rel=0.02)
    assert max(sizes["aligned16_spread240"]) <= 512 < max(sizes["random16"])


def test_cap_points_are_the_corners_between_two_colwise_3d_points_read_along_n():
    """tune_configs --points cap: colwise 3D on row-major input at the corners of the box between issue #11's
    (16, 8192, 5120) and (128, 5120, 8192), both included, every other corner one or two factors from them, none
    larger than the larger of the two (the full-size reference must fit the GPU)."""
    points = tune_configs.CAP_POINTS
    assert {(p.op, p.layout, p.groups) for p in points} == {("colwise_3d_scale_and_cast", "row_major", 1)}
    shapes = [p.shape for p in points]
    assert len(set(shapes)) == len(shapes) == 7
    assert {(16, 8192, 5120), (128, 5120, 8192)} <= set(shapes)
    assert all(e in (16, 128) and k in (5120, 8192) and n in (5120, 8192) for e, k, n in shapes)
    assert max(math.prod(s) for s in shapes) == 128 * 5120 * 8192
    assert tune_configs.POINT_SETS["cap"]() == points


def test_wave_points_hold_the_colwise_g64_point_at_column_counts_in_whole_row_blocks():
    """tune_configs --points waves (timed in session 29): per_group_colwise_scales at 16640 tokens in 64 aligned16
    groups, 2048 columns (the issue #11 point) among column counts that are whole 64-row blocks; the grid model gives
    64-row tiles at 3 programs per SM its worst finish at 2048 and its best at 2368 (the H200 ran 2048 and 2304
    columns in proportion to their bytes, h200-s29-call6-waves-configs.md)."""
    import grid_schedule_model as model

    points = tune_configs.WAVE_POINTS
    assert {(p.op, p.shape[0], p.groups, p.offs) for p in points} == {
        ("per_group_colwise_scales", 16640, 64, "aligned16")
    }
    columns = [p.shape[1] for p in points]
    assert 2048 in columns
    assert all(n % 64 == 0 for n in columns)
    sizes = model.group_sizes("aligned16", 16640, 64)
    finish = {n: model.imbalance(sizes, n // 64, 396, "row_blocks_fastest", 32.0) for n in columns}
    assert max(finish, key=finish.get) == 2048
    assert min(finish, key=finish.get) == 2368
    assert [round(finish[n], 3) for n in columns] == [1.114, 1.155, 1.045, 1.026, 1.085]


@needs_interpreter  # the interpreter runs the call that shows which lists launch
def test_profile_kernels_names_the_forced_tile_of_the_kernel_that_ran():
    """profile_kernels --force labels a point with the forced tile of each list whose kernel the call launched: on
    colwise 3D read along N that is the cooperative kernel's list (coop_columns), not the op's own (the row kernel's),
    which the label took before session 44 and so named nothing; a list the call does not launch names nothing."""
    import dataclasses

    import profile_kernels
    import torch
    import tune_configs

    point = next(p for p in bench.ISSUE11_POINTS if p.op == "colwise_3d_scale_and_cast" and p.layout == "row_major")
    point = dataclasses.replace(point, shape=(2, 512, 64))  # chunks within the interpreter's coop limit
    c = contract(point.op)
    xs, offs = bench.make_inputs(c, point, "cpu")
    lists = tune_configs.parse_candidates(["coop_columns=256x64/w4/r128,256x64/w4"])
    with fp8moe.configs.forced_kernel("COLWISE_3D_KERNEL", "coop"):
        for index, tile in enumerate(["256x64/w4/r128", "256x64/w4"]):
            with tune_configs.extra_candidates(lists, replace=True), tune_configs.forced(set(lists), index):

                def call():
                    return c.call(
                        fp8moe.colwise_3d_scale_and_cast,
                        xs,
                        offs,
                        fp8_dtype=torch.float8_e4m3fn,
                        round_scales_to_power_of_2=False,
                    )

                assert profile_kernels.forced_tiles(point, call, lists, index) == [tile]
    others = tune_configs.parse_candidates(["per_group_scales=64x64/w4"])
    assert profile_kernels.forced_tiles(point, call, others, 0) == []
    assert profile_kernels.forced_tiles(point, call, {}, 0) == []


def test_profile_kernels_refuses_an_unknown_point_set_before_touching_a_device():
    import profile_kernels

    with pytest.raises(SystemExit, match="no point set 'nope'; sets: issue11, moe, uniform, order, sizes, waves"):
        profile_kernels.profile(None, None, "nope")


def test_profile_kernels_refuses_forced_lists_of_unequal_length_before_touching_a_device():
    """--force runs the points once per candidate index, candidate i of every named list forced together: lists of
    different lengths would leave a round without a tile, so they stop before any CUDA call."""
    import profile_kernels

    force = ["per_group_scales=64x64/w4/g,64x64/w4/g/ev2", "per_group_colwise_scales_dual=64x64/w4/g"]
    with pytest.raises(SystemExit, match="every list needs as many tiles; got 1, 2"):
        profile_kernels.profile(None, None, "sizes", force)
    with pytest.raises(SystemExit, match="64x64/w4/g/ev3"):
        profile_kernels.profile(None, None, "sizes", ["per_group_scales=64x64/w4/g/ev3"])


def test_grid_schedule_model_finishes_longest_first_earlier_and_balances_equal_groups():
    """benchmarks/grid_schedule_model.py, by hand: sizes (1, 1, 1, 10) on 2 slots finish at 11 in index order (the
    long group starts last) and at 10 longest first, against a balanced 6.5; equal groups filling whole waves
    balance in every order; an unknown order is refused."""
    import grid_schedule_model as model

    for order, finish in (("row_blocks_fastest", 11.0), ("groups_fastest", 11.0), ("largest_first", 10.0)):
        assert model.finish_time(model.program_work([1, 1, 1, 10], 1, order, 0.0), 2) == finish
        assert model.imbalance([1, 1, 1, 10], 1, 2, order, 0.0) == pytest.approx(finish / 6.5)
    for order in model.ORDERS:
        assert model.imbalance([16] * 8, 4, 8, order, 32.0) == 1.0
    with pytest.raises(ValueError, match="unknown order"):
        model.program_work([1], 1, "random", 0.0)


def test_grid_schedule_model_layout_stats_by_hand_and_for_every_layout_it_prints(capsys):
    """grid_schedule_model.layout_stats of sizes (0, 320, 32, 160): largest 320, 320 of 512 indices in groups past
    256, population deviation sqrt(15872) (mean 128), starts 0, 0, 320, 352 (all four on 32, the two zeros on
    128); --stats prints a row per LAYOUTS entry, and the order model runs over the same layouts."""
    import grid_schedule_model as model

    st = model.layout_stats([0, 320, 32, 160])
    assert st == {"largest": 320, "long_share": 320 / 512, "std": pytest.approx(126.0, abs=0.1), "starts_32": 4,
                  "starts_128": 2}  # fmt: skip
    assert model.main(["--stats"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == list(model.LAYOUTS)
    assert rows[0] == "| aligned16 | 272 | 26% | 7 | 32 / 8 of 64 |"
    assert model.main(["--row-blocks", "4", "--slots", "8"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2 + len(model.LAYOUTS)


def test_standing_compares_the_best_listed_tile_with_the_best_timed_one_and_ignores_wrong_bytes(tmp_path):
    """tune_configs --standing: per point, the best bitwise tile fp8moe.configs lists against the best bitwise tile
    the table timed, with % of copy from the table's own bandwidth (ideal bytes: 16640 x 2048 bf16 read, fp8
    written, 64 x 2048 f32 scales = 102,760,448 bytes). Listed means listed for the op's view: a tile the rowwise
    view alone tunes over is no listed tile at a colwise point."""
    from fp8moe import configs

    listed = configs.PER_GROUP_VIEWS["transposing"][-1]  # a tile the colwise op's autotuner times
    other_view = next(n for n in configs.PER_GROUP_VIEWS["along_k"] if n not in configs.PER_GROUP_VIEWS["transposing"])
    table = tmp_path / "t.md"
    table.write_text(
        "Device copy bandwidth (read + write, CUDA graph), same run: 4000 GB/s.\n\n"
        "| op | shape | variant | config | us | x best | | bitwise |\n|---|---|---|---|---:|---:|---|---|\n"
        f"| per_group_colwise_scales | 16640x2048 G=64 | - | {listed} | 40.0 | 1.25 | - | yes |\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | - | 64x128/w4/g/o256 | 32.0 | 1.00 | best | yes |\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | - | 64x64/w4/g/l | 10.0 | 0.31 | - | NO |\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | offs=random | 64x128/w4/g/o256 | 50.0 | 1.00 | best | yes |\n"
        f"| per_group_colwise_scales | 16640x2048 G=64 | offs=random | {other_view} | 60.0 | 1.20 | - | yes |\n"
    )
    head, _, aligned, random = tune_configs.standing(str(table))
    assert head.startswith("| op | shape | variant | listed: best tile")
    assert aligned == (
        f"| per_group_colwise_scales | 16640x2048 G=64 | - | {listed} | 40.0 | 64% | 64x128/w4/g/o256 | 32.0 | 80% "
        "| 0.80 |"
    )  # the wrong-bytes row is never the best, however fast
    assert random.endswith("| - | - | - | 64x128/w4/g/o256 | 50.0 | 51% | - |")  # no listed tile timed there


def test_against_bench_divides_each_bitwise_row_by_the_autotuned_time_at_its_point(tmp_path):
    """tune_configs --against-bench: a forced row over the bench JSON's fp8moe time at the same point (aligned16 is
    the tables' "-"); rows with wrong bytes, points the bench did not run and bench rows that were not bitwise or
    not fp8moe's give no line."""
    import json

    table = tmp_path / "t.md"
    table.write_text(
        "| op | shape | variant | config | us | x best | | bitwise |\n|---|---|---|---|---:|---:|---|---|\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | - | 64x64/w4/g/ev1 | 36.0 | 1.00 | best | yes |\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | - | 64x64/w4/g/l | 10.0 | 0.28 | - | NO |\n"
        "| per_group_colwise_scales | 16640x2048 G=64 | offs=random | 64x64/w4/g | 50.0 | 1.00 | best | yes |\n"
        "| per_group_colwise_scales | 16640x2048 G=128 | - | 64x64/w4/g | 30.0 | 1.00 | best | yes |\n"
    )
    row = {"op": "per_group_colwise_scales", "impl": "fp8moe", "shape": [16640, 2048], "groups": 64}
    rows = [
        {**row, "variant": "offs=aligned16", "us": 40.0, "bitwise_ok": True, "config": "64x64/w4/g"},
        {**row, "variant": "offs=random", "us": 45.0, "bitwise_ok": False, "config": "64x64/w4/g"},
        {**row, "impl": "compile", "variant": "offs=random", "us": 45.0, "bitwise_ok": True, "config": None},
    ]
    bench_json = tmp_path / "b.json"
    bench_json.write_text(json.dumps({"env": {}, "copy_gbps": 4000.0, "rows": rows}))
    head, _, only = tune_configs.against_bench([str(table), str(bench_json)])
    assert head.startswith("| op | shape | variant | tile | us | autotuned us")
    expected = "| per_group_colwise_scales | 16640x2048 G=64 | - | 64x64/w4/g/ev1 | 36.0 | 40.0 | 64x64/w4/g | 0.900 |"
    assert only == expected


def test_layout_ratios_divide_each_tiles_time_by_its_aligned16_time_and_skip_wrong_bytes(tmp_path):
    """tune_configs --layout-ratios: per op, shape and tile, aligned16's time (offs=aligned16, or "-" in older
    tables) and each other layout's time over it. Wrong-bytes rows never count (the spread cell comes from the
    second table), the first table wins where two time the same tile at the same point (aligned16 stays 40 us), and
    a tile timed at aligned16 alone has no row."""
    head = "| op | shape | variant | config | us | x best | | bitwise |\n|---|---|---|---|---:|---:|---|---|\n"
    row = "| per_group_colwise_scales | 16640x2048 G=64 | {} | {} | {} | 1.00 | - | {} |\n"
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text(
        head
        + row.format("offs=aligned16", "64x128/w4", "40.0", "yes")
        + row.format("offs=random16", "64x128/w4", "50.0", "yes")
        + row.format("offs=aligned16_spread64", "64x128/w4", "10.0", "NO")
        + row.format("offs=aligned16", "32x128/w8/t", "30.0", "yes")
    )
    second.write_text(
        head
        + row.format("-", "64x128/w4", "99.0", "yes")
        + row.format("offs=aligned16_spread64", "64x128/w4", "44.0", "yes")
    )
    lines = tune_configs.layout_ratios([str(first), str(second)])
    assert lines[0] == "| op | shape | tile | aligned16 us | random16 / aligned16 | aligned16_spread64 / aligned16 |"
    assert lines[2:] == ["| per_group_colwise_scales | 16640x2048 G=64 | 64x128/w4 | 40.0 | 1.25 | 1.10 |"]
    assert tune_configs.main(["--layout-ratios", str(first)]) == 0


def test_tile_percentages_list_each_tiles_points_with_percent_of_copy_and_skip_wrong_bytes(tmp_path):
    """tune_configs --tile-percentages: per tile, in the table's order, every bitwise point with its % of copy
    (16640 x N bf16 read, fp8 written, 64 x N f32 scales: 50,176 bytes per column, so 2048 columns in 40 us at
    4000 GB/s is 64% and 2304 in 40 us 72%); a wrong-bytes row is left out."""
    table = tmp_path / "t.md"
    row = "| per_group_colwise_scales | 16640x{} G=64 | offs=aligned16 | {} | {} | 1.00 | - | {} |\n"
    table.write_text(
        "Device copy bandwidth (read + write, CUDA graph), same run: 4000 GB/s.\n\n"
        "| op | shape | variant | config | us | x best | | bitwise |\n|---|---|---|---|---:|---:|---|---|\n"
        + row.format(2048, "64x128/w4", "40.0", "yes")
        + row.format(2048, "64x128/w8/g/o256/l", "38.0", "NO")
        + row.format(2304, "64x128/w4", "40.0", "yes")
        + row.format(2304, "64x128/w8/g/o256/l", "45.0", "yes")
    )
    lines = tune_configs.tile_percentages(str(table))
    assert lines[2:] == [
        "| 64x128/w4 | per_group_colwise_scales | 16640x2048 G=64 | offs=aligned16 | 40.0 | 64% |",
        "| 64x128/w4 | per_group_colwise_scales | 16640x2304 G=64 | offs=aligned16 | 40.0 | 72% |",
        "| 64x128/w8/g/o256/l | per_group_colwise_scales | 16640x2304 G=64 | offs=aligned16 | 45.0 | 64% |",
    ]
    assert tune_configs.main(["--tile-percentages", str(table)]) == 0


@needs_interpreter
@pytest.mark.parametrize("op", sorted(tune_configs.CANONICAL_VIEW))
def test_the_standing_tables_view_of_each_per_group_op_is_the_view_its_bench_input_launches_with(op, monkeypatch):
    """tune_configs.CANONICAL_VIEW names the PER_GROUP view the op's row-major bench input takes: the launch's own
    strides, captured here in the interpreter, must say the same (fp8moe.configs.per_group_view)."""
    import torch

    from fp8moe import configs
    from fp8ref.layouts import make_offs

    seen = []
    original = configs.KernelConfigs.fixed

    def fixed(self, backend, args):
        if self.name == configs.PER_GROUP.name:
            seen.append(configs.per_group_view(args))
        return original(self, backend, args)

    monkeypatch.setattr(configs.KernelConfigs, "fixed", fixed)
    monkeypatch.setitem(configs.PER_GROUP_KERNEL, "interpreter", "span")
    c = contract(op)
    shape = (48, 160) if op == "per_group_rowwise_scales" else (160, 48)
    gen = torch.Generator().manual_seed(0)
    (x,) = (torch.randn(s, generator=gen).to(torch.bfloat16) for s in c.input_shapes(shape))
    offs = torch.tensor(make_offs("aligned16", c.jagged_length(shape), 4, gen), dtype=torch.int32)
    c.call(getattr(fp8moe, op), [x], offs)
    assert seen
    assert set(seen) == {tune_configs.CANONICAL_VIEW[op]}


def test_probe_timing_times_a_checked_variant_and_reports_one_that_fails_without_losing_the_others(monkeypatch, capsys):
    """benchmarks/probe_timing.py, which both probes time their variants through: a variant that cannot be built is
    reported on stderr by its label and gives None; one that builds is checked, then timed (the CUDA-graph timer
    stands in here), its extras passed on; the row cells are ideal bytes over the copy bandwidth and the time over
    the baseline's."""
    import triton.testing

    probe_timing = pytest.importorskip("probe_timing")
    timed_calls = []
    monkeypatch.setattr(
        triton.testing, "do_bench_cudagraph", lambda fn, rep, return_mode: timed_calls.append(fn) or 0.05
    )

    def broken():
        raise RuntimeError("no such tile")

    assert probe_timing.check_and_time("16640x2048 op", broken) is None
    assert "16640x2048 op: RuntimeError: no such tile" in capsys.readouterr().err

    def call():
        return None

    assert probe_timing.check_and_time("p v", lambda: (call, False, 3, "34")) == (50.0, False, (3, "34"))
    assert timed_calls == [call]
    # 2e8 bytes in 50 us at 4000 GB/s: 100%; 2.00x a 25 us baseline, "-" before there is one
    assert probe_timing.timing_cells(50.0, 200_000_000, 4000.0, 25.0) == "50.0 | 100% | 2.00"
    assert probe_timing.timing_cells(50.0, 200_000_000, 4000.0, None) == "50.0 | 100% | -"


@needs_interpreter
def test_long_slice_probe_checks_the_op_beside_its_variants():
    """probe_long_slices.checked_call for ``op``: fp8moe's own op at the point, checked against fp8ref; its
    residency cells are not the probe's to report."""
    probe = pytest.importorskip("probe_long_slices")
    shape = (2, 64, 32)
    x = probe.make_input("colwise_3d", shape, "cpu")
    call, ok, per_sm, megabytes = probe.checked_call(
        "op", "colwise_3d", x, shape, probe.reference("colwise_3d", x, shape), 4
    )
    assert ok
    assert (per_sm, megabytes) == ("-", "-")
    assert callable(call)


def test_uniform_points_pair_each_aligned_point_with_a_twin_whose_groups_are_one_16_multiple_size():
    """tune_configs --points uniform: every aligned16 per-group point of issue #11 whose groups differ in size, next
    to a twin with the same op, G and other dims whose groups all have one 16-multiple size (no group one chunk
    wider than the others), so that one run times both."""
    import torch

    from fp8moe.bench import ISSUE11_POINTS
    from fp8ref.layouts import make_offs

    def sizes(layout, length, groups):
        ends = make_offs(layout, length, groups, torch.Generator().manual_seed(0))
        return [e - s for s, e in zip((0, *ends[:-1]), ends)]

    aligned = {(p.op, p.shape, p.groups) for p in ISSUE11_POINTS if p.offs == "aligned16"}
    points = tune_configs.UNIFORM_POINTS
    assert len(points) == 18
    for a, u in zip(points[::2], points[1::2]):
        assert (a.op, a.shape, a.groups) in aligned
        assert (a.offs, u.offs) == ("aligned16", "uniform")
        assert (u.op, u.groups) == (a.op, a.groups)
        jagged = 1 if a.op == "per_group_rowwise_scales" else 0
        assert u.shape[:jagged] + u.shape[jagged + 1 :] == a.shape[:jagged] + a.shape[jagged + 1 :]
        uniform = sizes("uniform", u.shape[jagged], u.groups)
        assert len(set(uniform)) == 1
        assert uniform[0] % 16 == 0
        assert max(sizes("aligned16", a.shape[jagged], a.groups)) == uniform[0] + 16  # the wider groups it leaves out
    assert tune_configs.POINT_SETS["uniform"]() == points


@pytest.mark.parametrize(
    "table", ["h200-s24-call1-ab-main.md", "h100-s23-call1-ab-main.md", "h200-s21-call1-ab-main.md"]
)
def test_each_per_group_views_list_keeps_the_best_listed_tile_of_every_point_it_was_timed_at(table):
    """fp8moe.configs.PER_GROUP_VIEWS leaves a tile out of a view only where it lost by more than 5% everywhere: at
    every per-group point of the committed forced-tile tables, the fastest bitwise tile of the whole list, and every
    listed tile within 5% of it, must stay in that op's view."""
    from fp8moe import configs

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / table
    listed = {configs.describe(c) for c in configs.PER_GROUP.cuda}
    _, rows = tune_configs._table_rows(str(path))
    points = {}
    for op, shape, variant, config, us, bitwise in rows:
        if op in tune_configs.CANONICAL_VIEW and config in listed and bitwise:
            points.setdefault((op, shape, variant), []).append((us, config))
    assert len(points) >= 10, table  # the table's 11 rowwise and colwise points, less any without listed tiles
    for (op, shape, variant), timed in points.items():
        best = min(timed)[0]
        keep = {config for us, config in timed if us <= 1.05 * best}
        view = configs.PER_GROUP_VIEWS[tune_configs.CANONICAL_VIEW[op]]
        assert keep <= set(view), (op, shape, variant, sorted(keep - set(view)))


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"

#: The hinted tiles (L2_HINTS) of the span kernel's lists and the session whose tables added them: session 30 on an
#: H100 (h100-s30-call6-hints-configs.md, the seven size layouts); session 31 on an H200 (its /ev1 twins timed
#: forced at the issue #11 per-group points, h200-s31-call3-hints-points-configs.md, beside the per-group bench the
#: same machine ran under the lists before they joined, h200-s31-call5-bench.json); session 32 on an H100 (the /ev1
#: twins of the other listed tiles at the same points, h100-s32-call{6,7}-rest-*-configs.md, beside
#: h100-s32-call5-bench.json, the bench under session 31's lists).
HINTED_TILES_ADDED_BY = {
    "64x64/w4/g/ev2": "s30",
    "64x64/w4/g/t/ev2": "s30",
    "32x128/w8/g/t/ev1": "s31",
    "64x64/w4/g/ev1": "s31",
    "32x128/w4/g/ev1": "s31",
    "4x1024/w8/g/ev1": "s32",
    "64x128/w4/ev1": "s32",
    "64x128/w4/g/ev1": "s32",
}
#: The forced tables and the autotuned bench of each session that added tiles at the issue #11 points.
HINTED_TILE_EVIDENCE = {
    "s31": (("h200-s31-call3-hints-points-configs.md",), "h200-s31-call5-bench.json"),
    "s32": (
        ("h100-s32-call6-rest-colwise-configs.md", "h100-s32-call7-rest-rowwise-configs.md"),
        "h100-s32-call5-bench.json",
    ),
}


def _forced_rows(*tables: str) -> list[tuple]:
    return [row for table in tables for row in tune_configs._table_rows(str(RESULTS / table))[1]]


def test_each_listed_hinted_tile_was_added_by_a_table_that_shows_it_winning():
    """Every /ev tile of the span kernel's lists names the session that added it, and that session's tables show why:
    session 30's (H100) beat their source at all seven size layouts; each of session 31's (H200) and 32's (H100), at
    one issue #11 point at least, beat every tile listed before it that the same tables timed there and ran 0.98x or
    less the autotuned bench of the same machine under the lists without it (the forced and autotuned times of one
    tile differ by up to 3% between the two runs: colwise random, 32x128/w8/g/t, 51.5 against 53.1 us)."""
    from fp8moe import configs

    listed = [c for k in (configs.PER_GROUP, configs.PER_GROUP_DUAL) for c in k.cuda]
    assert sorted(configs.describe(c) for c in listed if c.kwargs.get("L2_HINTS")) == sorted(HINTED_TILES_ADDED_BY)
    s30_rows = _forced_rows("h100-s30-call6-hints-configs.md")
    for tile, session in HINTED_TILES_ADDED_BY.items():
        source = tile.rpartition("/ev")[0]
        if session == "s30":
            times = {(op, shape, variant, config): us for op, shape, variant, config, us, _ in s30_rows}
            pairs = [(us, times[(*key[:3], source)]) for key, us in times.items() if key[3] == tile]
            assert len(pairs) == 7, (tile, pairs)
            assert all(hinted < plain for hinted, plain in pairs), (tile, pairs)
            continue
        tables, bench = HINTED_TILE_EVIDENCE[session]
        rows = _forced_rows(*tables)
        assert all(bitwise for *_, bitwise in rows), session
        bench_times = tune_configs.bench_times(str(RESULTS / bench))
        later = {t for t, s in HINTED_TILES_ADDED_BY.items() if s >= session}
        listed_before = {configs.describe(c) for c in listed} - later
        times = {(op, shape, variant, config): us for op, shape, variant, config, us, _ in rows}
        points = [key[:3] for key in times if key[3] == tile]
        assert len(points) >= 4, (tile, points)
        wins = []
        for p in points:
            rivals = [us for (*q, config), us in times.items() if tuple(q) == p and config in listed_before]
            assert times[(*p, source)] in rivals, (tile, p)
            if times[(*p, tile)] < min(rivals) and times[(*p, tile)] <= 0.98 * bench_times[p][0]:
                wins.append(p)
        assert wins, tile


@needs_interpreter  # CPU tensors for the helper's part; the GPU runs the whole script (benchmarks/prepared_calls.sh)
def test_scale_division_check_agrees_near_eps_and_one_and_catches_a_wrong_clamp(monkeypatch):
    """benchmarks/scale_division_exhaustive.py: the kernels' f32 scale rule agrees with the reference's f64 division
    on amax patterns around EPS and 1.0 (numpy and the Triton helper), and the check fails a clamp moved to 1e-11."""
    import numpy as np
    import scale_division_exhaustive as check
    import torch
    import triton.language as tl

    eps_bits = int(np.float32(1e-12).view(np.uint32))
    for fp8_max in check._formats_by_max():
        assert check.check_numpy(fp8_max, eps_bits - (1 << 16), eps_bits + (1 << 16)) == 0
        assert check.check_numpy(fp8_max, 0x3F800000 - (1 << 16), 0x3F800000 + (1 << 16)) == 0
    for dtype, pow2 in ((torch.float8_e4m3fn, False), (torch.float8_e5m2, True)):
        assert check.check_device(dtype, pow2, "cpu", eps_bits - 4096, eps_bits + 4096) == 0
    monkeypatch.setattr(check, "EPS_F32_BELOW", tl.constexpr(1e-11))
    assert check.check_numpy(448.0, eps_bits, eps_bits + (1 << 16)) > 0


def test_kernel_probe_takes_a_tune_configs_point_set_and_refuses_an_unknown_one():
    """probe_per_group_kernels --points: its own sets as before (the grouped-GEMM step's points, then issue #11's
    per-group points, the rowwise op last) and any tune_configs point set, e.g. the size spreads (session 30,
    h100-s30-call3-kernels.log); an unknown name stops before touching a device."""
    probe = pytest.importorskip("probe_per_group_kernels")

    everything = probe.select_points("all", None)
    assert everything[: len(probe.MOE_POINTS)] == list(probe.MOE_POINTS)
    rowwise = [p.op == "per_group_rowwise_scales" for p in everything]
    assert rowwise == sorted(rowwise)
    assert any(rowwise)
    sizes = probe.select_points("sizes", None)
    assert {(p.op, p.shape, p.offs) for p in sizes} == {(p.op, p.shape, p.offs) for p in tune_configs.SIZE_POINTS}
    assert [p.op for p in sizes][-7:] == ["per_group_rowwise_scales"] * 7
    spread = probe.select_points("sizes", "spread240")
    assert len(spread) == 3
    assert all(p.offs == "aligned16_spread240" for p in spread)
    with pytest.raises(SystemExit, match="'nope' is none of all, issue11, moe, "):
        probe.select_points("nope", None)


def test_host_overhead_times_issue11_points_the_bench_also_times():
    # host_overhead.py --points sets the host time at these points beside the bench's loop and eager columns:
    # a point the bench does not time would have nothing to be read against.
    host_overhead = pytest.importorskip("host_overhead")
    aligned = {(p.op, tuple(p.shape), p.groups) for p in bench.ISSUE11_POINTS if p.offs == "aligned16"}
    assert host_overhead.LOOP_POINTS
    assert set(host_overhead.LOOP_POINTS) <= aligned


@needs_interpreter
def test_the_coop_jagged_vs_dense_probe_checks_every_variant_against_fp8ref(monkeypatch, capsys):
    """benchmarks/probe_coop_jagged_vs_dense.py end to end in the interpreter at a small twin of its point (GPU timers
    stubbed): the dense row, then each jagged kernel at both layouts, every row bitwise against fp8ref, and the kernel
    setting and the long-group rule put back after."""
    probe = pytest.importorskip("probe_coop_jagged_vs_dense")
    kinds, long_rule = dict(probe.configs.PER_GROUP_KERNEL), probe._coop_slices.may_have_long_groups
    _on_the_interpreter(probe, monkeypatch)
    probe.main(["--shape", "192,24,3"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("dense", "-"),
        *[(kind, layout) for layout in probe.LAYOUTS for kind in ("coop", "coop_fused_only", "auto")],
    ]
    assert all(r[-1].strip() == "yes" for r in rows), rows
    assert kinds == probe.configs.PER_GROUP_KERNEL
    assert probe._coop_slices.may_have_long_groups is long_rule


def test_the_colwise3d_experts_probe_forces_the_tile_a_cuda_launch_takes_and_only_inside_its_block():
    """probe_colwise3d_experts.forced_columns_tile: the config colwise 3D's launcher asks for on CUDA
    (fp8moe.configs.coop_config under COOP_COLUMNS) is the forced tile inside the block, capped or not whatever the
    rule picks at that E, and the rule's outside; ROCm's is unchanged. (Patching the candidate list alone left the
    rule's tile as it was.)"""
    probe = pytest.importorskip("probe_colwise3d_experts")
    from fp8moe.backend import Backend

    cuda = Backend("cuda", "sm_90", (probe.torch.float8_e4m3fn,), exact_encode=False, autotune=True)
    rocm = Backend("rocm", "gfx942", (probe.torch.float8_e4m3fnuz,), exact_encode=False, autotune=False)
    table = probe.configs.COOP_COLUMNS
    for shape in ((1, 8192, 5120), (16, 5120, 8192)):
        default = probe.configs.coop_config(table, cuda, shape)
        caps = {}
        for name, tile in probe.FORCED.items():
            with probe.forced_columns_tile(tile):
                forced = probe.configs.coop_config(table, cuda, shape)
                assert probe.configs.coop_config(table, rocm, shape) is table.rocm
            caps[name] = getattr(forced, "maxnreg", None)
            assert (forced.kwargs, forced.num_warps) == (default.kwargs, default.num_warps)
            assert probe.configs.coop_config(table, cuda, shape) is default
        assert caps == {"experts/uncapped": None, "experts/r128": 128}, shape


@needs_interpreter
def test_the_colwise3d_experts_probe_checks_every_variant_and_puts_the_tile_and_setting_back(monkeypatch, capsys):
    """benchmarks/probe_colwise3d_experts.py end to end in the interpreter at small twins of its points (GPU timers
    stubbed): the dense launch, the row kernel, the jagged launch and its two forced tiles per shape, every row bitwise
    against fp8ref (a wrong byte prints NO), and COOP_COLUMNS and the kernel setting as they were after."""
    probe = pytest.importorskip("probe_colwise3d_experts")
    rule, setting = probe.configs.COOP_COLUMNS.rule, dict(probe.configs.COLWISE_3D_KERNEL)
    _on_the_interpreter(probe, monkeypatch)
    probe.main(["--shapes", "1,96,24;3,80,16"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    variants = ["dense", "rows", "experts", "experts/uncapped", "experts/r128"]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [(s, v) for s in ("1x96x24", "3x80x16") for v in variants]
    assert all(r[-1].strip() == "yes" for r in rows), rows
    assert probe.configs.COOP_COLUMNS.rule is rule
    assert setting == probe.configs.COLWISE_3D_KERNEL
    real = probe.dense_launch
    monkeypatch.setattr(probe, "dense_launch", lambda x: (real(x)[0], real(x)[1].neg()))  # wrong scales
    probe.main(["--shapes", "1,96,24"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [r[-1].strip() for r in rows] == ["NO", "yes", "yes", "yes", "yes"]


def test_the_experts_call_runs_the_cooperative_tests_then_the_probe(tmp_path):
    """prepared_calls.sh 26: the cooperative and dense kernel tests, then benchmarks/probe_colwise3d_experts.py, in
    one gpu_session.sh run. Stub."""
    out, steps = _run_prepared_call(
        tmp_path,
        "26",
        '$STEPS|$TEST_PATHS\ncase "$STEPS" in "tests experts") touch pytest.log colwise3d_experts.md ;; esac',
    )
    assert steps == ["tests experts|tests/test_kernels_coop_slices.py tests/test_kernels_dense.py"]
    assert sorted(p.name for p in out.iterdir()) == ["colwise3d_experts.md", "env.txt", "pytest.log"]


def test_the_copy_call_benches_no_implementation(tmp_path):
    """prepared_calls.sh 27: the bench with neither fp8moe nor torch.compile, so only the size-matched copy rows.
    Stub."""
    out, steps = _run_prepared_call(
        tmp_path,
        "27",
        '$STEPS ${BENCH_ARGS:-}\ncase "$STEPS" in bench) touch bench.md bench.json bench.png bench.log ;; esac',
    )
    assert steps == ["bench --no-fp8moe --compile none"]
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md", "env.txt"]
    args = bench.parse_args(steps[0].split()[1:])
    assert (args.no_fp8moe, args.compile, args.copy_rows, args.kernel) == (True, "none", True, None)


def test_the_long_group_default_calls_run_the_suite_then_the_bench_and_the_long_points(tmp_path):
    """prepared_calls.sh 22: the whole suite under the defaults (no kernel forced), its log kept as suite.log;
    23: the per-group bench with torch.compile at each op's first point, then the jagged probe at the long-group
    points. Stubs."""
    (tmp_path / "22").mkdir()
    (tmp_path / "23").mkdir()
    out, steps = _run_prepared_call(
        tmp_path / "22", "22", '$STEPS ${FP8MOE_PER_GROUP_KERNEL:-default} ${TEST_PATHS:-all}\n'
        'case "$STEPS" in tests) touch pytest.log ;; esac',
    )  # fmt: skip
    assert steps == ["tests default all"]
    assert sorted(p.name for p in out.iterdir()) == ["env.txt", "suite.log"]
    out, steps = _run_prepared_call(
        tmp_path / "23", "23", '$STEPS ${BENCH_ARGS:-} ${JAGGED_ARGS:-}\n'
        'case "$STEPS" in bench) touch bench.md bench.json bench.png bench.log ;; '
        "jagged) touch jagged_coop.md jagged_coop.err ;; esac",
    )  # fmt: skip
    assert [" ".join(step.split()) for step in steps] == [
        "bench --only per_group --compile first",
        "jagged --points long",
    ]
    names = ["bench.json", "bench.md", "env.txt", "jagged_coop.err", "jagged_coop.md"]
    assert sorted(p.name for p in out.iterdir()) == names


def test_the_activation_pair_call_times_the_step_with_the_pairs_off_then_on(tmp_path):
    """prepared_calls.sh 24: the grouped-GEMM step's quantization calls and the step, with FP8MOE_FUSED_ACTIVATIONS
    off, then on, each table kept under the setting's name and the logs dropped (the device brings back 8 files).
    Stub."""
    out, steps = _run_prepared_call(
        tmp_path, "24", "$STEPS ${FP8MOE_FUSED_ACTIVATIONS:-default}\n"
        "touch quant_layouts.md quant_layouts.log grouped_mm.md grouped_mm.log",
    )  # fmt: skip
    assert steps == ["layouts grouped off", "layouts grouped on"]
    names = ["env.txt", "grouped_mm_off.md", "grouped_mm_on.md", "quant_layouts_off.md", "quant_layouts_on.md"]
    assert sorted(p.name for p in out.iterdir()) == names


def test_the_register_cap_call_forces_colwise_3ds_tile_beside_its_twin_capped_for_four_programs_per_sm(tmp_path):
    """prepared_calls.sh 25: one tune step at colwise 3D's row-major points, the cooperative column list replaced by
    its first tile and the same tile capped at a register count that fits four of its programs on an SM. Stub."""
    from residency import blocks_per_sm

    out, steps = _run_prepared_call(
        tmp_path, "25", '$STEPS $TUNE_ARGS\ncase "$STEPS" in tune) touch configs.md tune.log ;; esac'
    )
    [step] = steps
    words = step.split()
    assert words[:6] == ["tune", "--only", "colwise_3d", "--select", "row_major", "--replace"]
    plain, capped = tune_configs.parse_candidates([words[7]])["coop_columns"]
    describe = fp8moe.configs.describe
    assert describe(plain) == describe(fp8moe.configs.COOP_COLUMNS.cuda[0])
    assert describe(capped) == describe(plain) + f"/r{capped.maxnreg}"
    shared = plain.kwargs["BLOCK_L"] * plain.kwargs["BLOCK_M"] * 2  # the layout exchange of a bf16 tile
    assert blocks_per_sm(capped.maxnreg, capped.num_warps, shared) == 4
    assert sorted(p.name for p in out.iterdir()) == ["configs.md", "env.txt", "tune.log"]
