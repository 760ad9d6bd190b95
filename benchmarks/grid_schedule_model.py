"""How long the per-group span grid takes to finish in a list-scheduling model, per group order (no GPU needed).

    python benchmarks/grid_schedule_model.py                 # the bench's G = 64 points, every layout
    python benchmarks/grid_schedule_model.py --groups 128 --row-blocks 32 --slots 660
    python benchmarks/grid_schedule_model.py --stats        # the layouts' group sizes: largest, spread, alignment

The span kernel runs one program per (row block, group) (fp8moe.kernels._per_group.jagged_grid); a program's work
grows with its group's size (two passes over it) plus a fixed cost. The model hands programs in grid order to
``slots`` resident program slots (SMs x programs per SM), each to the slot that frees first, and reports the finish
time over the perfectly balanced one (total work / slots) for three orders:

- ``groups_fastest``: the grid's ``/g`` order, consecutive programs on consecutive groups of one row block;
- ``row_blocks_fastest``: the plain order, every row block of group 0, then of group 1, ...;
- ``largest_first``: the plain order with groups taken by size, largest first: longest-processing-time-first list
  scheduling. On the GPU that is the plain order on a layout whose sizes are sorted that way (``random16_desc``,
  ``tune_configs.py --points order``). Sessions 26-27 built it into the kernel (LARGEST_FIRST, every program ranking
  the groups from offs, commit 58e8e85). On the H200 those tiles ran 1.14-1.38x their twins' time wherever G = 64
  groups were ranked, random layouts included, and 2.1-2.4x at G = 128, so it was removed
  (benchmarks/results/h200-s27-summary.md).

It ignores what makes a GPU differ from the model: programs in the tail run faster once fewer share the DRAM
bandwidth, and the order changes which programs share L2 and store rows. So it bounds what an order can recover;
the GPU's forced-tile runs measure it. Session 27 did on an H100 (h100-s27-call5-order-configs.md): with row blocks
fastest, random16's sizes sorted largest first ran 0.98-1.06x their random16 time and smallest first 0.98-1.12x,
where the model predicts 0.85-0.94x and 1.05-1.21x: what random sizes cost those ops is not this imbalance.

The layouts it prints include aligned16's sizes spread apart (fp8ref.layouts SIZE_SPREAD). Its prediction was on
record before they were timed: spreads up to 240 tokens keep every group within 496 tokens, and in the grid's two
orders the model finishes them at 0.94-1.04x aligned16's time at the three G = 64 points, where random16, with a
group of 1040, takes 1.03-1.06x with row blocks fastest and 1.14-1.33x with groups fastest. The H200 in session 29
ran spread240 at 1.01-1.33x aligned16's time on the same tiles (benchmarks/results/h200-s29-summary.md): the cost
grows with the spread, which this model, with programs at a fixed speed, does not see. The same session refuted its
partial-wave reading of colwise 16640x2048 G = 64: time followed the bytes from 1792 to 2560 columns.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import statistics

import torch

from fp8ref.layouts import make_offs

ORDERS = ("groups_fastest", "row_blocks_fastest", "largest_first")


def finish_time(work: list[float], slots: int) -> float:
    """When the last of ``work`` (in issue order) finishes on ``slots`` slots, each program to the first free."""
    free_at = [0.0] * slots
    for w in work:
        heapq.heappush(free_at, heapq.heappop(free_at) + w)
    return max(free_at)


def program_work(sizes: list[int], row_blocks: int, order: str, fixed_cost: float) -> list[float]:
    """Each program's work in issue order: its group's size plus ``fixed_cost``."""
    if order == "groups_fastest":
        groups = [g for _ in range(row_blocks) for g in range(len(sizes))]
    elif order == "row_blocks_fastest":
        groups = [g for g in range(len(sizes)) for _ in range(row_blocks)]
    elif order == "largest_first":
        ranked = sorted(range(len(sizes)), key=lambda g: (-sizes[g], g))
        groups = [g for g in ranked for _ in range(row_blocks)]
    else:
        raise ValueError(f"unknown order {order!r}: one of {ORDERS}")
    return [sizes[g] + fixed_cost for g in groups]


def imbalance(sizes: list[int], row_blocks: int, slots: int, order: str, fixed_cost: float) -> float:
    """Finish time of ``order`` over the balanced finish (total work / slots); 1.0 is a perfect balance."""
    work = program_work(sizes, row_blocks, order, fixed_cost)
    return finish_time(work, slots) / (sum(work) / slots)


def group_sizes(layout: str, length: int, groups: int) -> list[int]:
    """The bench's group sizes for ``layout`` (fp8ref.layouts, fp8moe.bench's seed)."""
    ends = make_offs(layout, length, groups, torch.Generator().manual_seed(0))
    return [end - start for start, end in zip((0, *ends[:-1]), ends)]


#: The layouts the model and --stats print: aligned16, its sizes spread (tune_configs.py --points sizes), random16 and
#: its sizes sorted both ways (--points order), and random (random16's draws, cuts not moved to multiples of 16).
LAYOUTS = (
    "aligned16",
    "aligned16_spread64",
    "aligned16_spread128",
    "aligned16_spread240",
    "random16",
    "random16_desc",
    "random16_asc",
    "random",
)


def layout_stats(sizes: list[int], long_group: int = 256) -> dict[str, float]:
    """What a layout's group sizes hold: the largest group, the share of indices in groups longer than
    ``long_group`` (those take a 256-wide one-read tile's two-pass loop), the population standard deviation, and
    how many groups start on a multiple of 32 and of 128 indices (a 32-byte sector and a 128-byte line of fp8
    codes)."""
    starts = [0, *itertools.accumulate(sizes)][:-1]
    return {
        "largest": max(sizes),
        "long_share": sum(s for s in sizes if s > long_group) / max(sum(sizes), 1),
        "std": statistics.pstdev(sizes),
        "starts_32": sum(s % 32 == 0 for s in starts),
        "starts_128": sum(s % 128 == 0 for s in starts),
    }


#: (name, row blocks, resident slots) of the bench's G = 64 points on an H200 (132 SMs) with the tiles picked there:
#: the dual op's 64x64 tiles over 2048 + 2048 columns (3 programs per SM), colwise 64x128 over 2048 (3), rowwise
#: 32x128 over 5120 rows (5).
BENCH_POINTS = (("dual 16640x2048x2048", 64, 396), ("colwise 16640x2048", 32, 396), ("rowwise 5120x16640", 160, 660))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16640, help="Ktot, the jagged dim")
    parser.add_argument("--groups", type=int, default=64)
    parser.add_argument("--row-blocks", type=int, default=None, help="one point with this many row blocks")
    parser.add_argument("--slots", type=int, default=396, help="resident programs (with --row-blocks)")
    parser.add_argument("--fixed-cost", type=float, default=32.0, help="a program's work apart from its group, tokens")
    parser.add_argument("--stats", action="store_true", help="print each layout's group sizes summarized instead")
    args = parser.parse_args(argv)
    if args.stats:
        print(
            f"| layout ({args.length} indices, G = {args.groups}) | largest group | indices in groups > 256 | size std "
            "| starts on 32 / 128 |"
        )
        print("|---|---:|---:|---:|---:|")
        for layout in LAYOUTS:
            st = layout_stats(group_sizes(layout, args.length, args.groups))
            print(
                f"| {layout} | {st['largest']} | {100 * st['long_share']:.0f}% | {st['std']:.0f} "
                f"| {st['starts_32']} / {st['starts_128']} of {args.groups} |"
            )
        return 0
    points = BENCH_POINTS if args.row_blocks is None else (("point", args.row_blocks, args.slots),)
    print(f"| point | layout | {' | '.join(ORDERS)} |")
    print(f"|---|---|{'---:|' * len(ORDERS)}")
    for name, row_blocks, slots in points:
        for layout in LAYOUTS:
            sizes = group_sizes(layout, args.length, args.groups)
            cells = [f"{imbalance(sizes, row_blocks, slots, o, args.fixed_cost):.3f}" for o in ORDERS]
            print(f"| {name} | {layout} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
