"""``python -m fp8moe.bench``: time any implementation of an op contract beside fp8moe and torch.compile, on one GPU.

    python -m fp8moe.bench --out benchmarks/results/h200-bench-2026-12-01
    python -m fp8moe.bench --kernel mypkg.quant:per_group_rowwise --like per_group_rowwise_scales

Per point (op, shape, groups, offs layout, input layout, kwargs variant) and implementation (fp8moe, torch.compile of
the fp8ref reference, and the ``--kernel`` callable resolved the way ``fp8ref.compare`` resolves kernels):

- ``us``: GPU time of one call replayed from a CUDA graph (no Python, no launch overhead), median;
- ``eager_us``: the same call from Python, timed by ``triton.testing.do_bench`` (device events around each call,
  an L2 flush between calls: a 256 MB memset, ~65-80 us of GPU time at the H200's bandwidth by estimate, not
  timed, during which the host runs ahead, so the call shows its host cost only where that is larger), median;
  two such runs, one before the graph's and one after (``eager_us_runs``), and the smaller of them (a host stall
  inside one run is not the call's cost; the table shows the larger too where they disagree, EAGER_DISAGREE_US);
- ``host_us``: the host's time per call: wall time per call of bursts of calls enqueued right after a device sync,
  median of bursts (:func:`host_us`). The device never makes a burst wait, so where ``host_us`` exceeds ``us`` the
  host path sets the speed of eager calls, and ``eager_us`` and ``loop_us`` show it;
- ``loop_us``: wall time per call of the call repeated back to back from Python with one device sync per batch,
  median of batches: what an eager training loop sees, the larger of the host's and the GPU's time per call (no
  flush, so an input that fits in L2 stays there);
- ``gbps`` and ``pct_of_copy_bw``: ideal bytes (:func:`ideal_bytes`) over ``us``, against a device-to-device copy
  timed in the same run;
- ``speedup_vs_compile``: torch.compile's ``us`` over this implementation's;
- ``bitwise_ok``: the outputs at the benchmark shape equal the reference's computed on the same GPU byte for byte
  (shape, strides and bits) AND ``fp8ref.compare`` passed on a reduced shape of the point (same groups, offs layout
  and input layout; poisoned outputs, run twice; not for torch.compile, which is the reference itself and would
  recompile for another shape). A wrong implementation still gets timed, marked ``False``.
- the ``copy (same bytes)`` row of each point (:func:`copy_row`; ``--no-copy-rows`` leaves it out): a device copy
  moving the point's ideal bytes, timed the same way. Its ``pct_of_copy_bw`` is what a copy of that size reaches
  against the 2 GiB copy, whose launch, ramp-up and last wave are spread over more bytes; the Markdown's last
  section sets each row against it. It is not an implementation of the op (``bitwise_ok`` None);
- ``first_call_ms`` (fp8moe only): wall time of the first call at the point, i.e. compilation and autotuning. At a
  jagged point that call autotunes afresh, on the point's own group layout (the autotune key cannot see the layout,
  SPEC §10.3): each row is what a process whose calls all have that layout gets.

Writes ``<out>.json`` (rows), ``<out>.md`` (a table, then the rows against a copy of their bytes and against issue
#11's targets, :mod:`fp8moe.bench_targets`) and ``<out>.png`` (% of copy bandwidth per op and shape; skipped
with a message when matplotlib is missing). The pure parts (points, bytes, rows, table, arguments) run on the CPU.
``python -m fp8moe.bench_diff OLD.json NEW.json`` sets two runs' rows side by side (:mod:`fp8moe.bench_diff`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ISSUE11_POINTS",
    "Point",
    "ideal_bytes",
    "main",
    "make_inputs",
    "make_row",
    "markdown_table",
    "parse_args",
    "reduced_shape",
    "same_outputs",
]

FP8_OUT_BYTES = 1
SCALE_BYTES = 4

#: The ``impl`` of a point's size-matched copy row (:func:`copy_row`).
COPY_IMPL = "copy (same bytes)"


@dataclass(frozen=True)
class Point:
    """One benchmark point.

    Attributes:
        op: the op contract name (fp8ref.contracts).
        shape: the op's shape tuple, as ``fp8ref.compare`` takes it.
        groups: group count (jagged ops; 1 otherwise).
        offs: named offs layout (fp8ref.layouts.OFFS_LAYOUTS) for jagged ops.
        layout: input memory layout, "row_major" or "col_major".
        kwargs: extra keyword arguments of the call (e.g. method="atomic"), the point's variant.
    """

    op: str
    shape: tuple[int, ...]
    groups: int = 1
    offs: str | None = None
    layout: str = "row_major"
    kwargs: dict = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """The kwargs and the offs layout, "k=v,..." ("-" when none)."""
        parts = [f"{k}={v}" for k, v in self.kwargs.items()] + ([f"offs={self.offs}"] if self.offs else [])
        return ",".join(parts) or "-"


def _jagged(op: str, shapes: Sequence[tuple[tuple[int, ...], int]], offs: str = "aligned16") -> list[Point]:
    return [Point(op, shape, groups, offs) for shape, groups in shapes]


_SHAPES_3D = ((1, 8192, 5120), (16, 8192, 5120), (64, 2048, 1408), (128, 5120, 8192))

#: The shapes of issue #11 (MoE training at G = 16..128 experts), in groups of 16-aligned sizes ("aligned16"), plus
#: at G=64 random multiples of 16 ("random16", the sizes an FP8 MoE step pads its groups to), uneven sizes
#: ("random", not multiples of 16: the kernels' edge path) and empty groups ("empty_middle").
ISSUE11_POINTS: tuple[Point, ...] = (
    *_jagged("per_group_rowwise_scales", [((4096, 65536), 16), ((5120, 16640), 64), ((2048, 16640), 128)]),
    Point("per_group_rowwise_scales", (5120, 16640), 64, "random16"),
    Point("per_group_rowwise_scales", (5120, 16640), 64, "random"),
    *_jagged(
        "per_group_colwise_scales",
        [((16640, 2048), 64), ((16640, 5120), 64), ((16640, 2048), 128), ((16640, 5120), 128), ((65536, 4096), 16)],
    ),
    Point("per_group_colwise_scales", (16640, 2048), 64, "random16"),
    Point("per_group_colwise_scales", (16640, 2048), 64, "random"),
    Point("per_group_colwise_scales", (16640, 2048), 64, "empty_middle"),
    *_jagged(
        "per_group_colwise_scales_dual",
        [((16640, 2048, 2048), 64), ((16640, 2048, 1408), 64), ((16640, 5120, 5120), 128)],
    ),
    Point("per_group_colwise_scales_dual", (16640, 2048, 2048), 64, "random16"),
    Point("rowwise_2d_scale_and_cast", (16640, 2048)),
    Point("rowwise_2d_scale_and_cast", (16640, 5120)),
    *[Point("colwise_3d_scale_and_cast", shape, layout="row_major") for shape in _SHAPES_3D],
    *[Point("rowwise_3d_transpose_rhs", shape, kwargs={"method": "atomic"}) for shape in _SHAPES_3D],
    # Last (a time limit cuts these first): the layouts and methods that already ran at 89-99% (issue #11).
    *[Point("colwise_3d_scale_and_cast", shape, layout="col_major") for shape in _SHAPES_3D],
    *[Point("rowwise_3d_transpose_rhs", shape, kwargs={"method": "reduction"}) for shape in _SHAPES_3D],
)


def ideal_bytes(contract, shape: Sequence[int], groups: int, input_itemsize: int = 2) -> int:
    """Fewest bytes a call moves (SPEC §7): every input element read once, one fp8 byte written per element, and the
    f32 scales written. ``contract`` is an fp8ref op contract (input shapes and scale count)."""
    elements = sum(math.prod(s) for s in contract.input_shapes(shape))
    return elements * (input_itemsize + FP8_OUT_BYTES) + SCALE_BYTES * contract.n_scales(shape, groups)


def reduced_shape(shape: Sequence[int], groups: int, max_elements: int = 1 << 22) -> tuple[int, ...]:
    """The shape ``fp8ref.compare`` checks a point on (its reference runs on the CPU): the largest dim halved until
    the input has at most ``max_elements``, never below 16 elements per group, so the point's groups still fit."""
    floor = 16 * max(groups, 1)
    dims = list(shape)
    while math.prod(dims) > max_elements:
        halvable = [i for i, d in enumerate(dims) if d // 2 >= floor]
        if not halvable:
            break
        i = max(halvable, key=lambda i: dims[i])
        dims[i] //= 2
    return tuple(dims)


def make_row(
    point: Point,
    impl: str,
    us: float | None,
    eager_us: float | None,
    nbytes: int,
    copy_gbps: float,
    compile_us: float | None,
    bitwise_ok: bool | None,
    first_call_ms: float | None = None,
    config: str | None = None,
    loop_us: float | None = None,
    eager_runs: Sequence[float] = (),
    host_us: float | None = None,
) -> dict:
    """One JSON row; bandwidth and speed-up are derived from the graph time ``us`` (None where it is missing);
    ``eager_us`` is the smallest of ``eager_runs`` where they are given; ``bitwise_ok`` None for a row that is no
    implementation of the op (:func:`copy_row`)."""
    gbps = None if not us else nbytes / us / 1e3
    return {
        "op": point.op,
        "impl": impl,
        "shape": list(point.shape),
        "groups": point.groups,
        "variant": point.variant,
        "layout": point.layout,
        "us": us,
        "eager_us": min(eager_runs) if eager_runs else eager_us,
        "eager_us_runs": list(eager_runs),
        "loop_us": loop_us,
        "host_us": host_us,
        "gbps": gbps,
        "pct_of_copy_bw": None if gbps is None else 100 * gbps / copy_gbps,
        "speedup_vs_compile": None if not (us and compile_us) else compile_us / us,
        "bitwise_ok": bitwise_ok,
        "first_call_ms": first_call_ms,
        "config": config,
    }


def cell(value, fmt: str, suffix: str = "") -> str:
    """A table cell: ``value`` formatted and suffixed, ``-`` where it is missing (None)."""
    return "-" if value is None else format(value, fmt) + suffix


def bitwise_cell(ok: bool | None) -> str:
    """The bitwise column: yes, NO, or - for a row that is no implementation of the op."""
    return "-" if ok is None else "yes" if ok else "NO"


def markdown_table(rows: Sequence[dict]) -> list[str]:
    """The rows as a Markdown table, one line per row, in the given order."""
    lines = [
        "| op | impl | shape | G | variant | layout | us (graph) | eager us | loop us | host us | GB/s | % of copy "
        "| vs compile | bitwise | first call ms | config |",
        "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['op']} | {r['impl']} | {'x'.join(map(str, r['shape']))} | {r['groups']} | {r['variant']} | "
            f"{r['layout']} | {cell(r['us'], '.1f')} | {eager_cell(r)} | "
            f"{cell(r.get('loop_us'), '.1f')} | {cell(r.get('host_us'), '.1f')} | {cell(r['gbps'], '.0f')} | "
            f"{cell(r['pct_of_copy_bw'], '.0f', '%')} | {cell(r['speedup_vs_compile'], '.2f', 'x')} | "
            f"{bitwise_cell(r['bitwise_ok'])} | {cell(r.get('first_call_ms'), '.0f')} | "
            f"{r.get('config') or '-'} |"
        )
    return lines


def copy_rate(copy: dict) -> tuple[float | None, float | None, bool]:
    """(GB/s, % of copy, whether from the eager time) of a :func:`copy_row`: the faster of its graph and eager
    times. A graph of memcpys of a large buffer can take a slow path that the same copies run eagerly avoid: at
    (128, 5120, 8192) on an H100, 16 GB moved in pieces of 1 GiB, the graph took 6597 us and eager 5354 us
    (benchmarks/results/h100-s43-call27-bench.md; 6606 and 5318 in h100-s40-call27-bench.md), where the kernels'
    graph and eager times agree within 2%. The faster time is what a copy of these bytes reached; an eager time
    includes the launch, so it is the faster only where the bytes dwarf it."""
    us, eager = copy["us"], copy["eager_us"]
    if not (us and copy["gbps"]):
        return None, None, False
    from_eager = bool(eager) and eager < us
    speedup = us / eager if from_eager else 1.0
    return copy["gbps"] * speedup, copy["pct_of_copy_bw"] * speedup, from_eager


def same_bytes_lines(rows: Sequence[dict]) -> list[str]:
    """A Markdown section after the table: per implementation row of a point that has a copy row (:func:`copy_row`),
    its % of copy beside its rate as % of that copy's (GB/s over GB/s; the row's graph time against the copy's
    faster time, :func:`copy_rate`, marked ``eager`` where that is the eager one): how far the row is from what
    moving the point's bytes reached. Empty where no point has a copy row."""
    copies = {row_key(r): r for r in rows if r["impl"] == COPY_IMPL}
    lines = []
    for r in rows:
        copy = copies.get(row_key(r))
        if r["impl"] == COPY_IMPL or copy is None:
            continue
        copy_gbps, copy_pct, from_eager = copy_rate(copy)
        same = None if not (r["gbps"] and copy_gbps) else 100 * r["gbps"] / copy_gbps
        lines.append(
            f"| {r['op']} | {r['impl']} | {'x'.join(map(str, r['shape']))} | {r['groups']} | {r['variant']} | "
            f"{r['layout']} | {cell(copy_pct, '.0f', '% (eager)' if from_eager else '%')} | "
            f"{cell(r['pct_of_copy_bw'], '.0f', '%')} | {cell(same, '.0f', '%')} |"
        )
    if not lines:
        return []
    return [
        "",
        f"## Against a copy of the same bytes ({COPY_IMPL!r} rows)",
        "",
        "The copy's rate is of its faster time, graph or (marked) eager; each row's is of its graph time.",
        "",
        "| op | impl | shape | G | variant | layout | same-bytes copy: % of copy | % of copy "
        "| % of the same-bytes copy |",
        "|---|---|---|---:|---|---|---:|---:|---:|",
        *lines,
    ]


#: The row fields that name a bench point (fp8moe.bench_diff adds "impl" to name a row).
POINT_FIELDS = ("op", "shape", "groups", "variant", "layout")


def row_key(row: dict, fields: Sequence[str] = POINT_FIELDS) -> tuple:
    """The values of ``fields`` in ``row``, lists as tuples (JSON turns shapes into lists): a dict key."""
    return tuple(tuple(row[k]) if isinstance(row[k], list) else row[k] for k in fields)


def plot(rows: Sequence[dict], path: str) -> str:
    """Bar chart of % of copy bandwidth per point and implementation; returns a message (written, or why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"matplotlib is not importable: no plot written ({path})"
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    labels = list(dict.fromkeys(_point_label(r) for r in rows))
    pct = {(_point_label(r), r["impl"]): r["pct_of_copy_bw"] or 0.0 for r in rows}
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(labels)), 7))
    width = 0.8 / max(len(impls), 1)
    for i, impl in enumerate(impls):
        heights = [pct.get((p, impl), 0.0) for p in labels]
        ax.bar([x + i * width for x in range(len(labels))], heights, width, label=impl)
    ax.axhline(85, color="gray", linestyle="--", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels, rotation=90, fontsize=7)
    ax.set_ylabel("% of copy bandwidth (CUDA-graph time)")
    ax.set_ylim(0, 110)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot written: {path}"


def _point_label(r: dict) -> str:
    """Short x-axis label: op without its suffix, shape, G, and only the non-default variant and layout."""
    op = r["op"].replace("_scale_and_cast", "").replace("_scales", "").replace("per_group_", "pg_")
    extras = [v for v in r["variant"].split(",") if v not in ("-", "offs=aligned16")]
    extras += [r["layout"]] if r["layout"] != "row_major" else []
    g = f" G{r['groups']}" if r["groups"] > 1 else ""
    return " ".join([f"{op} {'x'.join(map(str, r['shape']))}{g}", *extras])


def select_points(points: Sequence[Point], only: str | None, select: str | None) -> list[Point]:
    """The points whose op contains any of the comma-separated ``only`` substrings and whose '<op> <variant> <layout>'
    contains any of the comma-separated ``select`` substrings (None: no filter)."""
    ops = only.split(",") if only else None
    wanted = select.split(",") if select else None
    return [
        p
        for p in points
        if (ops is None or any(o in p.op for o in ops))
        and (wanted is None or any(w in f"{p.op} {p.variant} {p.layout}" for w in wanted))
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments (see ``python -m fp8moe.bench --help``)."""
    p = argparse.ArgumentParser(prog="python -m fp8moe.bench", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="fp8moe-bench", help="output prefix: writes <out>.json, <out>.md, <out>.png")
    p.add_argument("--kernel", default=None, help="a callable to time as well, 'module:attr' (as fp8ref.compare)")
    p.add_argument("--like", default=None, help="the op contract --kernel follows (when its name does not say)")
    p.add_argument("--only", default=None, help="substring filters on the op name, comma-separated (any)")
    p.add_argument(
        "--compile",
        choices=("all", "first", "none"),
        default="all",
        help="torch.compile baseline at every point, at the first point of each op, or nowhere",
    )
    p.add_argument(
        "--select",
        default=None,
        help="substring filters on '<op> <variant> <layout>' of a point, comma-separated (any)",
    )
    p.add_argument("--no-fp8moe", action="store_true", help="skip fp8moe (time only --kernel and torch.compile)")
    p.add_argument("--points", choices=("issue11", "moe"), default="issue11", help="issue #11 shapes or SPEC §7's")
    p.add_argument(
        "--no-copy-rows",
        dest="copy_rows",
        action="store_false",
        help="leave out each point's size-matched copy row (a device copy of the point's ideal bytes)",
    )
    p.add_argument("--check-elements", type=int, default=1 << 20, help="input size of the shape compare checks")
    args = p.parse_args(argv)
    if args.like and not args.kernel:
        p.error("--like needs --kernel")
    return args


# ----------------------------------------------------------------------------------------------------------------
# GPU part
# ----------------------------------------------------------------------------------------------------------------


def moe_points() -> tuple[Point, ...]:
    """Every op at the SPEC §7 MoE shapes of its contract (each kwargs variant of the fp8moe spec)."""
    import fp8ref

    points = []
    for spec in fp8ref.specs():
        if not spec.kernel.startswith("fp8moe."):
            continue
        for shape, groups in zip(spec.bench_shapes, spec.bench_groups):
            for kwargs in spec.kwargs_grid:
                offs = "aligned16" if spec.contract.jagged else None
                points.append(Point(spec.name, tuple(shape), groups, offs, spec.layouts[0], dict(kwargs)))
    return tuple(points)


def make_inputs(contract, point: Point, device: str = "cuda"):
    """The point's inputs: bf16 normal values drawn on ``device`` in its layout, and its offs for jagged ops."""
    import torch

    from fp8ref.layouts import make_offs, to_memory_layout

    gen = torch.Generator(device=device).manual_seed(0)
    xs = tuple(
        to_memory_layout(torch.randn(s, generator=gen, device=device, dtype=torch.bfloat16), point.layout)
        for s in contract.input_shapes(point.shape)
    )
    offs = None
    if contract.jagged:
        length = contract.jagged_length(point.shape)
        ends = make_offs(point.offs, length, point.groups, torch.Generator().manual_seed(0))
        offs = torch.tensor(ends, dtype=torch.int32, device=device)
    return xs, offs


def same_outputs(out, expected) -> bool:
    """Same number of outputs, each with the same dtype, shape, strides and bits (NaN as a class): :func:`mismatch`
    finds nothing."""
    return not mismatch(out, expected)


def mismatch(out, expected) -> str:
    """Why ``out`` is not ``expected`` (fp8ref.testing.assert_same_bits' message for the first output that differs:
    dtype, shape, strides, or how many elements differ and the first few); "" when every output matches."""
    from fp8ref.testing import assert_same_bits

    if len(out) != len(expected):
        return f"{len(out)} outputs, expected {len(expected)}"
    for i, (a, b) in enumerate(zip(out, expected)):
        if a.stride() != b.stride():  # assert_same_bits skips the strides of empty tensors; the bench checks them
            return f"output {i}: strides {a.stride()}, expected {b.stride()}"
        try:
            assert_same_bits(a, b, what=f"output {i}")
        except AssertionError as e:
            return str(e)
    return ""


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy of a 2 GiB buffer, read + write bytes: the roofline every point is measured against.

    Timed after 300 ms of copies: measured first thing in a process on an idle H200 (SM clock 345 MHz), the copy
    gave 2773 GB/s instead of ~4250 (benchmarks/results/h200-configs-2026-12-01.md).
    """
    import torch
    from triton.testing import do_bench

    src = torch.empty(2**30, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    do_bench(lambda: dst.copy_(src), warmup=300, rep=100)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200)
    return 2 * 2**30 * 2 / ms / 1e6


#: Eager time is timed twice per call, before and after its graph replays; the table gives the smaller and marks a
#: pair further apart than this (us), the larger in brackets. One pair was 98.9 against 227.6 us (H100, session 32,
#: dual random16) while the back-to-back loop timed right after gave 102.9: a host stall inside one run, not the call.
EAGER_DISAGREE_US = 10.0


def _time(fn) -> tuple[float | None, tuple[float, float]]:
    """(graph us or None when the call cannot be captured, eager us of one run before the graph's and one after)."""
    from triton.testing import do_bench, do_bench_cudagraph

    before = do_bench(fn, warmup=10, rep=50) * 1e3
    try:
        graph = do_bench_cudagraph(fn, rep=50) * 1e3
    except Exception as exc:  # reported, never fatal: eager time stands alone then
        print(f"  CUDA graph capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        graph = None
    after = do_bench(fn, warmup=10, rep=50) * 1e3
    return graph, (before, after)


def eager_cell(row: dict) -> str:
    """The eager column: the smaller of the row's eager runs, the larger in brackets where they disagree by more than
    EAGER_DISAGREE_US (rows of older benches carry one eager time and no runs)."""
    runs = row.get("eager_us_runs") or []
    text = cell(row["eager_us"], ".1f")
    if runs and max(runs) - min(runs) > EAGER_DISAGREE_US:
        text += f" ({max(runs):.1f})"
    return text


#: Batches of :func:`loop_us`, the wall time one batch aims at (long against a sync, short against the budget), and
#: the fewest calls in a batch: the first launch's host latency and the closing sync (~100 us on the H200 host) are
#: spread over the batch's calls, so with 5 calls they added ~20 us to each (the 24-119 us gaps of the
#: multi-millisecond points, h200-bench-2026-12-02-s8-summary.md); 20 calls bring that to ~5 us.
LOOP_BATCHES = 5
LOOP_BATCH_US = 2000.0
LOOP_MIN_CALLS = 20


def loop_us(fn, device: str, per_call_us: float, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median over LOOP_BATCHES of the wall time per call of ``fn`` called back to back, the device synchronized
    after each batch; a batch has enough calls to last about LOOP_BATCH_US at ``per_call_us``, at least
    LOOP_MIN_CALLS and at most 1000. ``clock``: seconds (tests pass their own)."""
    calls = max(LOOP_MIN_CALLS, min(1000, int(LOOP_BATCH_US / max(per_call_us, 1.0))))
    fn()
    _sync(device)
    per_batch = []
    for _ in range(LOOP_BATCHES):
        start = clock()
        for _ in range(calls):
            fn()
        _sync(device)
        per_batch.append((clock() - start) / calls * 1e6)
    return sorted(per_batch)[len(per_batch) // 2]


#: Bursts of :func:`host_us` and the calls in each: ten calls are far under the depth of the device's launch queue,
#: so no call of a burst waits for the device, however long the device takes to run them.
HOST_BURSTS = 20
HOST_BURST_CALLS = 10


def host_us(fn, device: str, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median over HOST_BURSTS of the wall time per call of HOST_BURST_CALLS calls of ``fn`` enqueued right after a
    device sync (no sync inside a burst): the host's time per call. ``clock``: seconds (tests pass their own)."""
    per_burst = []
    for _ in range(HOST_BURSTS):
        _sync(device)
        start = clock()
        for _ in range(HOST_BURST_CALLS):
            fn()
        per_burst.append((clock() - start) / HOST_BURST_CALLS * 1e6)
    _sync(device)
    return sorted(per_burst)[len(per_burst) // 2]


def _sync(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _checked(fn_or_path, contract, point: Point, kwargs: dict, max_elements: int, device: str) -> bool:
    """fp8ref.compare on the reduced shape of the point."""
    from fp8ref import compare

    report = compare(
        fn_or_path,
        reduced_shape(point.shape, point.groups, max_elements),
        like=contract.name,
        offs=point.offs,
        groups=point.groups,
        layout=point.layout,
        device=device,
        **kwargs,
    )
    if not report.ok:
        print(f"  compare failed: {str(report)[:2000]}", file=sys.stderr)
    return bool(report.ok)


#: The copy row's buffers are a whole number of COPY_ROUND_BYTES, copied in pieces of at most COPY_PIECE_BYTES. On
#: an H100 (session 40, benchmarks/results/h100-s40-call27-bench.md) buffers of exactly half a point's bytes copied at
#: 94-100% of the 2 GiB copy where their size was a multiple of 4 KiB and under 4 GiB, at 77-79% (graph and eager
#: alike) at the three sizes that were not (rowwise 2D, colwise 3D at E = 1), and at 81% in a CUDA graph (100% eager)
#: at the 8 GB buffers of (128, 5120, 8192): the copy's own slow paths, not the size's cost.
COPY_ROUND_BYTES = 2 << 20
COPY_PIECE_BYTES = 1 << 30


def copy_row(point: Point, nbytes: int, copy_gbps: float, device: str = "cuda") -> dict:
    """The point's size-matched copy: ``dst.copy_(src)`` of two bf16 buffers of half of ``nbytes`` each (read plus
    written, the point's ideal bytes), rounded up to whole COPY_ROUND_BYTES and copied in pieces of at most
    COPY_PIECE_BYTES, timed as the implementations are (:func:`_time`); its rate is of the bytes it moved. The 2 GiB
    copy that ``copy_gbps`` comes from spreads a launch's fixed costs (the launch, the first loads' latency, a last
    wave that leaves SMs idle) over 2 GiB; a 100 MB point pays them on its own bytes, so this row's
    ``pct_of_copy_bw`` is what a copy of the point's size reached on this device, and a kernel's shortfall beyond it
    is not its size's. Not an implementation of the op: ``bitwise_ok`` and ``speedup_vs_compile`` None."""
    pieces = copy_pieces(nbytes, device)

    def copy():
        for src, dst in pieces:
            dst.copy_(src)

    moved = 2 * sum(src.nbytes for src, _ in pieces)
    graph, eager_runs = _time(copy)
    return make_row(point, COPY_IMPL, graph, None, moved, copy_gbps, None, None, eager_runs=eager_runs)


def copy_pieces(nbytes: int, device: str) -> list[tuple]:
    """(source, destination) bf16 pieces of :func:`copy_row`'s two buffers: half of ``nbytes`` each, rounded up to
    whole COPY_ROUND_BYTES, split into pieces of at most COPY_PIECE_BYTES."""
    import torch

    buffer_bytes = -(-max(nbytes // 2, 1) // COPY_ROUND_BYTES) * COPY_ROUND_BYTES
    src = torch.randn(buffer_bytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    return list(zip(src.split(COPY_PIECE_BYTES // 2), dst.split(COPY_PIECE_BYTES // 2), strict=True))


def bench_point(
    point: Point, impls: dict[str, Callable], copy_gbps: float, check_elements: int, device: str = "cuda",
    copy_reference: bool = False,
) -> list[dict]:  # fmt: skip
    """Check and time every implementation at one point; rows in ``impls`` order (torch.compile first if present),
    then the point's :func:`copy_row` where ``copy_reference``."""
    import torch

    from fp8ref.contracts import contract

    c = contract(point.op)
    xs, offs = make_inputs(c, point, device)
    args = {"fp8_dtype": torch.float8_e4m3fn, "round_scales_to_power_of_2": False}
    expected = c.call(c.reference, xs, offs, **args) if impls else None  # none with only the copy row to time
    nbytes = ideal_bytes(c, point.shape, point.groups, xs[0].element_size())
    timed = {}
    for name, fn in impls.items():
        # The point's kwargs select an fp8moe variant (e.g. method="atomic"); other implementations take none.
        kwargs = point.kwargs if name == "fp8moe" else {}

        def call(fn=fn, kwargs=kwargs):
            return c.call(fn, xs, offs, **args, **kwargs)

        if name == "fp8moe" and point.offs:
            _forget_tuning(point)
        _sync(device)
        start = time.perf_counter()
        out = call()
        _sync(device)
        first_ms = (time.perf_counter() - start) * 1e3
        why = mismatch(out, expected)
        ok = not why
        if why:  # the bench's log says why (the compare check below prints its own report)
            where = f"{point.op} {'x'.join(map(str, point.shape))} G{point.groups} {point.variant} {point.layout}"
            print(f"  {where} {name}: the full-shape output differs: {why}", file=sys.stderr)
        if name != "torch.compile":  # compiled reference: a reduced shape would cost a recompile (dynamic=False)
            ok = ok and _checked(fn, c, point, kwargs, check_elements, device)
        del out
        if name == "fp8moe":  # report the configs of the kernels the timed calls launch, none left from the checks
            _forget_launch_configs(point)
        graph, eager_runs = _time(call)
        loop = loop_us(call, device, graph or min(eager_runs))
        host = host_us(call, device)
        config = _launch_configs(point, name)
        timed[name] = (graph, eager_runs, loop, host, ok, first_ms if name == "fp8moe" else None, config)
    compile_us = timed.get("torch.compile", (None,))[0]
    rows = [
        make_row(point, name, g, min(e), nbytes, copy_gbps, compile_us, ok, first, config, loop, e, host)
        for name, (g, e, loop, host, ok, first, config) in timed.items()
    ]
    if copy_reference:
        rows.append(copy_row(point, nbytes, copy_gbps, device))
    return rows


def _launch_configs(point: Point, impl: str) -> str | None:
    """The launch configs fp8moe's kernels ran with at the point (after its timed calls: the autotuner's choice), in
    launch order, ``+``-joined; None for other implementations."""
    if impl != "fp8moe":
        return None
    from fp8moe import configs

    return "+".join(
        configs.describe(configs.LAST_CONFIG[k.name]) for k in config_lists(point) if k.name in configs.LAST_CONFIG
    )


def config_lists(point: Point):
    """The KernelConfigs lists fp8moe's kernels may run with at the point (fp8moe.configs.CONFIGS_BY_SPEC; a jagged
    op's call may run a cooperative kernel as well, fp8moe.configs.PER_GROUP_KERNEL; colwise 3D the cooperative
    slice kernel, fp8moe.configs.COLWISE_3D_KERNEL; and the atomic transpose either of its kernels,
    fp8moe.configs.TRANSPOSE_ATOMIC_KERNEL)."""
    from fp8moe import configs

    method = point.kwargs.get("method")
    lists = configs.CONFIGS_BY_SPEC[f"{point.op}[{method}]" if method else point.op]
    if point.op.startswith("per_group"):
        cooperative = [k for ks in configs.COOPERATIVE_LISTS.values() for k in ks]
        lists = (*lists, *(k for k in cooperative if k not in lists))
    if point.op == "colwise_3d_scale_and_cast":
        lists = (*lists, configs.COOP_COLUMNS)
    if method == "atomic":
        both = (configs.TRANSPOSE_AMAX, configs.TRANSPOSE_QUANTIZE, configs.COOP_TRANSPOSE)
        lists = (*lists, *(k for k in both if k not in lists))
    return lists


def _forget_launch_configs(point: Point) -> None:
    """Drop the point's lists from fp8moe.configs.LAST_CONFIG, so that only launches after this call report."""
    from fp8moe import configs

    for k in config_lists(point):
        configs.LAST_CONFIG.pop(k.name, None)


def _forget_tuning(point: Point) -> None:
    """Make fp8moe's first call at a jagged point autotune on the point's own group layout
    (fp8moe.configs.forget_tuning): the row then says what a process whose calls all have this layout gets, not
    what the tile tuned at the previous layout of the same shape gives here."""
    from fp8moe import configs

    configs.forget_tuning(k.name for k in config_lists(point))


def _compiled_reference(op: str):
    import torch

    from fp8ref.contracts import contract

    ref = contract(op).reference
    return torch.compile(lambda *a, **k: ref(*a, **k), dynamic=False)


class Stopped(BaseException):
    """SIGTERM arrived (e.g. from ``timeout``) inside :func:`sigterm_stops`. A BaseException, like
    KeyboardInterrupt, so that handlers of ordinary errors (one failing point) let it through."""


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Stopped` instead of killing the process, so a time limit still lets
    the caller write what it has; the previous handler is restored on exit."""

    def stop(signum, frame):
        raise Stopped(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m fp8moe.bench``; returns the exit status.

    Times every selected point, printing its table rows and rewriting ``<out>.json`` and ``<out>.md`` after each (a
    time limit keeps what was measured), then plots ``<out>.png``, also when SIGTERM (``timeout``) cuts the run
    short. A point whose benchmark raises is reported on stderr and skipped; the others still run.

    Args:
        argv: the command-line arguments (see :func:`parse_args`); None reads ``sys.argv``.

    Returns:
        0 when every timed implementation was bitwise correct at every point (``bitwise_ok``), 1 otherwise, 3 when
        SIGTERM stopped the run before its last point.
    """
    args = parse_args(argv)
    import torch

    import fp8moe  # before triton: without a GPU it turns the interpreter on

    # isort: split
    import triton

    from fp8ref.engine.comparator import resolve_kernel

    points = select_points(ISSUE11_POINTS if args.points == "issue11" else moe_points(), args.only, args.select)
    foreign = resolve_kernel(args.kernel, args.like) if args.kernel else None
    if foreign is not None:
        points = [p for p in points if p.op == foreign.op]
    copy_gbps = copy_bandwidth_gbps()
    env = (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
        f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"copy bandwidth {copy_gbps:.0f} GB/s"
    )
    if fp8moe.backend_for(torch.device("cuda")).dependent_launch:
        env += "; span kernels as dependent launches (FP8MOE_PDL=1)"
    print(env, flush=True)
    rows: list[dict] = []
    compiled_ops: set[str] = set()
    stopped = False
    try:
        with sigterm_stops():
            for point in points:
                impls: dict[str, Callable] = {}
                if args.compile == "all" or (args.compile == "first" and point.op not in compiled_ops):
                    impls["torch.compile"] = _compiled_reference(point.op)
                    compiled_ops.add(point.op)
                if not args.no_fp8moe:
                    impls["fp8moe"] = getattr(fp8moe, point.op)
                if foreign is not None:
                    impls[foreign.label] = foreign.fn
                try:
                    new = bench_point(point, impls, copy_gbps, args.check_elements, copy_reference=args.copy_rows)
                except Exception as exc:  # one broken point must not lose the others' numbers
                    print(f"{point}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                    continue
                rows.extend(new)
                for line in markdown_table(new)[2:]:
                    print(line, flush=True)
                torch._dynamo.reset()
                torch.cuda.empty_cache()
                _write(args.out, env, copy_gbps, rows)  # after every point: a time limit keeps what was measured
    except Stopped:
        stopped = True
        print(f"stopped by SIGTERM after {len({_point_label(r) for r in rows})} points", file=sys.stderr, flush=True)
    print(plot(rows, f"{args.out}.png"))
    if stopped:
        return 3
    return 0 if every_implementation_bitwise(rows) else 1


def every_implementation_bitwise(rows: Sequence[dict]) -> bool:
    """Every row of an implementation has ``bitwise_ok`` (the copy rows, None there, are no implementation)."""
    return all(r["bitwise_ok"] is not False for r in rows)


def markdown_document(env: str, rows: Sequence[dict]) -> str:
    """``<out>.md``: the env line, the table, the rows against a copy of their bytes and against issue #11's
    targets (:mod:`fp8moe.bench_targets`)."""
    from fp8moe.bench_targets import target_lines  # it imports this module's cells

    return "\n".join(
        [f"# fp8moe bench: {env}", "", *markdown_table(rows), *same_bytes_lines(rows), *target_lines(rows)]
    )


def _write(out: str, env: str, copy_gbps: float, rows: list[dict]) -> None:
    with open(f"{out}.json", "w") as f:
        json.dump({"env": env, "copy_gbps": copy_gbps, "rows": rows}, f, indent=1)
    with open(f"{out}.md", "w") as f:
        f.write(markdown_document(env, rows) + "\n")


if __name__ == "__main__":
    sys.exit(main())
