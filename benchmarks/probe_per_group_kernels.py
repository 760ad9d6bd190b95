"""The jagged kernels side by side: each per-group point of issue #11 (and the grouped-GEMM step's long-group
points) timed with the span kernel (autotuned) and the chunked kernel under each candidate config, in one process,
CUDA-graph replay; every output checked against the span kernel's bytes first.

    python benchmarks/probe_per_group_kernels.py [--configs 0,2,5] [--points all|issue11|moe|<tune_configs set>]

``--points sizes`` (or another point set of benchmarks/tune_configs.py) times them at that set's points, e.g. the
three G = 64 random16 points at aligned16, its sizes spread apart, random16 and its orders: the chunked kernel
bounds every program's tokens (CHUNK_TILES x BLOCK_K), so where the span kernel's time grows with the size spread
and the chunked kernel's does not, a program's group size is what costs.
"""

from __future__ import annotations

import argparse

import torch

import fp8moe
from fp8moe import configs, replay
from fp8moe.bench import ISSUE11_POINTS, Point, copy_bandwidth_gbps, ideal_bytes, make_inputs, same_outputs
from fp8ref.contracts import contract

E4 = torch.float8_e4m3fn
#: The grad_B backward of the grouped-GEMM step at its three 8-16 expert shapes: the dual op on (grad_out, A) with
#: few, long, uneven groups, and the colwise op alone on A.
MOE_POINTS = (
    Point("per_group_colwise_scales_dual", (16384, 2048, 7168), 8, "dominant"),
    Point("per_group_colwise_scales_dual", (32768, 8192, 5120), 16, "random"),
    Point("per_group_colwise_scales_dual", (16384, 2048, 7168), 8, "aligned16"),
    Point("per_group_colwise_scales", (65536, 4096), 8, "aligned16"),
)


def use_jagged_kernel(kind: str, config=None) -> None:
    """Make the jagged ops launch ``kind`` (a kind of fp8moe.configs.PER_GROUP_KERNEL) and, with ``config``, the
    chunked kernel launch under it whatever the view (benchmarks/profile_kernels.py uses this too)."""
    configs.KernelConfigs.fixed = _fixed
    configs.PER_GROUP_KERNEL.update(dict.fromkeys(configs.PER_GROUP_KERNEL, kind))
    _FORCED["config"] = config
    replay.forget()


_FORCED: dict = {"config": None}
_ORIGINAL_FIXED = configs.KernelConfigs.fixed


def _fixed(self, backend, args):
    if self is configs.GROUP_CHUNKS and _FORCED["config"] is not None:
        return _FORCED["config"]
    return _ORIGINAL_FIXED(self, backend, args)


def _label(point: Point) -> str:
    return f"{point.op} {point.shape} G={point.groups} {point.offs}"


def _name(cfg) -> str:
    """A chunked config as <tile>/w<warps>/c<tiles per chunk>/p<programs per SM>, /l2 with L2 eviction priorities."""
    hints = "/l2" if cfg.kwargs.get("L2_HINTS") else ""
    return f"{configs.describe(cfg)}/c{cfg.kwargs['CHUNK_TILES']}/p{cfg.kwargs['PROGRAMS_PER_SM']}{hints}"


def select_points(points: str, select: str | None) -> list[Point]:
    """The points of ``points``: ``all`` (the grouped-GEMM step's long-group points, then issue #11's per-group
    points), ``issue11``, ``moe``, or a point set of benchmarks/tune_configs.py (POINT_SETS); the transposing ops
    first, so that a time limit cuts the rowwise op last. ``select``: semicolon-separated substrings of the label."""
    from tune_configs import POINT_SETS

    if points in ("all", "issue11", "moe"):
        chosen = list(MOE_POINTS) if points != "issue11" else []
        if points != "moe":
            chosen += [p for p in ISSUE11_POINTS if p.op.startswith("per_group")]
    elif points in POINT_SETS:
        chosen = [p for p in POINT_SETS[points]() if p.op.startswith("per_group")]
    else:
        raise SystemExit(f"--points: {points!r} is none of all, issue11, moe, {', '.join(POINT_SETS)}")
    chosen.sort(key=lambda p: p.op == "per_group_rowwise_scales")
    if select:
        chosen = [p for p in chosen if any(k in _label(p) for k in select.split(";"))]
    return chosen


def main(argv: list[str] | None = None) -> None:
    from triton.testing import do_bench_cudagraph

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="all", help="indices into fp8moe.configs.GROUP_CHUNKS.cuda, or all")
    parser.add_argument("--points", default="all", help="all, issue11, moe, or a point set of tune_configs.py")
    parser.add_argument("--select", default=None, help="semicolon-separated substrings of '<op> <shape> G=<g> <offs>'")
    args = parser.parse_args(argv)
    points = select_points(args.points, args.select)
    candidates = list(configs.GROUP_CHUNKS.cuda)
    if args.configs != "all":
        candidates = [candidates[int(i)] for i in args.configs.split(",")]
    copy = copy_bandwidth_gbps()
    print(f"copy bandwidth {copy:.0f} GB/s; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for point in points:
        c = contract(point.op)
        xs, offs = make_inputs(c, point)
        kernel = getattr(fp8moe, point.op)
        kw = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}
        ideal = ideal_bytes(c, point.shape, point.groups)
        row = []
        expected = None
        # transposing views (the colwise ops) take tiles tall in R, the rowwise op tiles wide in K
        fits = [cfg for cfg in candidates if (cfg.kwargs["BLOCK_R"] >= 16) == (point.op != "per_group_rowwise_scales")]
        runs = [("span", "span", None)] + [("chunks " + _name(cfg), "chunks", cfg) for cfg in fits]
        for label, kind, config in runs:
            use_jagged_kernel(kind, config)
            try:
                out = c.call(kernel, xs, offs, **kw)
                torch.cuda.synchronize()
                ok = True if expected is None else same_outputs(out, expected)
                expected = expected if expected is not None else out
                us = do_bench_cudagraph(lambda c=c, k=kernel, x=xs, o=offs, a=kw: c.call(k, x, o, **a), rep=30) * 1e3
            except Exception as exc:  # report and go on: one config must not hide the others
                row.append(f"{label} ERROR {type(exc).__name__}: {str(exc)[:120]}")
                continue
            pct = ideal / (us * 1e-6) / 1e9 / copy * 100
            row.append(f"{label} {us:.1f} us {pct:.0f}%{'' if ok else ' WRONG'}")
        print(f"{_label(point)}:\n  " + "\n  ".join(row), flush=True)
    use_jagged_kernel("span")


if __name__ == "__main__":
    main()
