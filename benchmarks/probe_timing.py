"""What the probe scripts share when they time their variants on a GPU: check, then time, one variant at a time, and
the table cells every probe row carries (benchmarks/probe_one_read_gap.py, benchmarks/probe_long_slices.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def check_and_time(label: str, prepare: Callable[[], tuple]) -> tuple[float, bool, tuple] | None:
    """``prepare()`` builds a variant and checks its bytes, returning (call, bitwise, *extra); then ``call`` is timed
    (CUDA-graph median, us). Returns (us, bitwise, extra), or None after printing ``label`` and the error to stderr
    when the variant cannot be built or run: one variant this Triton cannot build must not lose the others."""
    from triton.testing import do_bench_cudagraph

    try:
        call, bitwise, *extra = prepare()
        us = do_bench_cudagraph(call, rep=30, return_mode="median") * 1e3
    except Exception as exc:
        print(f"{label}: {type(exc).__name__}: {exc}"[:400], file=sys.stderr, flush=True)
        return None
    return us, bitwise, tuple(extra)


def timing_cells(us: float, ideal_bytes: int, copy_gbps: float, base_us: float | None) -> str:
    """``us | % of copy | x base`` for a probe row: ideal bytes over the run's copy bandwidth, and the time over the
    row's baseline (the ceiling, the op), ``-`` before the baseline has a time."""
    pct = 100 * ideal_bytes / (us * 1e-6) / 1e9 / copy_gbps
    ratio = f"{us / base_us:.2f}" if base_us else "-"
    return f"{us:.1f} | {pct:.0f}% | {ratio}"
