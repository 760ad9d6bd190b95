"""What unaligned group edges cost the span kernel: the same shape under aligned and unaligned group layouts, with
the span loop's edge code intact and with parts of it removed (timing-only variants), one process per variant.

    python benchmarks/probe_unaligned.py                    # every variant, one subprocess each; a Markdown table
    python benchmarks/probe_unaligned.py --variant no_edges # one variant, JSON lines

Why: at 16640 x 2048, G = 64 the colwise op runs 39.8 us on 16-aligned groups and 56.4 us on balanced unaligned
ones (`empty_middle`), 63.3 us on random sizes (benchmarks/results/h200-s17-call1-bench-main.md), and loading the
edges ahead of the interior changed none of it (h200-s17-summary.md). The layouts separate alignment from
imbalance:

- ``aligned16``: group sizes multiples of 16 (256 or 272 positions);
- ``shifted8``: the same groups with every inner boundary moved 8 positions later (first group 8 longer, last 8
  shorter): the same balance, every edge unaligned;
- ``empty_middle``: 63 groups of 264-265 positions and an empty one (unaligned, balanced);
- ``random``: uniform random cuts (unaligned and unbalanced);
- ``random16``: the same cuts moved down to multiples of 16 (unbalanced, aligned): ``random`` against ``random16``
  is what the edges cost at random sizes, ``random16`` against ``aligned16`` what the imbalance costs (the ledger's
  untested question, per-group-ledger.md).

The variants replace functions of fp8moe.kernels._span before anything compiles (Triton resolves a kernel's callees
from the module's globals when it first compiles it, so each variant runs in a fresh process):

- ``main``: the span loop as it is; its outputs are checked against fp8ref on the same inputs;
- ``no_edge_stores``: the edges are loaded and folded into the amax but never stored;
- ``no_edges``: the edges are neither loaded nor stored (pass 1 over the aligned interior alone);
- ``edges_beside_first_tile``: a candidate fix, exact. On the transposing view pass 2 issues both partial edges'
  loads and its interior's first tile load together, casts and stores the edges while that tile is in flight, then
  runs the interior loop: the edges' round trip overlaps the interior's first one and no edge register lives
  across the loop. Other views and one-read spans are unchanged.
- ``deferred_edges``, ``deferred_edges_w32``, ``deferred_edges_w128`` (session 47): candidate fixes, exact. The op
  without its edge stores, then a kernel of its own (:func:`launch_edge_chunks`) casting the 16-, 32- or 128-column
  window around each unaligned group end as whole vector rows; ``edge_chunks*_alone`` time that kernel by itself.
  On an H100 the 32-column windows took 0.91-0.98x main's time at the colwise op's unaligned layouts, 1.7-2.1 us
  more at aligned ones, and 1.2-1.5x on the rowwise op (benchmarks/results/h100-s47-call44-unaligned.md).

Session 18's first run (benchmarks/results/h200-s18-call2-unaligned.md) had a fourth variant, pass 1 folding the
edges into its elementwise loop on the transposing view: exact and 8-9% faster at the unaligned colwise points, it
is now main (fp8moe.kernels._span._span_amax_packed). That run also found that the edges' stores are most of what
unaligned groups cost the colwise op (16640 x 2048, G = 64, every edge 8 positions off: 62.4 us, 47.7 us without
the edge stores, 42.8 us without any edge code, 39.6 us at 16-aligned groups). Its second run
(h200-s18-call3-unaligned.md) refuted one explanation of the stores' cost: joining each edge into words before its
layout exchange, as the interior is (``packed_edge_stores``), ran 57.3 against 57.0 us on ``shifted8``. Nsight
Compute found the same DRAM bytes at aligned and unaligned groups, with longer long-scoreboard stalls at the
unaligned ones (h200-s18-call4-ncu.md): the edges cost latency, not bytes. The third run
(h200-s18-call5-unaligned.md) refuted folding the edges into pass 2's loop as pass 1 does (``edges_in_pass2_loop``,
commit 89ed605: a tile holding a partial edge stored with an exact mask, byte stores across the whole tile): 2.1-2.4x
slower (shifted8 122.3 against 56.7 us). The fourth (h200-s18-call6-unaligned.md) refuted loading both edges before
the interior loop and storing them after it (``edges_loaded_first``, commit 63be448): 1.14-1.18x slower at every
colwise layout, aligned16 included (45.7 against 38.7 us), where the edges are empty: the edge registers held across
the loop cost more than the round trip they hide. The fifth (h200-s18-call7-unaligned.md) measured the candidate
below: 0.99x at random cuts, 1.03-1.06x slower at the other unaligned layouts; not kept.

The two removal variants write wrong codes at the edges on purpose: they are timed, never used, and the script
checks that their outputs do differ from the reference where a layout has unaligned edges (so a variant that did
not take effect cannot post a time). If ``no_edges`` on ``shifted8`` runs as fast as ``aligned16``, the edge code
is the whole cost and ``no_edge_stores`` says how much of it the stores are; if not, the cost lies in the interior
or the stores' sectors, and Nsight Compute's DRAM bytes at both layouts are the next measurement
(benchmarks/profile_kernels.py).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys

import torch

import fp8moe  # before triton: without a GPU it turns the interpreter on first

# isort: split
import triton
import triton.language as tl

from fp8moe.kernels import _span
from fp8moe.kernels._common import quantize

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the sibling scripts run_variant imports (probe_per_group_kernels, tune_configs)
    sys.path.insert(0, _HERE)

#: The edge-chunk variants (:func:`launch_edge_chunks`) and the window each writes around an unaligned group end:
#: ``deferred_edges*`` run the op without its edge stores, then the edge-chunk kernel; ``edge_chunks*_alone`` time
#: that kernel by itself, on what the unchanged op wrote. 16 columns: only the edge chunk, half a 32-byte sector of
#: q (fp8); 32: the whole sector; 128: the whole 128-byte L2 line (the op's codes rewritten, the same bytes).
EDGE_CHUNK_WIDTHS = {
    "deferred_edges": 16, "deferred_edges_w32": 32, "deferred_edges_w128": 128,
    "edge_chunks_alone": 16, "edge_chunks_w32_alone": 32, "edge_chunks_w128_alone": 128,
}  # fmt: skip
VARIANTS = ("main", "no_edge_stores", "no_edges", "edges_beside_first_tile", *EDGE_CHUNK_WIDTHS)
#: The variants whose outputs must stay bitwise (candidate fixes); the others are timing only.
EXACT_VARIANTS = ("main", "edges_beside_first_tile", *EDGE_CHUNK_WIDTHS)
LAYOUTS = ("aligned16", "shifted8", "empty_middle", "random", "random16")
#: (op, shape, groups): the colwise op of the bench's unaligned points and the rowwise op of its random point.
POINTS = (
    ("per_group_colwise_scales", (16640, 2048), 64),
    ("per_group_rowwise_scales", (5120, 16640), 64),
)
#: On CUDA every variant runs each of these tiles, forced: the same tiles in every variant, and one compile per
#: view and tile instead of one per candidate. Session 18 ran the tiles the autotuner chose on main then
#: (h200-s17-call1-bench-main.md: colwise 64x128/w4, rowwise 32x128/w8 plain); since session 47 they are the tiles
#: the autotuner chose on an H100 in session 46 (h100-s46-call23-bench.json): colwise 64x128/w4/g/ev1 at aligned
#: groups (what the deferred edges leave the op; session 47's call 43 also ran 32x128/w8/g/t/ev1, the choice at
#: random ones, slower without its edge stores at every unaligned layout), rowwise 32x128/w8/g/t/ev1.
CUDA_TILES = {
    "per_group_colwise_scales": ("64x128/w4/g/ev1",),
    "per_group_rowwise_scales": ("32x128/w8/g/t/ev1",),
}
#: ``--small``: shapes the interpreter runs in seconds (a smoke run of the script on the CPU).
SMALL_POINTS = (("per_group_colwise_scales", (64, 32), 4), ("per_group_rowwise_scales", (8, 64), 4))
E4 = torch.float8_e4m3fn


@triton.jit
def _no_edges_amax(
    x_rows, row_mask, start, end, stride_xk, BLOCK_R: tl.constexpr, INT64_INDEX: tl.constexpr,
    EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Timing only: the edges are not loaded (amax 0)."""
    return tl.zeros((BLOCK_R,), dtype=tl.float32)


@triton.jit
def _no_edges_reload_cast(
    x_rows, q_rows, row_mask, start, end, stride_xk, scale, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Timing only: the edges are neither reloaded nor stored."""


@triton.jit
def _interior_only_amax(
    x_rows, row_mask, start, end, stride_xk, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, PACK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = _span.NO_HINT, EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Timing only: span_amax over the aligned interior alone (the edges not loaded)."""
    inner_lo = (start + 15) // 16 * 16
    inner_hi = tl.maximum(end // 16 * 16, inner_lo)
    if PACK_K == 4 and BLOCK_K >= 4:
        amax = _span._span_amax_packed(
            x_rows, row_mask, inner_lo, inner_hi, stride_xk, BLOCK_R, BLOCK_K // 4, INT64_INDEX, EVICT
        )
    else:
        amax = _span._interior_amax(
            x_rows, row_mask, inner_lo, inner_hi, stride_xk, BLOCK_R, BLOCK_K, INT64_INDEX, EVICT
        )
    return amax


_CAST_SPAN = _span.cast_span  # the original, which the candidate calls for the views it leaves alone


@triton.jit
def _cast_span_edges_beside_first_tile(
    x_rows, q_rows, row_mask, start, end, stride_xk, scale,
    BLOCK_K: tl.constexpr, PACK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EVICT: tl.constexpr = _span.NO_HINT, STORE_EVICT: tl.constexpr = _span.NO_HINT,
    EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Candidate, exact: on transposing views pass 2 issues both partial edges' loads (exact masks, no branch) and
    the interior's first tile load together, casts and stores the edges (each in its branch) while that tile is in
    flight, then runs the interior loop: the edges' round trip overlaps the interior's first one, and no edge
    register lives across the loop. Other views as before."""
    if PACK_K == 4 and BLOCK_K >= 4:
        BLOCK_W: tl.constexpr = BLOCK_K // 4
        inner_lo, inner_hi, head_cols, head_hi, tail_cols, tail_lo = _span._span_edges(start, end)
        x_head = _span._load_cols(x_rows, row_mask, head_cols, start, head_hi, stride_xk, INT64_INDEX)
        x_tail = _span._load_cols(x_rows, row_mask, tail_cols, tail_lo, end, stride_xk, INT64_INDEX)
        num_tiles = tl.cdiv(inner_hi - inner_lo, BLOCK_K)
        last = inner_lo + (num_tiles - 1) * BLOCK_K
        n0, n1, n2, n3 = _span.load_quad(
            x_rows, row_mask, last, inner_lo, inner_hi, stride_xk, BLOCK_W, INT64_INDEX, EVICT
        )
        if start < head_hi:
            q_head = quantize(x_head, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            _span._store_cols(q_rows, row_mask, head_cols, start, head_hi, q_head, INT64_INDEX)
        if tail_lo < end:
            q_tail = quantize(x_tail, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            _span._store_cols(q_rows, row_mask, tail_cols, tail_lo, end, q_tail, INT64_INDEX)
        for i in range(num_tiles):  # _span._interior_cast_packed's loop, its first tile loaded above
            k0 = last - i * BLOCK_K
            x0, x1, x2, x3 = n0, n1, n2, n3
            n0, n1, n2, n3 = _span.load_quad(
                x_rows, row_mask, k0 - BLOCK_K, inner_lo, inner_hi, stride_xk, BLOCK_W, INT64_INDEX, EVICT
            )
            _span.store_quad(
                q_rows, row_mask, k0, inner_hi, x0, x1, x2, x3, scale[:, None], BLOCK_W, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, STORE_EVICT,
            )  # fmt: skip
    else:
        _CAST_SPAN(
            x_rows, q_rows, row_mask, start, end, stride_xk, scale, BLOCK_K, PACK_K, INT64_INDEX, FP8_DTYPE,
            FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, EVICT, STORE_EVICT, EDGE_LOOP,
        )  # fmt: skip


@triton.jit
def _edge_chunks_kernel(
    x_ptr, q_ptr, scales_ptr, offs_ptr, R, K, G, stride_xr, stride_xk, stride_qr,
    BLOCK_R: tl.constexpr, WIDTH: tl.constexpr, SEARCH_STEPS: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Candidate, exact for valid offs: around every group boundary that is not a multiple of 16, the WIDTH-column
    window that holds it (a multiple of 16 columns from a multiple of WIDTH), cast after the op has written its
    scales, as whole rows of WIDTH codes.

    Program (b, r): group boundary offs[b] and rows [r * BLOCK_R, +BLOCK_R) of the (R, K) view. It writes the window
    floorWIDTH(offs[b]) when offs[b] is unaligned and the boundary before it is not also unaligned inside that window
    (so the window's first unaligned boundary writes it; a window in which an aligned boundary separates two
    unaligned ones is written twice, the same bytes). Each column t takes the group searchsorted(offs, t, right)
    finds (SEARCH_STEPS halvings of [0, G]), and that group's scale for each row; columns at or past offs[-1] (and
    K) belong to no group and stay unwritten. Where the window lies wholly before offs[-1] the store's mask is
    constant along it, so each row's codes go out as vectors.
    """
    b = tl.program_id(0)
    pid_r = tl.program_id(1)
    boundary = tl.load(offs_ptr + b)
    chunk = boundary // WIDTH * WIDTH
    prev = tl.load(offs_ptr + b - 1, mask=b > 0, other=0)
    if (boundary % 16 != 0) & ((prev % 16 == 0) | (prev < chunk)):
        last = tl.load(offs_ptr + G - 1)
        cols = chunk + tl.arange(0, WIDTH)
        lo = tl.zeros((WIDTH,), dtype=tl.int32)
        hi = tl.zeros((WIDTH,), dtype=tl.int32) + G
        for _ in tl.static_range(SEARCH_STEPS):  # group(t) = #{j : offs[j] <= t}
            mid = (lo + hi) // 2
            at_mid = tl.load(offs_ptr + mid, mask=mid < G, other=0)
            right = (at_mid <= cols) & (mid < hi)
            lo = tl.where(right, mid + 1, lo)
            hi = tl.where(right, hi, mid)
        group = tl.minimum(lo, G - 1)
        rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
        row_mask = rows < R
        if chunk + WIDTH <= tl.minimum(last, K):
            _cast_edge_chunk(
                x_ptr, q_ptr, scales_ptr, rows, row_mask, cols, group, R, K, last, stride_xr, stride_xk, stride_qr,
                False, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
            )  # fmt: skip
        if chunk + WIDTH > tl.minimum(last, K):
            _cast_edge_chunk(
                x_ptr, q_ptr, scales_ptr, rows, row_mask, cols, group, R, K, last, stride_xr, stride_xk, stride_qr,
                True, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
            )  # fmt: skip


@triton.jit
def _cast_edge_chunk(
    x_ptr, q_ptr, scales_ptr, rows, row_mask, cols, group, R, K, last, stride_xr, stride_xk, stride_qr,
    CUT: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr,
    FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """One window's rows cast with their columns' group scales. CUT: the window reaches offs[-1] or K, so the
    columns at or past it are masked (per-column masks: scalar accesses); else every mask is constant along the
    window, and its loads and stores stay vectors (sm_90 PTX: one st.global.v4 per thread; with the two stores in
    one if/else, the compiler merged them into one store under a selected mask, 16 st.global.b8)."""
    mask = row_mask[:, None]
    if CUT:
        mask = mask & ((cols < last) & (cols < K))[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xk, mask=mask, other=0.0)
    scale = tl.load(scales_ptr + group[None, :] * R + rows[:, None], mask=mask, other=1.0)
    q = quantize(x, scale, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    tl.store(q_ptr + rows[:, None] * stride_qr + cols[None, :], q, mask=mask)


def launch_edge_chunks(
    x: torch.Tensor, offs: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, width: int = 16, elements: int = 2048
) -> None:
    """Cast the windows of ``width`` columns around the unaligned group ends of an (R, K) view jagged along K into
    its row-major q, with the scales (G * R,) the op wrote (:func:`_edge_chunks_kernel`; ``elements`` per program);
    no host sync."""
    from fp8moe.backend import backend_for
    from fp8moe.kernels._common import fp8_constexprs

    rows, cols = x.shape
    groups = offs.numel()
    backend = backend_for(x.device)
    block_r = max(1, elements // width)
    _edge_chunks_kernel[(groups, triton.cdiv(rows, block_r))](
        x, q, scales, offs, rows, cols, groups, x.stride(0), x.stride(1), q.stride(0),
        BLOCK_R=block_r, WIDTH=width, SEARCH_STEPS=max(1, groups.bit_length()),
        **{k: v for k, v in fp8_constexprs(q.dtype, False, backend.cast_mode).items() if k != "ROUND_POW2"},
    )  # fmt: skip


def apply_variant(variant: str) -> None:
    """Replace the span loop's edge functions for ``variant`` (one of VARIANTS); before any kernel compiles."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {VARIANTS}")
    if variant in ("no_edge_stores", "no_edges") or variant.startswith("deferred_edges"):
        _span._edges_cast = _no_edges_reload_cast
    if variant == "no_edges":
        _span._edges_amax = _no_edges_amax
        _span.span_amax = _interior_only_amax
    if variant == "edges_beside_first_tile":
        _span.cast_span = _cast_span_edges_beside_first_tile


def layout_offs(layout: str, length: int, groups: int) -> tuple[int, ...]:
    """End offsets of ``layout`` (LAYOUTS): fp8ref.layouts' named layouts (``random16`` among them), plus
    ``shifted8``."""
    from fp8ref.layouts import make_offs

    if layout == "shifted8":
        aligned = make_offs("aligned16", length, groups, torch.Generator().manual_seed(0))
        return (*(min(end + 8, length) for end in aligned[:-1]), aligned[-1])
    return make_offs(layout, length, groups, torch.Generator().manual_seed(0))


def run_variant(variant: str, device: str, points=POINTS, layouts=LAYOUTS, rep: int = 30) -> list[dict]:
    """Time every (point, layout) under ``variant`` in this process (CUDA-graph replay on CUDA, with the tile of
    CUDA_TILES forced; no time elsewhere, where only the outputs are checked); each row says whether they equal
    fp8ref's bit for bit (``bitwise``)."""
    apply_variant(variant)
    from probe_per_group_kernels import use_jagged_kernel
    from tune_configs import forced

    from fp8moe import configs
    from fp8ref.contracts import contract

    use_jagged_kernel("span")
    rows = []
    for op, shape, groups in points:
        c = contract(op)
        gen = torch.Generator(device=device).manual_seed(0)
        xs = tuple(torch.randn(s, generator=gen, device=device, dtype=torch.bfloat16) for s in c.input_shapes(shape))
        for layout, tile in itertools.product(layouts, CUDA_TILES[op] if device == "cuda" else ("default",)):
            ends = layout_offs(layout, c.jagged_length(shape), groups)
            offs = torch.tensor(ends, dtype=torch.int32, device=device)
            forcing = contextlib.nullcontext()
            if device == "cuda":
                [index] = [i for i, cfg in enumerate(configs.PER_GROUP.cuda) if configs.describe(cfg) == tile]
                forcing = forced({configs.PER_GROUP.name}, index)
            with forcing:
                bitwise, us = _check_and_time(c, op, xs, offs, ends[-1], device, rep, variant)
            rows.append(
                {"variant": variant, "op": op, "shape": list(shape), "groups": groups, "layout": layout,
                 "tile": tile, "unaligned_edges": any(end % 16 for end in ends), "us": us, "bitwise": bitwise}
            )  # fmt: skip
    return rows


def _check_and_time(
    c, op: str, xs, offs, covered: int, device: str, rep: int, variant: str = "main"
) -> tuple[bool, float | None]:
    """Whether ``op``'s outputs equal fp8ref's on the same device (codes past offs[-1], ``covered``, belong to no
    group: fp8ref writes 0 there, the kernel nothing), and its CUDA-graph time in us (None off CUDA).
    ``deferred_edges*`` launch the edge-chunk kernel after the op (:func:`launch_edge_chunks`, EDGE_CHUNK_WIDTHS);
    ``edge_chunks*_alone`` time that launch alone, on outputs the op (unchanged) wrote before."""
    from fp8moe.bench import same_outputs
    from fp8ref import ops as ref_ops

    kw = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}
    jagged_dim = 0 if op == "per_group_colwise_scales" else 1
    width = EDGE_CHUNK_WIDTHS.get(variant, 16)

    def edge_chunks(out):
        q, scales = out
        if jagged_dim == 0:  # the colwise op: the kernels' (N, Ktot) view and its row-major q
            launch_edge_chunks(xs[0].t(), offs, q.t(), scales, width)
        else:
            launch_edge_chunks(xs[0], offs, q, scales, width)
        return out

    def call():
        out = c.call(getattr(fp8moe, op), xs, offs, **kw)
        return edge_chunks(out) if variant.startswith("deferred_edges") else out

    first = call()
    timed = (lambda: edge_chunks(first)) if variant.endswith("_alone") else call
    out, expected = timed(), c.call(getattr(ref_ops, op), xs, offs, **kw)
    out = (out[0].narrow(jagged_dim, 0, covered), *out[1:])
    expected = (expected[0].narrow(jagged_dim, 0, covered), *expected[1:])
    bitwise = same_outputs(out, expected)
    if device != "cuda":
        return bitwise, None
    from triton.testing import do_bench_cudagraph

    return bitwise, do_bench_cudagraph(timed, rep=rep) * 1e3


def check_rows(rows: list[dict]) -> list[str]:
    """What is wrong with a run: an exact variant (EXACT_VARIANTS) not bitwise anywhere, or a removal variant bitwise
    where the layout has unaligned edges (it did not take effect)."""
    problems = []
    for r in rows:
        where = f"{r['variant']} {r['op']} {r['layout']}"
        if r["variant"] in EXACT_VARIANTS and not r["bitwise"]:
            problems.append(f"{where}: not bitwise against fp8ref")
        if r["variant"] not in EXACT_VARIANTS and r["unaligned_edges"] and r["bitwise"]:
            problems.append(f"{where}: bitwise although its edge code was removed (the variant did not take effect)")
    return problems


def table(rows: list[dict], variants: tuple[str, ...] = VARIANTS) -> list[str]:
    """Markdown: one line per (op, tile, layout), one column per variant (us)."""
    lines = [
        "| op | shape | G | tile | layout | " + " | ".join(variants) + " |",
        "|---|---|---:|---|---|" + "---:|" * len(variants),
    ]
    keys = dict.fromkeys((r["op"], tuple(r["shape"]), r["groups"], r["tile"], r["layout"]) for r in rows)
    for op, shape, groups, tile, layout in keys:
        cells = []
        for v in variants:
            [r] = [r for r in rows if (r["variant"], r["op"], r["tile"], r["layout"]) == (v, op, tile, layout)] or [
                None
            ]
            cells.append("-" if r is None or r["us"] is None else f"{r['us']:.1f}")
        where = f"| {op} | {'x'.join(map(str, shape))} | {groups} | {tile} | {layout} | "
        lines.append(where + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, default=None, help="run one variant here (JSON lines)")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="the variants to run, comma-separated (default: all)"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="SMALL_POINTS instead of POINTS")
    parser.add_argument("--out", default=None, help="also write the Markdown table here")
    args = parser.parse_args(argv)
    if args.variant:
        for row in run_variant(args.variant, args.device, SMALL_POINTS if args.small else POINTS):
            print(json.dumps(row), flush=True)
        return 0
    variants = tuple(args.variants.split(","))
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {VARIANTS}")
    rows = []
    for variant in variants:
        run = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--variant", variant, "--device", args.device]
            + (["--small"] if args.small else []),
            capture_output=True, text=True,
        )  # fmt: skip
        if run.returncode:
            print(f"{variant}: exit {run.returncode}\n{run.stderr[-2000:]}", flush=True)
            continue
        rows += [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    lines = table(rows, variants) + [""] + [f"- {p}" for p in check_rows(rows)]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if check_rows(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
