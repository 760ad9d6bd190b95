"""Hardware counters of the fp8moe kernels at the benchmark points, for Nsight Compute (issue #11 item 4).

    ncu --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy \\
        --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats --csv --page details \\
        python benchmarks/profile_kernels.py --select per_group > ncu.csv
    python benchmarks/profile_kernels.py --summarize ncu.csv > ncu.md

``--jagged-kernel span|chunks|chunks:I`` profiles the per-group ops on one jagged kernel (``chunks:I``: under
fp8moe.configs.GROUP_CHUNKS.cuda[I]). ``--activations M,K,G;...`` / ``--weights E,K,N;...`` profile a fused pair
beside its two ops instead of the bench points (benchmarks/results/h200-s14-call1-ncu.md is one such run).

Per point (fp8moe.bench.ISSUE11_POINTS, filtered like the bench), the op is called until the autotuner has chosen
its config, then called once more between cudaProfilerStart and cudaProfilerStop: only that call's kernels are
profiled, after a one-element fill that marks where the point's launches begin. The points are printed as
``# point`` lines, which ``--summarize`` matches to the launches between markers.
``--summarize`` turns ncu's CSV into one Markdown row per kernel launch: duration, DRAM bytes read and written
against the op's ideal bytes, L2 hit rate, achieved and theoretical occupancy, registers per thread, grid size and
the top warp stall reasons.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import sys

#: ncu metric name -> column of the summary (units as ncu reports them, normalised in _value).
SUMMARY_METRICS = {
    "Duration": "us",
    "DRAM Throughput": "dram %peak",
    "L2 Hit Rate": "L2 hit %",
    "Achieved Occupancy": "achieved occ %",
    "Theoretical Occupancy": "theor. occ %",
    "Registers Per Thread": "regs",
    "Grid Size": "grid",
    "Block Limit Registers": "blocks/SM (regs)",
}


def use_jagged_kernel(kernel: str) -> None:
    """Make the jagged ops launch ``kernel``: a kind of fp8moe.configs.PER_GROUP_KERNEL, or ``chunks:I``, the
    chunked kernel under fp8moe.configs.GROUP_CHUNKS.cuda[I] whatever the view."""
    from probe_per_group_kernels import use_jagged_kernel as use

    from fp8moe import configs

    kind, _, index = kernel.partition(":")
    if kind not in configs.PER_GROUP_KERNELS:
        raise SystemExit(f"--jagged-kernel: {kind!r} is none of {configs.PER_GROUP_KERNELS}")
    use(kind, configs.GROUP_CHUNKS.cuda[int(index)] if index else None)


def profile(select: str | None, only: str | None, points: str = "issue11", force: list[str] | None = None) -> None:
    """Call each selected point's op until tuned, then once under the profiler. ``points`` names a point set of
    benchmarks/tune_configs.py (POINT_SETS: the bench's, or e.g. ``order``, the random16 points beside their
    aligned twins and sorted sizes). The autotune key cannot see offs, so the points of one shape run the tile
    tuned at the first of them.

    ``force``: candidate lists as tune_configs.py --candidates names them (``per_group_scales=64x64/w4/g,...``),
    all of one length n. Then the points run n times, the i-th time with candidate i of each named list forced
    instead of autotuned (tune_configs.forced), and each point's variant names the tile it ran.
    """
    import contextlib

    import torch
    from tune_configs import POINT_SETS, extra_candidates, forced, parse_candidates

    import fp8moe
    from fp8moe.bench import ideal_bytes, make_inputs
    from fp8ref.contracts import contract

    if points not in POINT_SETS:
        raise SystemExit(f"--points: no point set {points!r}; sets: {', '.join(POINT_SETS)}")
    lists = parse_candidates(force) if force else {}
    rounds = {len(tiles) for tiles in lists.values()} or {1}
    if len(rounds) > 1:
        raise SystemExit(f"--force: every list needs as many tiles; got {', '.join(map(str, sorted(rounds)))}")
    marker = torch.zeros(1, dtype=torch.float64, device="cuda")  # FillFunctor<double>: no kernel here fills f64
    for i in range(rounds.pop()):
        policy = forced(set(lists), i) if lists else contextlib.nullcontext()
        with extra_candidates(lists, replace=True), policy:
            for point in POINT_SETS[points]():
                shape = "x".join(map(str, point.shape))
                label = f"{point.op} {shape} G={point.groups} {point.variant} {point.layout}"
                if (only and only not in point.op) or (select and not any(s in label for s in select.split(","))):
                    continue
                c = contract(point.op)
                xs, offs = make_inputs(c, point, "cuda")
                kernel = getattr(fp8moe, point.op)
                args = {"fp8_dtype": torch.float8_e4m3fn, "round_scales_to_power_of_2": False, **point.kwargs}

                def call(c=c, kernel=kernel, xs=xs, offs=offs, args=args):
                    return c.call(kernel, xs, offs, **args)

                variant = " ".join([point.variant, *forced_tiles(point, call, lists, i)])
                _profiled_call(
                    marker,
                    f"{point.op} | {shape} G={point.groups} | {variant} | {point.layout}",
                    ideal_bytes(c, point.shape, point.groups),
                    call,
                )


def forced_tiles(point, call, lists: dict, index: int) -> list[str]:
    """The tiles ``lists`` force (candidate ``index`` of each) on the kernels one ``call`` at ``point`` launches, as
    fp8moe.configs.describe names them: colwise 3D's list, say, is the row kernel's or the cooperative kernel's by
    the input, so the op's own list alone can miss it (tune_configs.lists_that_ran runs the call to see). None without
    forced lists."""
    from tune_configs import lists_that_ran

    from fp8moe.configs import describe

    if not lists:
        return []
    return [describe(lists[k.name][index]) for k in lists_that_ran(point, call) if k.name in lists]


def _profiled_call(marker, label: str, ideal: int, call) -> None:
    """Tune ``call``, then run it once between cudaProfilerStart and Stop after the marker fill."""
    import torch

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    print(f"# point | {label} | {ideal}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    marker.fill_(1)
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def profile_pairs(activations: str | None, weights: str | None) -> None:
    """Each fused pair beside its two ops, every launch profiled; ideal bytes: x read once, each fp8 output and its
    scales written once.

    Args:
        activations: "M,K,G;...": rowwise_2d_scale_and_cast, per_group_colwise_scales and the activation pair
            (rowwise_and_per_group_colwise) of an (M, K) bf16 x with routing-like groups.
        weights: "E,K,N;...": colwise_3d_scale_and_cast, rowwise_3d_transpose_rhs and the weight pair
            (colwise_3d_and_transpose_rhs) of a row-major (E, K, N) bf16 x.
    """
    import torch

    import fp8moe
    from fp8ref.grouped_mm import skewed_offs

    marker = torch.zeros(1, dtype=torch.float64, device="cuda")
    points = []  # (label, ideal bytes, op, its positional arguments)
    for text in filter(None, (activations or "").split(";")):
        m, k, g = (int(v) for v in text.split(","))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        offs = skewed_offs(m, g, seed=1, device="cuda")
        rows, cols = m * k * 3 + 4 * m, m * k * 3 + 4 * g * k
        ops = {"rowwise_2d_scale_and_cast": rows, "per_group_colwise_scales": cols}
        ops["rowwise_and_per_group_colwise"] = rows + cols - 2 * m * k  # x read once for both
        for op, ideal in ops.items():
            args = (x,) if op == "rowwise_2d_scale_and_cast" else (x, offs)
            points.append((f"{op} | {m}x{k} G={g}", ideal, getattr(fp8moe, op), args))
    for text in filter(None, (weights or "").split(";")):
        e, k, n = (int(v) for v in text.split(","))
        x = torch.randn(e, k, n, device="cuda", dtype=torch.bfloat16)
        ops = {
            "colwise_3d_scale_and_cast": e * k * n * 3 + 4 * e * n,
            "rowwise_3d_transpose_rhs": e * k * n * 3 + 4 * e * k,
        }
        ops["colwise_3d_and_transpose_rhs"] = sum(ops.values()) - 2 * e * k * n  # x read once for both
        for op, ideal in ops.items():
            points.append((f"{op} | {e}x{k}x{n} G=0", ideal, getattr(fp8moe, op), (x,)))
    for label, ideal, op, args in points:
        call = functools.partial(op, *args, torch.float8_e4m3fn, False)
        _profiled_call(marker, f"{label} | - | row_major", ideal, call)


def _value(text: str) -> float:
    return float(text.replace(",", "")) if text.strip() else float("nan")


#: Kernel name of the marker fill before each point (runs before 2026-12-01 06:00 UTC filled an f32 tensor, which the
#: atomic transpose's own zero-fill also is: pass ``--marker 'FillFunctor<float>'`` for those, whose int fill differs).
MARKER = "FillFunctor<double>"

#: The variant cells of a point at the bench's default layout, aligned16 groups: older logs wrote "-".
ALIGNED16_VARIANTS = ("-", "offs=aligned16")


def launches(path: str, marker: str = MARKER) -> list[tuple[list[str] | None, str, dict, dict]]:
    """The profiled kernel launches of an ncu ``--csv --page details`` log in launch order, each (its point's cells
    from the ``# point |`` line: op, shape, variant, layout, ideal bytes; or None before the first marker, kernel
    name, metric values, metric units). The marker fills that start each point are left out."""
    points, rows_by_launch = [], {}
    with open(path) as f:
        text = f.read()
    csv_lines = []
    for line in text.splitlines():
        if line.startswith("# point |"):
            points.append([cell.strip() for cell in line.split("|")[1:]])
        elif line.startswith('"'):
            csv_lines.append(line)
    for rec in csv.DictReader(io.StringIO("\n".join(csv_lines))):
        entry = rows_by_launch.setdefault(rec["ID"], {"kernel": rec["Kernel Name"], "metrics": {}, "units": {}})
        entry["metrics"][rec["Metric Name"]] = rec["Metric Value"]
        entry["units"][rec["Metric Name"]] = rec["Metric Unit"]
    point_iter, current, found = iter(points), None, []
    for launch in sorted(rows_by_launch, key=int):
        entry = rows_by_launch[launch]
        if marker in entry["kernel"]:  # the marker before each point's call
            current = next(point_iter, None)
            continue
        found.append((current, entry["kernel"], entry["metrics"], entry["units"]))
    return found


def summarize(path: str, marker: str = MARKER) -> str:
    """One Markdown row per profiled kernel launch of an ncu ``--csv --page details`` log."""
    header = [
        "point",
        "kernel",
        *SUMMARY_METRICS.values(),
        "SMs idle %",
        "DRAM read MB",
        "DRAM write MB",
        "DRAM bytes / ideal",
        "top stalls (warps per issue)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for current, kernel, m, units in launches(path, marker):
        cells = [_point_label(current) if current else "?", kernel[:40]]
        for name in SUMMARY_METRICS:
            value = _microseconds(m, units) if name == "Duration" else _value(m.get(name, ""))
            cells.append(f"{value:.1f}" if value == value else "-")
        idle = _idle_percent(m)
        cells.append(f"{idle:.1f}" if idle == idle else "-")
        read, write = (_dram_bytes(m, units, k) for k in ("dram__bytes_read.sum", "dram__bytes_write.sum"))
        dram = read + write
        cells += [f"{read / 1e6:.1f}" if read else "-", f"{write / 1e6:.1f}" if write else "-"]
        ideal = float(current[-1]) if current else float("nan")
        cells.append(f"{dram / ideal:.2f}" if dram and ideal == ideal else "-")
        stalls = sorted(
            ((name, _value(v)) for name, v in m.items() if "issue_stalled" in name and _value(v) == _value(v)),
            key=lambda kv: -kv[1],
        )[:3]
        short = [(n.split("issue_stalled_")[1].split("_per_")[0], v) for n, v in stalls]
        cells.append(", ".join(f"{n} {v:.2f}" for n, v in short) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def idle_split(path: str, marker: str = MARKER) -> str:
    """Per launch of a point whose aligned16 twin (same op, shape, tile and kernel) the log also profiled: its time
    over the twin's, split into the factor of SM idle time (the twin's active share over this launch's, from
    :func:`_idle_percent`) and the factor of active cycles (the rest). Idle grows where a few long programs hold
    their SMs while the others wait; active cycles grow with bytes and with slower programs."""
    rows, aligned = [], {}
    for current, kernel, m, units in launches(path, marker):
        if not current:
            continue
        op, shape, variant = current[:3]
        layout, _, tile = variant.partition(" ")
        key = (op, shape, tile, kernel)
        us, idle = _microseconds(m, units), _idle_percent(m)
        if layout in ALIGNED16_VARIANTS:
            aligned[key] = (us, idle)
        rows.append((key, layout, us, idle))
    lines = [
        "| op | shape | tile | layout | us | x aligned16 | SMs idle % | idle factor | active factor |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for key, layout, us, idle in rows:
        if key not in aligned:
            continue
        base_us, base_idle = aligned[key]
        ratio, idle_factor = us / base_us, (100 - base_idle) / (100 - idle)
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2] or '-'} | {layout} | {us:.1f} | {ratio:.2f} | {idle:.1f} "
            f"| {idle_factor:.3f} | {ratio / idle_factor:.3f} |"
        )
    return "\n".join(lines)


def _microseconds(metrics: dict, units: dict) -> float:
    """The launch's Duration in us, whatever unit ncu reported it in."""
    scale = {"ns": 1e-3, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}.get(units.get("Duration", "us"), 1.0)
    return _value(metrics.get("Duration", "")) * scale


def _point_label(point: list[str]) -> str:
    """op and shape, then the variant and layout where they are not the bench's defaults (two points of one shape
    differ only there, e.g. colwise 3D on row- and column-major input)."""
    op, shape, variant, layout = point[:4]
    extra = [v for v, default in ((variant, ALIGNED16_VARIANTS), (layout, ("row_major",))) if v not in default]
    return " ".join([op, shape, *extra])


def _idle_percent(metrics: dict) -> float:
    """The share of the launch's elapsed cycles an SM spent with no warp resident, averaged over the SMs: 100 x (1 -
    SM Active Cycles / Elapsed Cycles), both of SpeedOfLight. It grows where some programs run much longer than the
    others and the last of them hold a few SMs while the rest wait (long groups late in the grid); nan where either
    metric is missing."""
    active, elapsed = (_value(metrics.get(name, "")) for name in ("SM Active Cycles", "Elapsed Cycles"))
    return 100 * (1 - active / elapsed) if elapsed == elapsed and active == active and elapsed else float("nan")


def _dram_bytes(metrics: dict, units: dict, name: str) -> float:
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    if name not in metrics:
        return 0.0
    return _value(metrics[name]) * scale.get(units.get(name, "byte"), 1)


def main(argv: list[str] | None = None) -> int:
    """Profile (under ncu) or summarise an ncu CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--select", default=None, help="substrings of '<op> <shape> G=<groups> <variant> <layout>', comma-separated"
    )
    parser.add_argument("--only", default=None, help="substring filter on the op name")
    parser.add_argument("--points", default="issue11", help="a point set of tune_configs.py (issue11, order, ...)")
    parser.add_argument("--activations", default=None, help="M,K,G;...: the activation pair and its two ops")
    parser.add_argument("--weights", default=None, help="E,K,N;...: the weight pair and its two ops")
    parser.add_argument(
        "--jagged-kernel", default=None, help="span, chunks, tiles or chunks:I (GROUP_CHUNKS.cuda[I] forced)"
    )
    parser.add_argument(
        "--force",
        action="append",
        default=None,
        metavar="LIST=RxK/wN,...",
        help="candidates forced in turn instead of autotuned (tune_configs.py --candidates form; lists of one length)",
    )
    parser.add_argument("--summarize", default=None, help="an ncu --csv --page details log to turn into Markdown")
    parser.add_argument(
        "--idle-split",
        default=None,
        help="an ncu --csv --page details log: each layout's time over aligned16's, split into SM idle and active",
    )
    parser.add_argument("--marker", default=MARKER, help="kernel name part of the marker fill (--summarize)")
    args = parser.parse_args(argv)
    if args.summarize or args.idle_split:
        print(summarize(args.summarize, args.marker) if args.summarize else idle_split(args.idle_split, args.marker))
        return 0
    if args.jagged_kernel:
        use_jagged_kernel(args.jagged_kernel)
    if args.activations or args.weights:
        profile_pairs(args.activations, args.weights)
    else:
        profile(args.select, args.only, args.points, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
