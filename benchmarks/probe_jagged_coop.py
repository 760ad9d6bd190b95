"""The per-group ops at chosen issue #11 points under the default jagged kernels ("auto"), the cooperative slice
kernel ("coop"), with ``--cap`` that kernel's tile capped at that many registers per thread ("coop/r128":
fp8moe.configs.GROUP_COOP_CAP), and with ``--lines`` its counters a line apart ("coop/lines":
fp8moe.configs.GROUP_COOP_COUNT_LINES; session 44 timed the two layouts on two machines only), one process, one
GPU: CUDA-graph time, % of the copy bandwidth measured in the same run, and every output compared with fp8ref's. For
the jagged cooperative kernel's long-group pass (session 36), which lets the 4096-token groups of 65536 x 4096 G = 16
take the 256 x 64 tile, and the cap (session 43), which took colwise 3D's use of the same kernel to 0.93-0.97x its
time past one expert on an H100.

    python benchmarks/probe_jagged_coop.py --points G16 > "$OUT/jagged-coop-g16.md"   # then under benchmarks/results/
"""

from __future__ import annotations

import argparse

import torch

import fp8moe  # before triton
from fp8moe import configs, replay
from fp8moe.bench import ISSUE11_POINTS, _time, copy_bandwidth_gbps, ideal_bytes, make_inputs, same_outputs
from fp8ref.contracts import contract

#: Where the inputs live (the CPU test of this script runs it through the interpreter).
DEVICE = "cuda"
#: The call's arguments: e4m3fn, no pow2 rule (the bench's).
ARGS = {"fp8_dtype": torch.float8_e4m3fn, "round_scales_to_power_of_2": False}


def points(which: str):
    """``G16``: the colwise 65536 x 4096 G = 16 point; ``colwise``: every per-group colwise point of issue #11;
    ``long``: the grouped-GEMM step's long-group points (benchmarks/probe_per_group_kernels.py's MOE_POINTS: the dual
    op at 8-16 groups of 2048 positions on average, the colwise op at 8 of 8192), then G16."""
    colwise = [p for p in ISSUE11_POINTS if p.op == "per_group_colwise_scales"]
    g16 = [p for p in colwise if p.groups == 16]
    if which == "long":
        from probe_per_group_kernels import MOE_POINTS

        return [*MOE_POINTS, *g16]
    return g16 if which == "G16" else colwise


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", choices=("G16", "colwise", "long"), default="G16")
    parser.add_argument("--cap", type=int, default=None, help="also the coop tile capped at this many registers")
    parser.add_argument("--lines", action="store_true", help="also the coop kernel with its counters a line apart")
    args = parser.parse_args(argv)
    variants = [("auto", None, False), ("coop", None, False)]
    variants += [(f"coop/r{args.cap}", args.cap, False)] if args.cap else []
    variants += [("coop/lines", None, True)] if args.lines else []
    copy = copy_bandwidth_gbps()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {copy:.0f} GB/s\n")
    print("| op | shape | G | offs | kernel | us (graph) | % of copy | bitwise |")
    print("|---|---|---:|---|---|---:|---:|---|")
    settings = dict(configs.PER_GROUP_KERNEL), configs.GROUP_COOP_CAP, configs.GROUP_COOP_COUNT_LINES
    try:
        _rows(points(args.points), variants, copy)
    finally:
        configs.PER_GROUP_KERNEL, configs.GROUP_COOP_CAP, configs.GROUP_COOP_COUNT_LINES = settings
        replay.forget()


def _rows(chosen, variants, copy: float) -> None:
    """One table row per point and variant: (name, cap, lines) under PER_GROUP_KERNEL = the name's kernel."""
    for point in chosen:
        c = contract(point.op)
        xs, offs = make_inputs(c, point, DEVICE)
        expected = c.call(c.reference, tuple(x.cpu() for x in xs), offs.cpu(), **ARGS)
        for name, cap, lines in variants:
            configs.PER_GROUP_KERNEL = dict.fromkeys(configs.PER_GROUP_KERNEL, name.partition("/")[0])
            configs.GROUP_COOP_CAP = cap
            configs.GROUP_COOP_COUNT_LINES = lines
            replay.forget()
            kernel = getattr(fp8moe, point.op)
            out = c.call(kernel, xs, offs, **ARGS)
            ok = same_outputs(tuple(t.cpu() for t in out), expected)
            us, _ = _time(lambda c=c, kernel=kernel, xs=xs, offs=offs: c.call(kernel, xs, offs, **ARGS))
            pct = 100 * ideal_bytes(c, point.shape, point.groups) / (us * 1e-6) / 1e9 / copy
            shape = "x".join(map(str, point.shape))
            print(f"| {point.op} | {shape} | {point.groups} | {point.offs} | {name} | {us:.1f} | {pct:.0f}% | "
                  f"{'yes' if ok else 'NO'} |")  # fmt: skip


if __name__ == "__main__":
    main()
