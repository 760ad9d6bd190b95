"""fp8moe.bench_diff: two bench runs side by side (no GPU)."""

import json
from pathlib import Path

import pytest

from fp8moe import bench_diff

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def _row(op="per_group_colwise_scales", us=40.0, pct=80.0, eager=46.0, ok=True, config="64x64/w4/g", variant="-"):
    return {
        "op": op,
        "impl": "fp8moe",
        "shape": [16640, 2048],
        "groups": 64,
        "variant": variant,
        "layout": "row_major",
        "us": us,
        "eager_us": eager,
        "pct_of_copy_bw": pct,
        "bitwise_ok": ok,
        "config": config,
    }


def _run(env="NVIDIA H200, torch 2.11", rows=()):
    return {"env": env, "copy_gbps": 4274.0, "rows": list(rows)}


def test_rows_match_on_their_point_and_the_ratio_is_of_graph_times():
    old = _run(rows=[_row(us=40.0, config="a"), _row(variant="offs=random16", us=50.0), _row(op="gone")])
    new = _run(
        rows=[_row(variant="offs=random16", us=45.0, pct=73.0, ok=False), _row(us=41.0, config="b"), _row(op="new_op")]
    )
    lines = bench_diff.diff_lines(old, new)
    table = [line for line in lines if line.startswith("| per_group")]
    assert table == [  # NEW's order; a row not bitwise in either run is marked
        "| per_group_colwise_scales | fp8moe | 16640x2048 | 64 | offs=random16 | row_major | 50.0 | 45.0 | 0.900 | 80% "
        "| 73% | 46.0 | 46.0 | NO | 64x64/w4/g | 64x64/w4/g |",
        "| per_group_colwise_scales | fp8moe | 16640x2048 | 64 | - | row_major | 40.0 | 41.0 | 1.025 | 80% | 80% "
        "| 46.0 | 46.0 | yes | a | b |",
    ]
    assert lines[lines.index("only in OLD:") + 1].startswith("- gone fp8moe (16640, 2048) 64")
    assert lines[lines.index("only in NEW:") + 1].startswith("- new_op fp8moe")


def test_a_row_without_graph_time_gets_no_ratio():
    [line] = [x for x in bench_diff.diff_lines(_run(rows=[_row()]), _run(rows=[_row(us=None, pct=None)])) if "| -" in x]
    assert "| 40.0 | - | - | 80% | - |" in line


def test_runs_of_two_device_models_are_refused_unless_asked_and_then_said(tmp_path, capsys):
    h100 = _run(env="NVIDIA H100 80GB HBM3, torch 2.11", rows=[_row()])
    with pytest.raises(ValueError, match="different devices"):
        bench_diff.diff_lines(_run(rows=[_row()]), h100)
    lines = bench_diff.diff_lines(_run(rows=[_row()]), h100, cross_device=True)
    assert any("Different devices" in line for line in lines)
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_run(rows=[_row()])))
    new.write_text(json.dumps(h100))
    assert bench_diff.main([str(old), str(new)]) == 2
    assert "different devices" in capsys.readouterr().err
    out = tmp_path / "diff.md"
    assert bench_diff.main([str(old), str(new), "--cross-device", "--out", str(out)]) == 0
    assert "Different devices" in out.read_text()


def test_session_32s_two_h100_benches_show_the_rowwise_g16_gain():
    """The committed pair (h100-s32-call5-vs-call10.md): 305.4 -> 272.4 us under 4x1024/w8/g/ev1, 17 points in both."""
    old, new = (json.loads((RESULTS / f"h100-s32-call{n}-bench.json").read_text()) for n in (5, 10))
    text = (RESULTS / "h100-s32-call5-vs-call10.md").read_text()
    assert text == "\n".join(bench_diff.diff_lines(old, new)) + "\n"  # the committed file is this tool's output
    assert "| 4096x65536 | 16 | offs=aligned16 | row_major | 305.4 | 272.4 | 0.892 | 87% | 98% |" in text
    assert text.count("| fp8moe |") == 17
    assert "only in" not in text


def test_a_copy_row_is_matched_and_left_without_a_bitwise_verdict():
    """fp8moe.bench's size-matched copy rows carry bitwise_ok None: '-' there, not NO."""
    copy = {**_row(ok=None, config=None), "impl": "copy (same bytes)"}
    lines = bench_diff.diff_lines(_run(rows=[copy, _row()]), _run(rows=[{**copy, "us": 30.0}, _row(ok=False)]))
    rows = [line.split(" | ") for line in lines if line.startswith("| per_group")]
    assert [(r[1], r[8], r[13]) for r in rows] == [("copy (same bytes)", "0.750", "-"), ("fp8moe", "1.000", "NO")]
