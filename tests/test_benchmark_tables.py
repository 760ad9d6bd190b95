"""The benchmark scripts' table logic, which runs only on a GPU otherwise: row formatting and the config summary.

benchmarks/ is not a package; the scripts are imported from their directory. Importing them imports fp8moe first
(they require it), so the interpreter switch on a CPU machine still happens before triton.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import fp8moe  # noqa: F401  (before the scripts import triton)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
bench_kernels = pytest.importorskip("bench_kernels")
tune_configs = pytest.importorskip("tune_configs")


def _row(**overrides) -> dict:
    row = {
        "op": "rowwise_2d_scale_and_cast",
        "shape": "4x8",
        "variant": "",
        "us": 200.0,
        "graph_us": 100.0,
        "gbs": 1000.0,
        "exact": True,
        "compile_us": None,
    }
    return {**row, **overrides}


def test_bench_row_reports_graph_bandwidth_from_graph_time():
    # eager 200 us at 1000 GB/s -> the same bytes in the 100 us graph replay are 2000 GB/s = 50% of 4000.
    assert bench_kernels.format_row(_row(), 4000.0) == (
        "| rowwise_2d_scale_and_cast | 4x8 | - | 200 | 100 | 1000 | 25% | 50% | - | - | yes |"
    )


def test_bench_row_without_graph_time_and_with_compile_baseline():
    line = bench_kernels.format_row(_row(graph_us=None, compile_us=300.0, exact=False), 4000.0)
    assert line.endswith("| 200 | - | 1000 | 25% | - | 300 | 1.50x | NO |")


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
    assert "| per_group_scales | 4x1024/w8 | 1 | 2 | 2 | 1.00 | 1.04 |" in rows
    assert "| per_group_scales | 16x256/w8 | 1 | 1 | 2 | 1.00 | 1.10 |" in rows
    assert "| rowwise_3d_transpose_rhs_amax | 16x512/w4 | 1 | 1 | 1 | 1.00 | 1.00 |" in rows


def test_bench_bitwise_check_needs_same_count_strides_and_bits():
    import torch

    q = torch.zeros(2, 3, dtype=torch.float32)
    assert bench_kernels.outputs_identical((q,), (q.clone(),))
    assert not bench_kernels.outputs_identical((q,), (q, q))  # an output missing
    assert not bench_kernels.outputs_identical((q.t().contiguous().t(),), (q,))  # same values, other strides
    assert not bench_kernels.outputs_identical((q + 1,), (q,))
