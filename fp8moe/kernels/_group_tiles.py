"""The one-read per-group kernel: every program owns one (BLOCK_R, BLOCK_K) tile of an (R, Ktot) view jagged along
K and holds it in registers from its load to its store; the programs of one slice meet through global memory.

Why: the span kernel (fp8moe.kernels._per_group) gives each (group, row block) slice to one program, which reads the
slice twice (amax, then cast). Long slices miss L2 on the second read (1.66-1.92x the input from DRAM) and short
ones leave too few loads in flight (benchmarks/results/h200-bench-2026-12-02-s8-summary.md). Here the tiles do not
follow the groups: tile (rb, c) covers rows [rb * BLOCK_R, +BLOCK_R) and jagged positions [c * BLOCK_K, +BLOCK_K) of
the whole view, aligned, so every load and store is a full vector access, and a group is the union of the tiles it
touches. For each group g a tile touches:

- g lies inside the tile's chunk: the tile computes g's amax and scales alone.
- g crosses chunks (a *shared slice*, at most ``coop_limit`` chunks): the tile folds its partial amax into a
  workspace word per (g, row) with an integer atomic max of the f32 bit patterns (non-negative floats order as
  integers and every NaN pattern lies above inf, so the result is the NaN-keeping exact max of fp8ref), increments
  the slice's arrival count, and waits until every chunk of g has arrived. Then it reads the amax back, still
  holding its tile, and casts it: one read of x in all.
- g crosses more than ``coop_limit`` chunks (a *long slice*): its tiles fold their partial amaxes the same way but
  neither arrive nor wait (waiting on more programs than can be resident at once could deadlock; the launcher sets
  the limit to half the device's SMs). A tile that meets a long slice appends itself to a list in the workspace, and
  a second launch (PHASE_LONG, a few programs walking the list) reads those tiles again and casts the long slices'
  positions with the complete amax: two reads for long slices only, spread over all their tiles.

Progress. A program takes its tile from a ticket (an atomic counter), not from its program id, so tiles are taken in
order by programs that are running. A tile arrives at all its shared slices (at most two: the first and the last
group it meets) right after its load and only then waits, so an arrival never waits for anything: a waiting tile
needs only that the at most ``coop_limit`` tiles of its slices have started, which the ticket order and programs
still running guarantee when ``coop_limit`` programs fit on the device at once; every SM holds at least one. (H200,
2026-12-03: arriving at the last slice only after waiting for the first chained every tile of a row block to the one
before it, and the kernel ran at 2-26% of copy bandwidth, benchmarks/results/h200-s11-group-tiles.md.) Group bounds
are running maxima of the clamped offsets, so the groups a tile meets, and the tiles a slice spans, are exact
whatever the offsets: every tile a slice waits for arrives.

Positions past offs[-1] are loaded but never stored. Empty groups get their EPS scale from chunk 0's tiles. On the
interpreter, whose programs run one after another, a wait would never end: there PHASE_FUSED is split in two
launches of the same code (PHASE_AMAX folds, PHASE_CAST casts what the fused launch casts), the wait left out; the
long-slice launch is the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import (
    amax_of_magnitude_bits,
    fp8_constexprs,
    magnitude_bits,
    quantize,
    scale_from_amax,
)
from fp8moe.kernels._coop import (
    PHASE_AMAX,
    PHASE_ARRIVE,
    PHASE_CAST,
    PHASE_FUSED,
    PHASE_LONG,
    clamped_ends,
    coop_limit,
    device_multiprocessors,
    max_combine,
    view_outputs,
    wait_for_slice,
)

__all__ = [
    "INTERPRETER_LONG_PROGRAMS",
    "WorkspaceLayout",
    "launch_group_tiles",
    "long_programs",
    "quantize_group_tile",
    "quantize_long_tile",
    "run_phases",
    "tile_count",
]

#: Programs of the long-slice launch in the interpreter: two, so the walk over the list strides.
INTERPRETER_LONG_PROGRAMS = 2


class WorkspaceLayout:
    """The int32 workspace of one call, zeroed before it: two tickets (one per phase that takes tiles), the count
    and list of tiles that meet a long slice, then per view the arrival counts (G x row blocks) and the amax bits
    (G x R).

    Args:
        rows: R of each view the call quantizes.
        groups: G.
        block_r: the launch's BLOCK_R.
        tiles: the tiles of all views (the longest the list can get).
    """

    LONG_COUNT = 2
    LONG_LIST = 4

    def __init__(self, rows: tuple[int, ...], groups: int, block_r: int, tiles: int):
        self.counts: list[int] = []
        self.amax: list[int] = []
        offset = self.LONG_LIST + tiles
        for r in rows:
            self.counts.append(offset)
            offset += groups * triton.cdiv(r, block_r)
            self.amax.append(offset)
            offset += groups * r
        self.size = offset


@triton.jit
def take_ticket(ws_ptr, PHASE: tl.constexpr):
    """The launch's next tile index, in the order programs start (PHASE_CAST counts on its own ticket)."""
    if PHASE == PHASE_CAST:
        return tl.atomic_add(ws_ptr + 1, 1)
    else:
        return tl.atomic_add(ws_ptr, 1)


@triton.jit
def _group_bounds(ends, gs, g):
    """[start, end) of group g from the :func:`_clamped_ends` vector: start = max(ends[:g]), end = max(ends[:g+1]).

    Running maxima make the groups a partition of [0, max(ends)) in group order even for offsets that decrease
    (which fp8ref leaves unspecified): tiles then meet the groups in position order, which the progress argument of
    the module docstring needs, whatever the offsets.
    """
    start = tl.max(tl.where(gs < g, ends, 0))
    end = tl.max(tl.where(gs <= g, ends, 0))
    return start, end


@triton.jit
def _group_row(g, R, INT64_INDEX: tl.constexpr):
    """g * R, the first slot of group g in an (G, R) table, in int64 where offsets need it."""
    if INT64_INDEX:
        g = g.to(tl.int64)
    return g * R


@triton.jit
def _slot(table_ptr, g, R, rows, INT64_INDEX: tl.constexpr):
    """Pointers to entries (g, rows) of a (G, R) table (the scales, the workspace amax bits)."""
    return table_ptr + _group_row(g, R, INT64_INDEX) + rows


@triton.jit
def _masked_amax(x, ks, start, end):
    """max |x| over the tile's positions [start, end), per row (f32, NaN-keeping: _common.abs_max_keep_nan)."""
    in_g = (ks >= start) & (ks < end)
    return amax_of_magnitude_bits(tl.where(in_g[None, :], magnitude_bits(x), 0), x.dtype, 1)


@triton.jit
def _tile_group_scale(
    x, ks, start, end, c, g, scales_ptr, amax_ptr, R, rows, row_mask,
    BLOCK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_MAX: tl.constexpr, ROUND_POW2: tl.constexpr,
):  # fmt: skip
    """The scales of group g for the tile's rows: from the tile's own amax where g lies inside chunk c, else from
    the slice's folded amax (complete once the tile has waited for it, or in a later launch). The tile of g's first
    chunk stores them."""
    first_c = start // BLOCK_K
    if (end - 1) // BLOCK_K > first_c:
        folded = tl.atomic_max(_slot(amax_ptr, g, R, rows, INT64_INDEX), tl.zeros_like(rows).to(tl.int32),
                               mask=row_mask, sem="acquire")  # fmt: skip
        amax = folded.to(tl.float32, bitcast=True)
    else:
        amax = _masked_amax(x, ks, start, end)
    scale = scale_from_amax(amax, FP8_MAX, ROUND_POW2)
    if c == first_c:
        tl.store(_slot(scales_ptr, g, R, rows, INT64_INDEX), scale, mask=row_mask)
    return scale


@triton.jit
def _store_range(q_tile_ptrs, q, row_mask, ks, lo, hi):
    """Store q at positions [lo, hi) of the tile: the 16-aligned interior with a mask constant over 16 positions
    (16-byte stores), the partial head and tail with exact masks."""
    lo16 = (lo + 15) // 16 * 16
    hi16 = hi // 16 * 16
    if lo16 < hi16:
        tl.store(q_tile_ptrs, q, mask=row_mask[:, None] & ((ks >= lo16) & (ks < hi16))[None, :])
    head_hi = tl.minimum(lo16, hi)
    if lo < head_hi:
        tl.store(q_tile_ptrs, q, mask=row_mask[:, None] & ((ks >= lo) & (ks < head_hi))[None, :])
    tail_lo = tl.maximum(hi16, lo16)
    if tail_lo < hi:
        tl.store(q_tile_ptrs, q, mask=row_mask[:, None] & ((ks >= tail_lo) & (ks < hi))[None, :])


@triton.jit
def _tile(tile, x_ptr, offs_ptr, R, K, G, stride_xr, stride_xk,
          BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr, INT64_INDEX: tl.constexpr):  # fmt: skip
    """Tile ``tile`` (row block major, chunk minor) of an (R, K) view: its coordinates, its loaded elements (0 outside
    the view), and the groups it meets, g_lo <= g < g_hi (bounds are running maxima of the clamped ends, so the first
    group ending past k0 and the first ending at or past k1 delimit them)."""
    num_chunks = tl.maximum(tl.cdiv(K, BLOCK_K), 1)
    rb = tile // num_chunks
    c = tile % num_chunks
    rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = c * BLOCK_K
    if INT64_INDEX:
        rows = rows.to(tl.int64)
        k0 = k0.to(tl.int64)
    ks = k0 + tl.arange(0, BLOCK_K)
    k1 = k0 + BLOCK_K
    row_mask = rows < R
    x = tl.load(x_ptr + rows[:, None] * stride_xr + ks[None, :] * stride_xk,
                mask=row_mask[:, None] & (ks < K)[None, :], other=0.0)  # fmt: skip
    gs = tl.arange(0, BLOCK_G)
    ends = clamped_ends(offs_ptr, gs, G, K)
    g_lo = tl.min(tl.where((gs < G) & (ends > k0), gs, G))
    g_hi = tl.min(tl.where((gs < G) & (ends >= k1), gs + 1, G))
    return rb, c, rows, row_mask, k0, k1, ks, x, gs, ends, g_lo, g_hi


@triton.jit
def quantize_group_tile(
    x_ptr, q_ptr, scales_ptr, offs_ptr, counts_ptr, amax_ptr, R, K, G, tile, coop_limit,
    stride_xr, stride_xk, stride_qr,
    PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """PHASE_FUSED, PHASE_AMAX or PHASE_CAST of tile ``tile`` of one (R, K) view; scales[g * R + r] for its rows.
    Returns whether the tile meets a long slice (the caller lists it for PHASE_LONG).

    counts_ptr: G x cdiv(R, BLOCK_R) arrival counts, amax_ptr: G x R amax bits, both zeroed before the call.
    """
    rb, c, rows, row_mask, k0, k1, ks, x, gs, ends, g_lo, g_hi = _tile(
        tile, x_ptr, offs_ptr, R, K, G, stride_xr, stride_xk, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX
    )
    q_rows = q_ptr + rows[:, None] * stride_qr
    # Fold every multi-chunk slice, then arrive at the shared ones, then wait for them (module docstring,
    # Progress). Note the short groups: only the first and the last can be shared (a group between them lies inside
    # the chunk). [lo, hi) is what this tile stores: no long slice's positions, nothing past offs[-1].
    lo = k0
    hi = tl.minimum(k1, tl.max(ends))
    has_long = False
    touched = 0
    g_a = g_lo  # the first two short groups the tile meets, with their bounds (a tile of three or more takes the
    g_b = g_lo  # select-per-group cast below, which derives its bounds again), and the last
    start_a = k0
    end_a = k0
    g_z = g_lo
    chunks_a = 1
    chunks_z = 1
    for g in range(g_lo, g_hi):
        start, end = _group_bounds(ends, gs, g)
        chunks = (end - 1) // BLOCK_K - start // BLOCK_K + 1
        if start < end:
            if PHASE != PHASE_CAST:  # noqa: SIM102  (a constexpr test: no code for the other phase)
                if chunks > 1:
                    amax = _masked_amax(x, ks, start, end)
                    tl.atomic_max(
                        _slot(amax_ptr, g, R, rows, INT64_INDEX), amax.to(tl.int32, bitcast=True), mask=row_mask,
                        sem="release",
                    )  # fmt: skip
            if chunks > coop_limit:
                has_long = True
                if start <= k0:
                    lo = tl.maximum(lo, end)
                else:
                    hi = tl.minimum(hi, start)
            else:
                g_a = tl.where(touched == 0, g, g_a)
                start_a = tl.where(touched == 0, start, start_a)
                end_a = tl.where(touched == 0, end, end_a)
                chunks_a = tl.where(touched == 0, chunks, chunks_a)
                g_b = tl.where(touched == 1, g, g_b)
                g_z = g
                chunks_z = chunks
                touched += 1
    if PHASE == PHASE_FUSED or PHASE == PHASE_ARRIVE:  # noqa: SIM109  (constexprs: `in` is no Triton construct)
        shared_a = (touched > 0) & (chunks_a > 1)
        shared_z = (touched > 1) & (chunks_z > 1)
        count_a = counts_ptr + g_a * tl.cdiv(R, BLOCK_R) + rb
        count_z = counts_ptr + g_z * tl.cdiv(R, BLOCK_R) + rb
        tl.debug_barrier()  # every warp's folds before the arrivals (release; fp8moe.kernels._coop.arrive)
        if shared_a:
            tl.atomic_add(count_a, 1, sem="release")
        if shared_z:
            tl.atomic_add(count_z, 1, sem="release")
        if PHASE == PHASE_FUSED:
            if shared_a:
                wait_for_slice(count_a, chunks_a)
            if shared_z:
                wait_for_slice(count_z, chunks_z)
            tl.debug_barrier()  # the amax reads after the waits

    # Cast. A tile meets one or two short groups unless they are shorter than BLOCK_K: one scale select per element;
    # else a select per group. One quantize and one store either way.
    if PHASE == PHASE_FUSED or PHASE == PHASE_CAST:  # noqa: SIM109  (constexprs: `in` is no Triton construct)
        if touched > 0:
            scale_a = _tile_group_scale(
                x, ks, start_a, end_a, c, g_a, scales_ptr, amax_ptr, R, rows, row_mask, BLOCK_K, INT64_INDEX,
                FP8_MAX, ROUND_POW2,
            )  # fmt: skip
            scale_b = scale_a
            if touched >= 2:
                start_b, end_b = _group_bounds(ends, gs, g_b)
                scale_b = _tile_group_scale(
                    x, ks, start_b, end_b, c, g_b, scales_ptr, amax_ptr, R, rows, row_mask, BLOCK_K, INT64_INDEX,
                    FP8_MAX, ROUND_POW2,
                )  # fmt: skip
            scale = tl.where((ks < end_a)[None, :], scale_a[:, None], scale_b[:, None])
            if touched > 2:
                for g in range(g_b + 1, g_hi):
                    start, end = _group_bounds(ends, gs, g)
                    chunks = (end - 1) // BLOCK_K - start // BLOCK_K + 1
                    if (start < end) & (chunks <= coop_limit):
                        scale_g = _tile_group_scale(
                            x, ks, start, end, c, g, scales_ptr, amax_ptr, R, rows, row_mask, BLOCK_K, INT64_INDEX,
                            FP8_MAX, ROUND_POW2,
                        )  # fmt: skip
                        scale = tl.where((ks >= start)[None, :], scale_g[:, None], scale)
            q = quantize(x, scale, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            _store_range(q_rows + ks[None, :], q, row_mask, ks, lo, hi)
        if c == 0:  # empty groups: the EPS-derived scale, no data
            starts = tl.associative_scan(clamped_ends(offs_ptr, gs - 1, G, K), 0, max_combine)
            empty = (gs < G) & (tl.maximum(starts, ends) == starts)
            eps_scale = scale_from_amax(tl.zeros((BLOCK_R,), dtype=tl.float32), FP8_MAX, ROUND_POW2)
            slots = scales_ptr + _group_row(gs, R, INT64_INDEX)[:, None] + rows[None, :]
            eps_table = tl.broadcast_to(eps_scale[None, :], (BLOCK_G, BLOCK_R))
            tl.store(slots, eps_table, mask=empty[:, None] & row_mask[None, :])
    return has_long


@triton.jit
def quantize_long_tile(
    x_ptr, q_ptr, scales_ptr, offs_ptr, amax_ptr, R, K, G, tile, coop_limit, stride_xr, stride_xk, stride_qr,
    BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """PHASE_LONG of tile ``tile``: cast the positions of the long slices it meets with their folded amaxes (every
    tile folded in an earlier launch); the tile of a slice's first chunk stores its scales."""
    _, c, rows, row_mask, k0, k1, ks, x, gs, ends, g_lo, g_hi = _tile(
        tile, x_ptr, offs_ptr, R, K, G, stride_xr, stride_xk, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX
    )
    q_rows = q_ptr + rows[:, None] * stride_qr
    for g in range(g_lo, g_hi):
        start, end = _group_bounds(ends, gs, g)
        if (start < end) & ((end - 1) // BLOCK_K - start // BLOCK_K + 1 > coop_limit):
            scale = _tile_group_scale(
                x, ks, start, end, c, g, scales_ptr, amax_ptr, R, rows, row_mask, BLOCK_K, INT64_INDEX,
                FP8_MAX, ROUND_POW2,
            )  # fmt: skip
            q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            _store_range(q_rows + ks[None, :], q, row_mask, ks, tl.maximum(k0, start), tl.minimum(k1, end))


@triton.jit
def _list_long(ws_ptr, ticket, LONG_COUNT: tl.constexpr, LONG_LIST: tl.constexpr):
    """Append a tile that meets a long slice to the workspace list PHASE_LONG walks."""
    tl.store(ws_ptr + LONG_LIST + tl.atomic_add(ws_ptr + LONG_COUNT, 1), ticket)


@triton.jit
def _group_tiles_kernel(
    x_ptr, q_ptr, scales_ptr, offs_ptr, ws_ptr, R, K, G, counts_at, amax_at, coop_limit, long_programs,
    stride_xr, stride_xk, stride_qr, LONG_COUNT: tl.constexpr, LONG_LIST: tl.constexpr,
    PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """x (R, K) any strides -> q (R, K) with unit stride along K. Grid (cdiv(R, BLOCK_R) * cdiv(K, BLOCK_K),), or
    for PHASE_LONG a few programs walking the list."""
    if PHASE == PHASE_LONG:
        for i in range(tl.program_id(0), tl.load(ws_ptr + LONG_COUNT), tl.num_programs(0)):
            quantize_long_tile(
                x_ptr, q_ptr, scales_ptr, offs_ptr, ws_ptr + amax_at, R, K, G, tl.load(ws_ptr + LONG_LIST + i),
                coop_limit, stride_xr, stride_xk, stride_qr, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
    else:
        ticket = take_ticket(ws_ptr, PHASE)
        has_long = quantize_group_tile(
            x_ptr, q_ptr, scales_ptr, offs_ptr, ws_ptr + counts_at, ws_ptr + amax_at, R, K, G, ticket, coop_limit,
            stride_xr, stride_xk, stride_qr, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip
        if PHASE == PHASE_FUSED or PHASE == PHASE_CAST:  # noqa: SIM102, SIM109  (constexprs: no code for other phases)
            if has_long:
                _list_long(ws_ptr, ticket, LONG_COUNT, LONG_LIST)


@triton.jit
def _group_tiles_dual_kernel(
    x1_ptr, q1_ptr, scales1_ptr, x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr, R1, R2, K, G,
    counts1_at, amax1_at, counts2_at, amax2_at, coop_limit, long_programs,
    stride_x1r, stride_x1k, stride_x2r, stride_x2k, LONG_COUNT: tl.constexpr, LONG_LIST: tl.constexpr,
    PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Two (R1, K), (R2, K) views of one offs -> row-major outputs: tiles of x1 first, then x2's, one ticket order.
    Grid ((cdiv(R1, BLOCK_R) + cdiv(R2, BLOCK_R)) * cdiv(K, BLOCK_K),), or for PHASE_LONG a few programs."""
    tiles_1 = tl.cdiv(R1, BLOCK_R) * tl.maximum(tl.cdiv(K, BLOCK_K), 1)
    if PHASE == PHASE_LONG:
        for i in range(tl.program_id(0), tl.load(ws_ptr + LONG_COUNT), tl.num_programs(0)):
            ticket = tl.load(ws_ptr + LONG_LIST + i)
            if ticket < tiles_1:
                quantize_long_tile(
                    x1_ptr, q1_ptr, scales1_ptr, offs_ptr, ws_ptr + amax1_at, R1, K, G, ticket, coop_limit,
                    stride_x1r, stride_x1k, K, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX,
                    FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
                )  # fmt: skip
            else:
                quantize_long_tile(
                    x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr + amax2_at, R2, K, G, ticket - tiles_1, coop_limit,
                    stride_x2r, stride_x2k, K, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX,
                    FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
                )  # fmt: skip
    else:
        ticket = take_ticket(ws_ptr, PHASE)
        if ticket < tiles_1:
            has_long = quantize_group_tile(
                x1_ptr, q1_ptr, scales1_ptr, offs_ptr, ws_ptr + counts1_at, ws_ptr + amax1_at, R1, K, G, ticket,
                coop_limit, stride_x1r, stride_x1k, K, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
        else:
            has_long = quantize_group_tile(
                x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr + counts2_at, ws_ptr + amax2_at, R2, K, G,
                ticket - tiles_1, coop_limit, stride_x2r, stride_x2k, K, PHASE, BLOCK_R, BLOCK_K, BLOCK_G,
                INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
        if PHASE == PHASE_FUSED or PHASE == PHASE_CAST:  # noqa: SIM102, SIM109  (constexprs: no code for other phases)
            if has_long:
                _list_long(ws_ptr, ticket, LONG_COUNT, LONG_LIST)


def tile_count(rows: Sequence[int], ktot: int, block_r: int, block_k: int) -> int:
    """Tiles of views with these row counts: their row blocks times the chunks of the jagged dim (at least one, so
    Ktot = 0 still writes the EPS scales)."""
    return sum(triton.cdiv(r, block_r) for r in rows) * max(triton.cdiv(ktot, block_k), 1)


def _grid(meta) -> tuple[int]:
    """One program per tile (:func:`tile_count`); PHASE_LONG takes ``long_programs`` programs."""
    if meta["PHASE"] == PHASE_LONG:
        return (meta["long_programs"],)
    rows = [meta[r] for r in ("R", "R1", "R2") if r in meta]
    return (tile_count(rows, meta["K"], meta["BLOCK_R"], meta["BLOCK_K"]),)


def long_programs(backend: Backend, device: torch.device) -> int:
    """Programs of the PHASE_LONG launch: two per SM on a GPU (enough to stream a dominant group's tiles, few enough
    that an empty list costs one short wave); INTERPRETER_LONG_PROGRAMS in the interpreter."""
    if backend.kind == "interpreter":
        return INTERPRETER_LONG_PROGRAMS
    return 2 * device_multiprocessors(device)


def launch_group_tiles(
    xs: Sequence[torch.Tensor], offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend,
) -> list[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """Per-row-per-group scale and cast of one or two (R, Ktot) views jagged along their columns by one offs.

    Args:
        xs: one or two (R_i, Ktot) views, one dtype and device, any strides.
        offs: (G,) int32 end offsets along Ktot, on the views' device; never read on the host.

    Returns:
        One (q, scales) per view: q (R_i, Ktot) fp8_dtype row-major, columns past offs[-1] unwritten; scales
        (G * R_i,) f32, s[g * R_i + r].
    """
    outs, _ = run_phases(xs, offs, fp8_dtype, round_scales_to_power_of_2, backend)
    return outs


def run_phases(
    xs: Sequence[torch.Tensor], offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend, phases: Sequence[int] | None = None,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], tuple[torch.Tensor, WorkspaceLayout] | None]:  # fmt: skip
    """:func:`launch_group_tiles` with the launches ``phases`` (None: the backend's) and the workspace with its
    layout afterwards (None when nothing was launched): tests read the arrival counts of PHASE_ARRIVE there."""
    rows = tuple(x.shape[0] for x in xs)
    ktot = xs[0].shape[1]
    num_groups = offs.numel()
    device = xs[0].device
    outs = view_outputs(xs, num_groups, fp8_dtype)
    if num_groups == 0 or sum(rows) == 0:
        return outs, None
    config = configs.GROUP_TILES.fixed(
        backend, {"R": max(rows), "K": ktot, "stride_xr": xs[0].stride(0), "stride_xk": xs[0].stride(1)}
    )
    block_r, block_k = config.kwargs["BLOCK_R"], config.kwargs["BLOCK_K"]
    tiles = tile_count(rows, ktot, block_r, block_k)
    layout = WorkspaceLayout(rows, num_groups, block_r, tiles)
    ws = replay.scratch_zeros((layout.size,), torch.int32, device)
    common = {
        "offs_ptr": offs,
        "ws_ptr": ws,
        "K": ktot,
        "G": num_groups,
        "coop_limit": coop_limit(backend, device),
        "long_programs": min(tiles, long_programs(backend, device)),
        "LONG_COUNT": WorkspaceLayout.LONG_COUNT,
        "LONG_LIST": WorkspaceLayout.LONG_LIST,
        "BLOCK_G": triton.next_power_of_2(max(num_groups, 2)),
        "INT64_INDEX": configs.needs_int64_index(*xs, *(t for pair in outs for t in pair)),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    }
    if len(xs) == 1:
        (x,), ((q, s),) = xs, outs
        kernel = _group_tiles_kernel
        args = {
            "x_ptr": x, "q_ptr": q, "scales_ptr": s, "R": rows[0], "counts_at": layout.counts[0],
            "amax_at": layout.amax[0], "stride_xr": x.stride(0), "stride_xk": x.stride(1), "stride_qr": q.stride(0),
        }  # fmt: skip
    else:
        (x1, x2), ((q1, s1), (q2, s2)) = xs, outs
        kernel = _group_tiles_dual_kernel
        args = {
            "x1_ptr": x1, "q1_ptr": q1, "scales1_ptr": s1, "x2_ptr": x2, "q2_ptr": q2, "scales2_ptr": s2,
            "R1": rows[0], "R2": rows[1], "counts1_at": layout.counts[0], "amax1_at": layout.amax[0],
            "counts2_at": layout.counts[1], "amax2_at": layout.amax[1], "stride_x1r": x1.stride(0),
            "stride_x1k": x1.stride(1), "stride_x2r": x2.stride(0), "stride_x2k": x2.stride(1),
        }  # fmt: skip
    if phases is None:
        phases = (PHASE_AMAX, PHASE_CAST, PHASE_LONG) if backend.kind == "interpreter" else (PHASE_FUSED, PHASE_LONG)
    for phase in phases:
        configs.launch(
            kernel, configs.GROUP_TILES, backend, _grid, config=config, PHASE=int(phase),
            **args, **common,
        )  # fmt: skip
    return outs, (ws, layout)
