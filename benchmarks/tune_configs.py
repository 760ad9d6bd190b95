"""Measure every CUDA launch-config candidate of every kernel at the benchmark shapes, one GPU, one run.

    python benchmarks/tune_configs.py --out benchmarks/results/h200-configs-<run>.md      # issue #11 shapes
    python benchmarks/tune_configs.py --points moe --only per_group --out ...             # SPEC §7 MoE shapes
    python benchmarks/tune_configs.py --points uniform --out ...   # aligned per-group points beside uniform twins
    python benchmarks/tune_configs.py --points sizes --out ...     # random16 points beside aligned16, spread, sorted
    python benchmarks/tune_configs.py --points waves --out ...     # colwise G64 at column counts that fill waves
    python benchmarks/tune_configs.py --points cap --only colwise_3d --out ...   # colwise 3D between two 3D points
    python benchmarks/tune_configs.py --standing TABLE    # no GPU: best listed tile against best timed, per point
    python benchmarks/tune_configs.py --layout-ratios TABLE...   # no GPU: each layout's time over aligned16's
    python benchmarks/tune_configs.py --tile-percentages TABLE   # no GPU: each tile's % of copy at every point

fp8moe.configs lists, per kernel, the candidates CUDA autotuning chooses among, and the one candidate small
problems take without tuning (the smallest tile). This script is the measurement behind those lists: for each
benchmark point (fp8moe.bench: the issue #11 shapes, or SPEC §7's) it forces each candidate in turn (every kernel
of the op launched with that candidate; the two kernels of the atomic transpose share their candidate list and move
together) and times the op. Per point
it reports the time of every candidate, the best, and how far the worst and the untuned small-problem choice are
from the best. A candidate that is never best and never within 5% of best is dead weight in the autotuner (each one
costs a compile and a measurement per new key). Times are CUDA-graph replays (GPU time, no host). Every forced run
is first checked bitwise against fp8ref: configs must change speed, never bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import sys

import torch

import fp8moe  # imported before triton, as fp8moe requires
import fp8moe.configs as configs_module
from fp8moe import replay
from fp8moe.bench import (
    ISSUE11_POINTS,
    Point,
    config_lists,
    copy_bandwidth_gbps,
    make_inputs,
    moe_points,
    same_outputs,
)
from fp8moe.bench import select_points as bench_select_points
from fp8moe.configs import CONFIGS_BY_SPEC, KernelConfigs
from fp8ref.contracts import contract
from fp8ref.layouts import SIZE_ORDERS, SIZE_SPREAD

E4 = torch.float8_e4m3fn
#: Within this fraction of the best time, a candidate counts as "as good as best" at a point.
NEAR_BEST = 0.05

#: ``--points uniform``: each aligned per-group point of issue #11 whose groups differ in size, beside a twin of
#: 16384 tokens in groups of one size (256 at G = 64, 128 at G = 128). The aligned16 groups are 256 or 272 tokens at
#: G = 64 and 128 or 144 at G = 128 (fp8ref.layouts.make_offs), so 16 groups per point are one 16-token chunk wider
#: than a one-read tile of 256 or 128 and take the two-pass loop; the twins time the same tiles without them
#: (benchmarks/results/per-group-ledger.md, "What the measurements say limits the per-group ops").
UNIFORM_POINTS: tuple[Point, ...] = tuple(
    twin
    for op, aligned, uniform, groups in (
        ("per_group_rowwise_scales", (5120, 16640), (5120, 16384), 64),
        ("per_group_rowwise_scales", (2048, 16640), (2048, 16384), 128),
        ("per_group_colwise_scales", (16640, 2048), (16384, 2048), 64),
        ("per_group_colwise_scales", (16640, 5120), (16384, 5120), 64),
        ("per_group_colwise_scales", (16640, 2048), (16384, 2048), 128),
        ("per_group_colwise_scales", (16640, 5120), (16384, 5120), 128),
        ("per_group_colwise_scales_dual", (16640, 2048, 2048), (16384, 2048, 2048), 64),
        ("per_group_colwise_scales_dual", (16640, 2048, 1408), (16384, 2048, 1408), 64),
        ("per_group_colwise_scales_dual", (16640, 5120, 5120), (16384, 5120, 5120), 128),
    )
    for twin in (Point(op, aligned, groups, "aligned16"), Point(op, uniform, groups, "uniform"))
)
#: ``--points order``: each random16 point of issue #11 beside its aligned16 twin and the same random16 sizes sorted
#: largest first and smallest first (fp8ref.layouts.SIZE_ORDERS). With row blocks fastest in the grid,
#: ``random16_desc`` starts every long group before any short one: the largest-first schedule with no ranking in the
#: kernel, so its time against ``random16`` is what that order can gain over the grid's (benchmarks/
#: grid_schedule_model.py predicts it). Session 27 on an H100 (h100-s27-call5-order-configs.md): none.
ORDER_POINTS: tuple[Point, ...] = tuple(
    Point(p.op, p.shape, p.groups, layout, p.layout, p.kwargs)
    for p in ISSUE11_POINTS
    if p.offs == "random16"
    for layout in ("aligned16", "random16", *(f"random16_{o}" for o in SIZE_ORDERS))
)
#: The spreads of ``--points sizes`` (fp8ref.layouts.SIZE_SPREAD): 240 gives aligned16's G = 64 sizes the spread of
#: random16's (population standard deviation 236 against 235 tokens at 16640 tokens), with no group past 496.
SPREADS: tuple[int, ...] = (64, 128, 240)
#: ``--points sizes``: the order points with aligned16's sizes spread between them (aligned16_spread<d>: sizes
#: alternating about 260 + d and 260 - d, the total, group count and 16-aligned starts unchanged). At the same tiles,
#: random16 ran 1.08-1.49x its aligned16 time on the H200 (h200-s27-call2-configs.md), and none of the explanations
#: tested so far accounts for it (benchmarks/results/issue11-misses.md, "Random group sizes"). If the time grows
#: with the spread and reaches random16's at 240, uneven sizes are the cost whatever their order; if spread240 runs
#: near aligned16, what random16 costs lies in its longest groups (up to 1040 tokens, none past 496 here).
SIZE_POINTS: tuple[Point, ...] = tuple(
    Point(p.op, p.shape, p.groups, layout, p.layout, p.kwargs)
    for p in ISSUE11_POINTS
    if p.offs == "random16"
    for layout in (
        "aligned16",
        *(f"aligned16_{SIZE_SPREAD}{d}" for d in SPREADS),
        "random16",
        *(f"random16_{o}" for o in SIZE_ORDERS),
    )
)
#: The column counts of ``--points waves``: per_group_colwise_scales at 16640 tokens in 64 aligned16 groups, N
#: columns, all multiples of 64 (no partial row block). 64-row tiles make N / 64 * 64 programs: 2048 columns make
#: 2048 programs, 5.17 waves of the 396 that 3 programs per SM hold on 132 SMs; 2368 make 5.98.
WAVE_COLUMNS: tuple[int, ...] = (1792, 2048, 2304, 2368, 2560)
#: ``--points waves``: does the last, partial wave of programs cost the colwise op at 16640x2048 G = 64 (66-73% of
#: copy on the H200, the stripped one-read ceiling 79-83% there against 87-90% at 16640x5120)? If programs run at a
#: fixed speed, as a latency-bound kernel's do, the grid model (benchmarks/grid_schedule_model.py --row-blocks
#: N/64 --slots 396) finishes 64-row tiles at 3 programs per SM 1.114 / 1.155 / 1.045 / 1.026 / 1.085x the
#: balanced time at these N: 2304 columns would take about the time of 2048 (12.5% more bytes, 0.90x the
#: imbalance). If instead the last wave's programs speed up as they get the bandwidth to themselves, time grows
#: with N. Measured on the H200 in session 29 (h200-s29-call6-waves-configs.md): time grows with N at every tile
#: (2304 columns 1.12x the time of 2048 for 1.125x the bytes), so the partial wave is not what limits this shape.
WAVE_POINTS: tuple[Point, ...] = tuple(
    Point("per_group_colwise_scales", (16640, n), 64, "aligned16") for n in WAVE_COLUMNS
)
#: The shapes of ``--points cap``: colwise_3d_scale_and_cast on row-major (E, K, N) input at the corners of the box
#: between issue #11's (16, 8192, 5120) and (128, 5120, 8192), one factor at a time. With the counters a line apart
#: the 256 x 64 cooperative tile capped at 128 registers (4 programs per SM, the rule at every E since session 45)
#: took 1.00x the best of six forced tiles at (16, 8192, 5120) and the uncapped tile 1.07x there. At
#: (128, 5120, 8192) the cap took 0.96x the uncapped time in session 40, then 1.03x in session 44 (counters still
#: packed) and 1.04x in session 45, three H100s (h100-s40-call25-configs.md, h100-s44-call28-configs.md,
#: h100-s45-call36-configs_columns.md). Which of E, K (the chunks per column slice) and N flips it, or the size
#: alone, decides whether a rule can take the uncapped tile there on evidence rather than one point.
#: (128, 8192, 8192) is left out: 8.6e9 elements, more than the largest point whose full-size reference the forced
#: runs have checked on an 80 GB H100.
CAP_SHAPES: tuple[tuple[int, int, int], ...] = (
    (16, 8192, 5120),
    (16, 8192, 8192),
    (16, 5120, 5120),
    (16, 5120, 8192),
    (128, 8192, 5120),
    (128, 5120, 5120),
    (128, 5120, 8192),
)
CAP_POINTS: tuple[Point, ...] = tuple(
    Point("colwise_3d_scale_and_cast", shape, layout="row_major") for shape in CAP_SHAPES
)
POINT_SETS = {
    "issue11": lambda: ISSUE11_POINTS,
    "moe": moe_points,
    "uniform": lambda: UNIFORM_POINTS,
    "order": lambda: ORDER_POINTS,
    "sizes": lambda: SIZE_POINTS,
    "waves": lambda: WAVE_POINTS,
    "cap": lambda: CAP_POINTS,
}


def kernel_configs_of(op: str, kwargs: dict) -> tuple[KernelConfigs, ...]:
    """The KernelConfigs the kernels of one launch variant run with (fp8moe.configs.CONFIGS_BY_SPEC)."""
    method = kwargs.get("method")
    return CONFIGS_BY_SPEC[f"{op}[{method}]" if method else op]


@contextlib.contextmanager
def forced(names: set[str], index: int):
    """Launch the kernels named ``names`` with their candidate ``index``, without autotuning, inside the block."""
    original_fixed, original_min = KernelConfigs.fixed, configs_module.AUTOTUNE_MIN_ELEMENTS

    def fixed(self, backend, args):
        return self.cuda[index] if self.name in names else original_fixed(self, backend, args)

    KernelConfigs.fixed = fixed
    configs_module.AUTOTUNE_MIN_ELEMENTS = float("inf")
    replay.forget()  # a launch plan replays the config it recorded: none may outlive a change of policy
    try:
        yield
    finally:
        KernelConfigs.fixed, configs_module.AUTOTUNE_MIN_ELEMENTS = original_fixed, original_min
        replay.forget()


@contextlib.contextmanager
def byte_stores():
    """Launch every row kernel with PACK_K = 1 (byte stores) inside the block, whatever the layout: every loaded
    fp8moe.kernels module that imported fp8moe.kernels._span.pack_k gets a stand-in."""
    from fp8moe.kernels._span import pack_k

    modules = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("fp8moe.kernels") and getattr(m, "pack_k", None) is pack_k
    ]
    for m in modules:
        m.pack_k = lambda x_strides_k, *qs: 1
    replay.forget()
    try:
        yield
    finally:
        for m in modules:
            m.pack_k = pack_k
        replay.forget()


def _lists_by_name() -> dict[str, KernelConfigs]:
    """Every candidate list fp8moe.configs defines (those of opt-in kernels too), by its KernelConfigs name."""
    return {k.name: k for k in vars(configs_module).values() if isinstance(k, KernelConfigs)}


def lists_that_ran(point: Point, call) -> tuple[KernelConfigs, ...]:
    """The candidate lists whose kernels one ``call`` at ``point`` launched, in fp8moe.bench.config_lists order
    (the first owns the candidates): the kernel settings (colwise 3D's, the atomic transpose's, the jagged ops')
    pick a kernel by the input, so CONFIGS_BY_SPEC alone can name a list the call never launches."""
    lists = config_lists(point)
    for k in lists:
        configs_module.LAST_CONFIG.pop(k.name, None)
    with forced(set(), 0):  # no autotuning (the rules still choose), and no launch plan replaying unrecorded
        call()
    ran = tuple(k for k in lists if k.name in configs_module.LAST_CONFIG)
    if not ran:
        raise RuntimeError(f"no fp8moe kernel with a candidate list ran at {point}")
    return ran


def list_owner(op: str, variant: str) -> str:
    """The candidate list a table row's config belongs to: the ``list=`` a row names where the kernel that ran is not
    the op's CONFIGS_BY_SPEC owner (:func:`tune_point`), that owner otherwise."""
    for part in variant.split(","):
        if part.startswith("list="):
            return part.removeprefix("list=")
    return kernel_configs_of(op, {"method": "atomic"} if "method=atomic" in variant else {})[0].name


def parse_candidates(specs: list[str]) -> dict[str, list]:
    """``LIST=RxK/wN,...`` (a KernelConfigs name, then tiles in its block order as fp8moe.configs.describe writes
    them, fp8moe.configs.parse_config: ``/rM`` after the warps for a cap of M registers per thread, ``/g`` for
    GROUPS_FASTEST, ``/t`` for ONE_READ=False, ``/o<n>`` for ONE_READ_K=n, ``/e`` for EDGES_IN_TILE, ``/x<n>``
    for EXTRA_CHUNKS=n, ``/l`` for EDGE_LOOP) -> extra triton.Config candidates per list."""
    by_name = _lists_by_name()
    extra: dict[str, list] = {}
    for spec in specs:
        name, _, tiles = spec.partition("=")
        if name not in by_name:
            raise SystemExit(f"--candidates: no candidate list {name!r}; lists: {', '.join(sorted(by_name))}")
        block_names = [k for k in by_name[name].cuda[0].kwargs if k.startswith("BLOCK_")]
        for tile in tiles.split(","):
            try:
                extra.setdefault(name, []).append(configs_module.parse_config(tile, block_names))
            except ValueError as error:
                raise SystemExit(f"--candidates: {error}") from None
    return extra


def groups_fastest_twins() -> dict[str, list]:
    """The twin in the other grid order (GROUPS_FASTEST flipped, ``/g``, fp8moe.kernels._per_group.jagged_grid) of
    every candidate of the span kernel's lists that has none there, as extra candidates: each tile timed in both
    grid orders at every per-group point."""
    import triton  # after fp8moe, which must be imported first

    from fp8moe.configs import PER_GROUP, PER_GROUP_DUAL

    twins = {}
    for k in (PER_GROUP, PER_GROUP_DUAL):
        listed = {configs_module.describe(c) for c in k.cuda}
        flipped = [
            triton.Config(
                {**c.kwargs, "GROUPS_FASTEST": not c.kwargs.get("GROUPS_FASTEST", False)}, num_warps=c.num_warps
            )
            for c in k.cuda
        ]
        twins[k.name] = [c for c in flipped if configs_module.describe(c) not in listed]
    return twins


@contextlib.contextmanager
def extra_candidates(extra: dict[str, list], replace: bool = False):
    """Append candidates to the named lists inside the block (for timing tiles before adding them to
    fp8moe.configs), or with ``replace`` make them the whole list: tune_point forces each in turn like the listed
    ones."""
    owners = _lists_by_name()
    saved = {name: owners[name].cuda for name in extra}
    for name, configs in extra.items():
        listed = () if replace else saved[name]
        object.__setattr__(owners[name], "cuda", (*listed, *configs))  # frozen dataclass: a tool-only patch
        owners[name].__dict__.pop("smallest_cuda", None)
    try:
        yield
    finally:
        for name, cuda in saved.items():
            object.__setattr__(owners[name], "cuda", cuda)
            owners[name].__dict__.pop("smallest_cuda", None)


def point_label(point: Point) -> str:
    return "x".join(map(str, point.shape)) + (f" G={point.groups}" if point.offs else "")


def tune_point(point: Point, do_bench, device: str = "cuda", with_byte_stores: bool = False) -> list[str]:
    """Markdown rows for one point: one per candidate, the best marked; ``with_byte_stores``: one more per candidate
    with PACK_K forced to 1 (config suffix ``/bytes``), to compare the word stores of transposing views with bytes."""
    c = contract(point.op)
    xs, offs = make_inputs(c, point, device)
    fixed_args = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}
    expected = c.call(c.reference, xs, offs, **fixed_args)
    kernel = getattr(fp8moe, point.op)
    owners = lists_that_ran(point, lambda: c.call(kernel, xs, offs, **fixed_args, **point.kwargs))
    candidates = owners[0].cuda
    if owners[0].rule is None:  # the untuned choice: the smallest tile, for problems too small to autotune
        untuned, untuned_mark = candidates.index(owners[0].smallest_cuda), "untuned-small"
    else:  # a list that never autotunes: the tile its rule picks for this point (the call above recorded it)
        chosen = configs_module.LAST_CONFIG.get(owners[0].name)
        untuned, untuned_mark = (candidates.index(chosen) if chosen in candidates else None), "rule"
    runs = [(i, False) for i in range(len(candidates))]
    if with_byte_stores:
        runs += [(i, True) for i in range(len(candidates))]
    times, exact = [], []
    for i, bytes_only in runs:
        with forced({k.name for k in owners}, i), byte_stores() if bytes_only else contextlib.nullcontext():
            out = c.call(kernel, xs, offs, **fixed_args, **point.kwargs)
            exact.append(same_outputs(out, expected))
            del out
            times.append(do_bench(lambda: c.call(kernel, xs, offs, **fixed_args, **point.kwargs), rep=20))
    best = min(times)
    variant = ",".join(
        [f"{k}={v}" for k, v in point.kwargs.items()]
        + ([f"offs={point.offs}"] if point.offs and point.offs != "aligned16" else [])
        + ([point.layout] if point.layout != "row_major" else [])
        + ([f"list={owners[0].name}"] if owners[0] is not kernel_configs_of(point.op, point.kwargs)[0] else [])
    )
    variant = variant or "-"
    rows = []
    for k, ((i, bytes_only), ms) in enumerate(zip(runs, times)):
        marks = [m for m, on in (("best", ms == best), (untuned_mark, i == untuned and not bytes_only)) if on]
        config = configs_module.describe(candidates[i]) + ("/bytes" if bytes_only else "")
        rows.append(
            f"| {point.op} | {point_label(point)} | {variant} | {config} | {ms * 1e3:.1f} | "
            f"{ms / best:.2f} | {' '.join(marks) or '-'} | {'yes' if exact[k] else 'NO'} |"
        )
    return rows


def _table_rows(path: str):
    """(copy bandwidth GB/s or None, rows) of a table this script wrote: each row (op, shape cell, variant cell,
    config, us, bitwise)."""
    bandwidth, rows = None, []
    with open(path) as f:
        for line in f:
            if "same run:" in line and "GB/s" in line:
                bandwidth = float(line.rsplit("same run:", 1)[1].split("GB/s")[0])
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 8 and cells[5].replace(".", "").isdigit():
                op, shape, variant, config, us, _, _, bitwise = cells
                rows.append((op, shape, variant, config, float(us), bitwise == "yes"))
    return bandwidth, rows


def _point_bytes(op: str, shape_cell: str) -> int:
    """Ideal bytes (fp8moe.bench.ideal_bytes) of a table's point, from its shape cell ("16640x2048 G=64")."""
    from fp8moe.bench import ideal_bytes

    dims, _, groups = shape_cell.partition(" G=")
    return ideal_bytes(contract(op), tuple(int(d) for d in dims.split("x")), int(groups or 0))


#: The view each per-group op's bench input (row-major x) launches with (fp8moe.configs.per_group_view): the
#: rowwise op reads x along its jagged dim, the colwise op transposes.
CANONICAL_VIEW = {"per_group_rowwise_scales": "along_k", "per_group_colwise_scales": "transposing"}


def autotuned_names(kernel_configs: KernelConfigs, op: str) -> tuple[str, ...]:
    """The candidates (as fp8moe.configs.describe names them) the autotuner times for ``op``'s bench input: the
    op's view's list where ``kernel_configs`` splits its candidates by view, all of them otherwise."""
    view = CANONICAL_VIEW.get(op) if kernel_configs.view is not None else None
    return tuple(configs_module.describe(c) for c in kernel_configs.autotune_candidates(view))


def standing(path: str) -> list[str]:
    """Per point of a table of forced candidates: the best bitwise tile among those fp8moe.configs lists now (what
    the autotuner can pick) and the best of every tile the table timed, each with its time and % of copy bandwidth
    (ideal bytes over the table's own copy bandwidth), and their ratio: what adopting the best timed tile would
    gain. Rows whose outputs were not bitwise never count."""
    bandwidth, rows = _table_rows(path)
    lines = [
        "| op | shape | variant | listed: best tile | us | % of copy | timed: best tile | us | % of copy "
        "| timed / listed |",
        "|---|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    points = dict.fromkeys((op, shape, variant) for op, shape, variant, *_ in rows)
    for op, shape, variant in points:
        listed = set(autotuned_names(_lists_by_name()[list_owner(op, variant)], op))
        here = [(us, config) for o, sh, v, config, us, ok in rows if (o, sh, v) == (op, shape, variant) and ok]
        if not here:
            continue
        timed = min(here)
        best_listed = min((r for r in here if r[1] in listed), default=None)
        point_bytes = _point_bytes(op, shape)
        cells = []
        for best in (best_listed, timed):
            pct = f"{100 * point_bytes / (best[0] * 1e-6) / 1e9 / bandwidth:.0f}%" if best and bandwidth else "-"
            cells.append(f"{best[1]} | {best[0]:.1f} | {pct}" if best else "- | - | -")
        ratio = f"{timed[0] / best_listed[0]:.2f}" if best_listed else "-"
        lines.append(f"| {op} | {shape} | {variant} | {cells[0]} | {cells[1]} | {ratio} |")
    return lines


#: The variant cells a table gives a point at aligned16 groups: its own name, or "-" in tables whose points took it
#: by default.
_ALIGNED16_VARIANTS = ("offs=aligned16", "-")


def layout_ratios(paths: list[str]) -> list[str]:
    """Per op, shape and tile of tables this script wrote (--points order or sizes, or tables of the same tiles at
    different offs layouts): the time at aligned16 groups and, per other layout, the time over it, bitwise rows
    only; a tile timed at aligned16 alone has no row. The same tile at the same point in two tables: the first
    table's row counts. How the rows for random16, its orders and the spreads read:
    benchmarks/results/issue11-misses.md, "Random group sizes"."""
    times: dict[tuple[str, str, str], dict[str, float]] = {}
    layouts: dict[str, None] = {}
    for path in paths:
        for op, shape, variant, config, us, bitwise in _table_rows(path)[1]:
            if not bitwise:
                continue
            layout = "aligned16" if variant in _ALIGNED16_VARIANTS else variant.removeprefix("offs=")
            layouts.setdefault(layout)
            times.setdefault((op, shape, config), {}).setdefault(layout, us)
    others = [layout for layout in layouts if layout != "aligned16"]
    lines = [
        "| op | shape | tile | aligned16 us | " + " | ".join(f"{layout} / aligned16" for layout in others) + " |",
        "|---|---|---|---:|" + "---:|" * len(others),
    ]
    for (op, shape, config), at in times.items():
        base = at.get("aligned16")
        if base is None or len(at) == 1:
            continue
        cells = [f"{at[layout] / base:.2f}" if layout in at else "-" for layout in others]
        lines.append(f"| {op} | {shape} | {config} | {base:.1f} | " + " | ".join(cells) + " |")
    return lines


def bench_times(path: str) -> dict[tuple[str, str, str], tuple[float, str]]:
    """(op, shape cell, variant cell) -> (CUDA-graph us, config) of fp8moe's bitwise rows in a bench JSON
    (fp8moe.bench --json), keyed as this script's tables key their points: "16640x2048 G=64", "-" for the
    aligned16 variant the issue #11 points take by default."""
    times = {}
    with open(path) as f:
        for row in json.load(f)["rows"]:
            if row["impl"] != "fp8moe" or not row["bitwise_ok"] or not row["us"]:
                continue
            shape = "x".join(map(str, row["shape"])) + (f" G={row['groups']}" if row["groups"] else "")
            variant = "-" if row["variant"] in _ALIGNED16_VARIANTS else row["variant"]
            times[(row["op"], shape, variant)] = (row["us"], row["config"] or "-")
    return times


def against_bench(paths: list[str]) -> list[str]:
    """Per bitwise row of a table of forced candidates (the first path) whose point the bench JSON (the second) also
    ran: the tile's time over the autotuned bench's, run on the same machine under the lists as they were. A tile
    under 1.00 there beats every tile the autotuner could pick; the lists take one in at 0.98 or less
    (benchmarks/results/per-group-ledger.md, row 31)."""
    table, bench_json = paths
    autotuned = bench_times(bench_json)
    lines = [
        "| op | shape | variant | tile | us | autotuned us | autotuned tile | tile / autotuned |",
        "|---|---|---|---|---:|---:|---|---:|",
    ]
    for op, shape, variant, config, us, bitwise in _table_rows(table)[1]:
        if bitwise and (op, shape, variant) in autotuned:
            bench_us, bench_config = autotuned[(op, shape, variant)]
            lines.append(
                f"| {op} | {shape} | {variant} | {config} | {us:.1f} | {bench_us:.1f} | {bench_config} "
                f"| {us / bench_us:.3f} |"
            )
    return lines


def tile_percentages(path: str) -> list[str]:
    """Per tile of a table this script wrote, every point it ran at with its time and % of copy bandwidth (ideal
    bytes over the table's own copy bandwidth), bitwise rows only, in the table's order of points: how one tile's
    efficiency moves with the shape (``--points waves``: the colwise op at column counts that fill the last wave of
    programs differently)."""
    bandwidth, rows = _table_rows(path)
    lines = ["| tile | op | shape | variant | us | % of copy |", "|---|---|---|---|---:|---:|"]
    tiles = dict.fromkeys(config for *_, config, _, _ in rows)
    for tile in tiles:
        for op, shape, variant, config, us, bitwise in rows:
            if config != tile or not bitwise:
                continue
            pct = f"{100 * _point_bytes(op, shape) / (us * 1e-6) / 1e9 / bandwidth:.0f}%" if bandwidth else "-"
            lines.append(f"| {tile} | {op} | {shape} | {variant} | {us:.1f} | {pct} |")
    return lines


def summarize(paths: list[str]) -> list[str]:
    """Per candidate list and candidate, over every measured point in the given tables: how often it was best, how
    often within NEAR_BEST of best, and its best and median ratio to the best. The first measurement of a point
    (op, shape, variant, config) wins if tables repeat it."""
    ratios: dict[tuple[str, str], list[float]] = {}
    seen = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) != 8 or not cells[5].replace(".", "").isdigit():
                    continue
                op, shape, variant, config, _, x_best, _, _ = cells
                if (op, shape, variant, config) in seen:
                    continue
                seen.add((op, shape, variant, config))
                owner = list_owner(op, variant)
                ratios.setdefault((owner, config), []).append(float(x_best))
    lines = [
        "| candidate list | config | best at | within 5% at | points | best ratio | median ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (owner, config), xs in sorted(ratios.items()):
        xs.sort()
        lines.append(
            f"| {owner} | {config} | {sum(x == 1.0 for x in xs)} | {sum(x <= 1 + NEAR_BEST for x in xs)} | "
            f"{len(xs)} | {xs[0]:.2f} | {xs[len(xs) // 2]:.2f} |"
        )
    return lines


def select_points(
    points, only: str | None = None, select: str | None = None, max_elements: float | None = None
) -> list[Point]:
    """The points to tune: fp8moe.bench.select_points (comma-separated ``only`` and ``select`` filters), then inputs
    of at most ``max_elements`` elements (None: no filter)."""
    return [
        p
        for p in bench_select_points(points, only, select)
        if not max_elements or sum(map(math.prod, contract(p.op).input_shapes(p.shape))) <= max_elements
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--summarize",
        nargs="+",
        metavar="TABLE",
        help="no GPU: summarize tables this script wrote, per candidate list and candidate",
    )
    parser.add_argument(
        "--standing",
        metavar="TABLE",
        help="no GPU: per point of a table this script wrote, the best listed tile against the best timed one",
    )
    parser.add_argument(
        "--layout-ratios",
        nargs="+",
        metavar="TABLE",
        help="no GPU: per op, shape and tile of tables this script wrote, each offs layout's time over aligned16's",
    )
    parser.add_argument(
        "--tile-percentages",
        metavar="TABLE",
        help="no GPU: per tile of a table this script wrote, its time and %% of copy bandwidth at every point",
    )
    parser.add_argument(
        "--against-bench",
        nargs=2,
        metavar=("TABLE", "BENCH_JSON"),
        help="no GPU: each bitwise row of a table this script wrote over the autotuned bench's time at its point",
    )
    parser.add_argument("--out", default=None, help="also write the Markdown table to this file")
    parser.add_argument("--only", default=None, help="substring filters on the op name, comma-separated (any)")
    parser.add_argument("--max-elements", type=float, default=None, help="skip points with more input elements")
    parser.add_argument(
        "--select", default=None, help="substring filters on '<op> <variant> <layout>', comma-separated (any)"
    )
    parser.add_argument(
        "--points",
        choices=tuple(POINT_SETS),
        default="issue11",
        help="issue #11 shapes, SPEC §7's, issue #11's aligned per-group points beside twins of uniform groups, or its "
        "random16 points beside their aligned16 twins and their sizes sorted both ways (order), and those with "
        "aligned16's sizes spread (sizes), or the colwise G = 64 point at column counts that fill waves differently "
        "(waves), or colwise 3D on row-major input at the corners between two of its issue #11 shapes (cap)",
    )
    parser.add_argument(
        "--byte-stores", action="store_true", help="also time every candidate with byte stores forced (PACK_K = 1)"
    )
    parser.add_argument(
        "--candidates",
        action="append",
        default=[],
        metavar="LIST=RxK/wN,...",
        help="extra candidates appended to a candidate list for this run, e.g. per_group_scales=32x256/w8",
    )
    parser.add_argument(
        "--groups-fastest-twins",
        action="store_true",
        help="also time every candidate of the per-group span lists with its grid in the groups-fastest order (/g)",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="the --candidates replace their lists for this run (time a few tiles against a baseline you name)",
    )
    args = parser.parse_args(argv)
    extra = parse_candidates(args.candidates)
    if args.groups_fastest_twins:
        for name, twins in groups_fastest_twins().items():
            extra.setdefault(name, []).extend(twins)
    # The no-GPU readers, each its option's dest.
    for reader in (summarize, standing, layout_ratios, tile_percentages, against_bench):
        tables = getattr(args, reader.__name__)
        if tables:
            print("\n".join(reader(tables)))
            return 0
    from triton.testing import do_bench_cudagraph

    header = [
        f"# fp8moe launch-config candidates on {torch.cuda.get_device_name()}",
        "",
        f"torch {torch.__version__}, triton {sys.modules['triton'].__version__}, python {platform.python_version()}. "
        "bf16 in, e4m3fn out, each candidate forced in turn (no autotuning), median CUDA-graph replay time "
        "(triton.testing.do_bench_cudagraph). Tile = the config's block sizes in fp8moe.configs order, wN = "
        "num_warps. x best = time / best time at the point. `untuned-small` = what problems under "
        "AUTOTUNE_MIN_ELEMENTS run with. Variant names a non-default offs or input layout. Device copy bandwidth "
        f"(read + write, CUDA graph), same run: {copy_bandwidth_gbps():.0f} GB/s.",
        "",
        "| op | shape | variant | config | us | x best | | bitwise |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    print("\n".join(header), flush=True)
    lines, all_exact = list(header), True
    points = POINT_SETS[args.points]()
    points = select_points(points, args.only, args.select, args.max_elements)
    for point in points:
        try:
            with extra_candidates(extra, replace=args.replace):
                rows = tune_point(point, do_bench_cudagraph, with_byte_stores=args.byte_stores)
        except Exception as exc:  # one failing point must not lose the others
            print(f"{point}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            continue
        all_exact &= all(r.endswith("| yes |") for r in rows)
        lines.extend(rows)
        print("\n".join(rows), flush=True)
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if all_exact else 1


if __name__ == "__main__":
    sys.exit(main())
