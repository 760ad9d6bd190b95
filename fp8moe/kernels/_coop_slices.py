"""The cooperative slice kernel: every slice (e, m, :) of an (E, M, L) view quantized over its L elements, each
element read once however long L is, the slice's chunks meeting through workspace atomics.

Why: a kernel in which one program owns a whole slice (the batched row kernel, fp8moe.kernels._rows) reads a slice
twice, amax then cast, once it outgrows what the program holds, and the second read misses L2; a kernel that splits
the slice into tiles and folds their amaxes in one launch must read it again to cast in a second. Any design that
reads x twice stays under 60% of copy bandwidth. Here a slice block's L elements are cut into chunks of BLOCK_L, one
program each. Every program loads its (BLOCK_L, BLOCK_M) tile once, folds the tile's amax into a workspace word per
slice (fp8moe.kernels._common.fold_amax), arrives once all its warps have folded (fp8moe.kernels._coop.arrive: a
barrier first), waits for the slice block's other chunks (fp8moe.kernels._coop.wait_for_slice), reads the complete
amax back and casts the tile it still holds.

Three uses, each with its own config table (the tile follows the axis x is read along):

- colwise_3d_scale_and_cast on an input read along N (fp8moe.configs.COOP_COLUMNS): each slice a column of an
  expert, the tile read across the slices. On an H100 (session 35) it took 0.81-0.93x the row kernel's time at the
  issue #11 3D points on row-major input, 56-73% of copy bandwidth against 52-64%
  (benchmarks/results/h100-s35-colwise3d-rows-vs-coop.md); fp8moe.configs.COLWISE_3D_KERNEL picks it. Since
  session 39 it runs as the jagged form below with the experts as uniform groups (:func:`launch_coop_experts`),
  whose code took 141 registers where the dense launch (:func:`launch_coop_slices` on the view ``x.mT``) took 151
  (sm_90, triton 3.6); on CUDA the tile is capped at 128 registers (fp8moe.configs.COOP_COLUMNS).
- rowwise_3d_transpose_rhs, method "atomic" (fp8moe.configs.COOP_TRANSPOSE): x (E, K, N) itself, each slice a row,
  the tile read along it; fp8moe.configs.TRANSPOSE_ATOMIC_KERNEL picks it over the method's two-launch form, which
  reads x twice (56-63% of copy bandwidth on the H200, benchmarks/results/issue11-misses.md). On an H100 (session
  36) it took 0.73-0.87x the two launches' time, 58-60% -> 67-82% (benchmarks/results/h100-s36-call18-off-vs-on.md).
- the three per-group ops (fp8moe.configs.GROUP_COOP, PER_GROUP_KERNEL = "coop"): an (R, Ktot) view jagged along K
  by offs, each slice (g, r) = x[r, start_g:end_g] cut into chunks from the 16-aligned position at or before the
  group's start (:func:`launch_coop_groups`). A group of more chunks than may wait for each other (a long group:
  the host never reads offs, so wherever Ktot allows one) folds without waiting, and a second launch reads and
  casts its chunks again. On an H100 (session 36, benchmarks/results/h100-s36-call17-*) its first form, which gave
  long Ktot longer tiles instead (1024 x 16 at 65536 tokens), was bitwise and slower than the default kernels at
  all 17 issue #11 points (1.05x at G = 16, 1.7-4.2x at the short groups).

Semantics: those of the op's fp8ref reference (the NaN-keeping amax of fp8moe.kernels._common, its scale and cast),
so the bytes are those of the op's other kernels.

Jagged bounds. Group bounds are running maxima of the clamped offsets (SPEC §4.7, as every jagged kernel derives
them), so a slice's chunk count, and the chunks it waits for, are exact whatever the offsets. An empty group is
one chunk with nothing to load: amax 0, its EPS scale written. Positions past offs[-1] are never written; a
group's partial runs of 16 at its ends are loaded whole (positions of the next group or past offs[-1], at most 15 on
either side, zeroed before the fold) so that every load stays a 16-byte vector.

Progress. A program takes its tile from a ticket (an atomic counter), not from its program id, so tiles are taken in
the order programs start and a slice block's chunks start together (their tickets are consecutive). A program waits
only for the chunks of its own slice block, at most ``coop_limit`` of them (fp8moe.kernels._coop: half the device's
SMs), after arriving itself; they all have tickets no later than the last one a running program holds, so they have
started or will start on the SMs running programs free. The dense launcher refuses an L that needs more chunks than
that; the jagged one hands a Ktot that may need more (a group may hold all of it) to the chunked kernel.

On the interpreter, whose programs run one after another, a wait would never end: there the fold and the cast are
two launches of the same code (PHASE_AMAX, PHASE_CAST), the wait left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import (
    amax_of_magnitude_bits,
    fold_amax,
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
    arrive,
    coop_limit,
    group_bounds,
    group_item,
    view_outputs,
    wait_for_slice,
)

__all__ = [
    "arrival_count",
    "count_words",
    "group_config",
    "group_programs",
    "launch_coop_experts",
    "launch_coop_groups",
    "launch_coop_slices",
    "may_have_long_groups",
    "run_coop_group_phases",
]

#: Workspace words per counter (the tickets of the fused or fold and of the cast launch, then one arrival count per
#: slice block) where the slice blocks that run together have consecutive counts: each on a 128-byte line of its
#: own. Packed, 32 such counts shared a line with each other (and the first with both tickets), and every program
#: waiting on one polled the line the others' arrivals and tickets were atomically updating. On an H100 (session 44)
#: the stripped kernel of benchmarks/probe_coop_slices.py at colwise 3D's bytes took 0.87-0.92x the time with a line
#: per count (62/75/72% -> 68/81/83% of copy; sleeping between polls: 0.93-0.99x; h100-s44-call34-coop_poll.md), the
#: atomic transpose 0.93-0.97x (77/87/83/77% -> 82/94/86/83%) and colwise 3D at E = 1 0.93x (65% -> 70%; the same at
#: E > 1, where concurrent experts' counts lay a row of blocks apart already; h100-s44-call29-bench.md against
#: h100-s44-call35-bench.md). The jagged launch of the per-group ops, whose running blocks' counts lie cdiv(R,
#: BLOCK_M) words apart too, ran its long-group points 1.03-1.12x slower so, with the counts in either order
#: (h100-s44-call28-jagged_coop.md against h100-s44-call35-jagged_coop.md, h100-s44-call36-jagged_coop.md: machines
#: of one kind but not one machine, where colwise 3D past one expert and the reduction transpose timed within 1%;
#: the cause is not known), and keeps them packed (:func:`count_words`): on one machine in one run (session 45,
#: benchmarks/probe_jagged_coop.py --lines, h100-s45-call37-jagged_coop.md) a line apart took 1.03-1.11x the packed
#: time there too (fp8moe.configs.GROUP_COOP_COUNT_LINES).
_LINE = tl.constexpr(32)

#: Programs of the jagged kernel's long-group pass per program that may wait (``coop_limit``: two per SM on a GPU,
#: eight in the interpreter); each strides over the items.
LONG_PASS_PROGRAMS = 4


@triton.jit
def _quantize_chunk(
    x_ptr, q_ptr, scales_ptr, words, count_ptr, chunks, first, waits, ms, m_mask, ls, cover, l_mask, in_slice,
    edges, edge_ls, edge_mask, stride_xm, stride_xl, stride_qm, PHASE: tl.constexpr, EDGES: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """One chunk's tile (positions ``ls`` along L first, slices ``ms``), x, q and scales already at its slices' base:
    load it, fold its amax into ``words`` (one per slice), arrive at ``count_ptr`` and wait for the slice block's
    ``chunks`` chunks, cast the tile it holds with the folded amax; the ``first`` chunk stores the scales. The tile is
    laid out by the strides (Triton orders it by the axis x is read along). In PHASE_FUSED a chunk whose run-time
    flag ``waits`` is false (a long group's) only folds: one copy of the code serves both, where two calls under a
    run-time branch took the jagged kernel to 255 registers (triton 3.6, sm_90).

    ``cover`` selects the positions loaded and ``l_mask`` those stored, both constant over aligned runs of 16, so
    Triton keeps 16-byte accesses along L. With EDGES (jagged slices) the cover holds the whole runs of 16 the slice
    touches; where the run-time flag ``edges`` is set, the positions outside ``in_slice`` are zeroed before the fold,
    and after the tile's store the positions ``edge_ls`` of ``edge_mask`` (the partial runs at the slice's ends, left
    out of ``l_mask``) are loaded again, cast and stored byte by byte. Loading the edges beside the tile or storing
    the tile's edges with a second masked store held a second tile or its masks: 255 registers (triton 3.6, sm_90),
    two programs per SM instead of three."""
    ptrs = x_ptr + ls[:, None] * stride_xl + ms[None, :] * stride_xm
    x = tl.load(ptrs, mask=cover[:, None] & m_mask[None, :], other=0.0)
    if EDGES and edges:
        x = tl.where(in_slice[:, None], x, 0.0)
    if PHASE != PHASE_CAST:
        fold_amax(words, amax_of_magnitude_bits(magnitude_bits(x), x.dtype, 0), m_mask)
    if PHASE == PHASE_ARRIVE:
        arrive(count_ptr)
    if PHASE == PHASE_FUSED and waits:
        arrive(count_ptr)
        wait_for_slice(count_ptr, chunks)
        tl.debug_barrier()  # the amax reads after every thread's wait
    if (PHASE == PHASE_FUSED and waits) or PHASE == PHASE_CAST:
        scale = _cast_tile(x, q_ptr, scales_ptr, words, first, ms, m_mask, ls, l_mask, stride_qm, FP8_DTYPE,
                           FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE)  # fmt: skip
        if EDGES and edges:
            at_edges = edge_mask[:, None] & m_mask[None, :]
            x_edges = tl.load(x_ptr + edge_ls[:, None] * stride_xl + ms[None, :] * stride_xm, mask=at_edges)
            q_edges = quantize(x_edges, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            tl.store(q_ptr + ms[None, :] * stride_qm + edge_ls[:, None], q_edges, mask=at_edges)


@triton.jit
def _cast_tile(
    x, q_ptr, scales_ptr, words, first, ms, m_mask, ls, l_mask, stride_qm, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Read the slices' folded amax back from ``words``, cast the tile ``x`` (positions ``ls``, slices ``ms``) and
    store it where ``l_mask`` and ``m_mask`` hold, the scales too where ``first``; return the scales."""
    folded = tl.atomic_max(words, tl.zeros_like(ms).to(tl.int32), mask=m_mask, sem="acquire")
    scale = scale_from_amax(folded.to(tl.float32, bitcast=True), FP8_MAX, ROUND_POW2)
    if first:
        tl.store(scales_ptr + ms, scale, mask=m_mask)
    q = quantize(x, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    tl.store(q_ptr + ms[None, :] * stride_qm + ls[:, None], q, mask=l_mask[:, None] & m_mask[None, :])
    return scale


@triton.jit
def _coop_slices_kernel(
    x_ptr, q_ptr, scales_ptr, ws_ptr, E, M, L, stride_xe, stride_xm, stride_xl, stride_qe, stride_qm,
    PHASE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_M: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Ticket t: chunk t % CHUNKS of slice block t // CHUNKS, block b = (e = b % E, slices (b // E) * BLOCK_M on).
    Workspace (int32, zeroed): the two tickets and one arrival count per slice block, _LINE words apart, then the
    amax bits of slice (e, m) at e * M + m. scales[e * M + m]; q[e, m, l] at e * stride_qe + m * stride_qm + l."""
    chunks = tl.cdiv(L, BLOCK_L)
    t = tl.atomic_add(ws_ptr + (_LINE if PHASE == PHASE_CAST else 0), 1)
    block = t // chunks
    blocks = E * tl.cdiv(M, BLOCK_M)
    e = block % E
    ms = (block // E) * BLOCK_M + tl.arange(0, BLOCK_M)
    ls = (t % chunks) * BLOCK_L + tl.arange(0, BLOCK_L)
    if INT64_INDEX:  # the workspace too: _LINE words a counter can pass int32 where x does not
        block = block.to(tl.int64)
        blocks = blocks.to(tl.int64)
        e = e.to(tl.int64)
        ms = ms.to(tl.int64)
        ls = ls.to(tl.int64)
    _quantize_chunk(
        x_ptr + e * stride_xe, q_ptr + e * stride_qe, scales_ptr + e * M,
        ws_ptr + _LINE * (2 + blocks) + e * M + ms, ws_ptr + _LINE * (2 + block), chunks, t % chunks == 0,
        True, ms, ms < M, ls, ls < L, ls < L, ls < L, False, ls, ls < L, stride_xm, stride_xl, stride_qm, PHASE, False,
        FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
    )  # fmt: skip


@triton.jit
def _coop_groups_kernel(
    x_ptr, q_ptr, scales_ptr, ws_ptr, offs_ptr, R, K, G, stride_xr, stride_xk, stride_qr, stride_xg, stride_qg,
    limit, PHASE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr,
    UNIFORM: tl.constexpr, COUNT_WORDS: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
):  # fmt: skip
    """An (R, K) view jagged along K: slice (g, r) = x[r, start_g:end_g], chunk j of group g its positions
    floor16(start_g) + j * BLOCK_L on, those of the group masked in. Items are numbered row block major, then group,
    then chunk (a slice block's chunks consecutive); programs past the last item do nothing. A group of more than
    ``limit`` chunks (a long group) only folds in PHASE_FUSED, without waiting, and PHASE_LONG, launched after it,
    reads and casts its chunks again. Nothing waits in PHASE_LONG, so its programs take items by a stride over the
    grid instead of tickets, and none takes any where no group is long: a program per item there cost 90 us at
    65536 x 4096 G = 16 (benchmarks/results/h100-s38-coop-jagged-before-ncu.md). Workspace (int32, zeroed), counters
    COUNT_WORDS words apart (:func:`count_words`): the two tickets (PHASE_FUSED's or PHASE_AMAX's; PHASE_CAST's), one
    arrival count per (g, row block), counter 2 + g * cdiv(R, BLOCK_M) + rb; then the amax bits of slice (g, r) at
    g * R + r. scales[g * R + r]; q[r, k] at r * stride_qr + k.

    UNIFORM (colwise_3d_scale_and_cast's (E, K, N) input, :func:`launch_coop_experts`): G groups of K // G
    positions each, offs unread, and group g's x and q start ``stride_xg`` and ``stride_qg`` elements further on
    (x[r, k] of group g at g * stride_xg + r * stride_xr + k * stride_xk, q[r, k] at g * stride_qg + r * stride_qr +
    k), so that an expert's block lies anywhere."""
    gs = tl.arange(0, BLOCK_G)
    if UNIFORM:
        starts = tl.minimum(gs, G) * (K // G)
        ends = tl.minimum(gs + 1, G) * (K // G)
    else:
        starts, ends = group_bounds(offs_ptr, gs, G, K)
    # chunk j of group g: positions floor16(start_g) + j * BLOCK_L on (aligned, so whole runs of 16 stay vectors)
    chunks = tl.where(gs < G, tl.maximum((ends - starts // 16 * 16 + BLOCK_L - 1) // BLOCK_L, 1), 0)
    firsts = tl.cumsum(chunks, 0) - chunks
    per_row_block = tl.sum(chunks, 0)
    items = tl.cdiv(R, BLOCK_M) * per_row_block
    if PHASE == PHASE_LONG:
        if tl.max(chunks, 0) > limit:
            for t in range(tl.program_id(0), items, tl.num_programs(0)):
                _group_chunk(
                    x_ptr, q_ptr, scales_ptr, ws_ptr, t, per_row_block, gs, starts, ends, chunks, firsts, R, K, G,
                    stride_xr, stride_xk, stride_qr, stride_xg, stride_qg, limit, PHASE, BLOCK_L, BLOCK_M, UNIFORM,
                    COUNT_WORDS, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
                )  # fmt: skip
    else:
        t = tl.atomic_add(ws_ptr + (COUNT_WORDS if PHASE == PHASE_CAST else 0), 1)
        if t < items:
            _group_chunk(
                x_ptr, q_ptr, scales_ptr, ws_ptr, t, per_row_block, gs, starts, ends, chunks, firsts, R, K, G,
                stride_xr, stride_xk, stride_qr, stride_xg, stride_qg, limit, PHASE, BLOCK_L, BLOCK_M, UNIFORM,
                COUNT_WORDS, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip


@triton.jit
def _group_chunk(
    x_ptr, q_ptr, scales_ptr, ws_ptr, t, per_row_block, gs, starts, ends, chunks, firsts, R, K, G, stride_xr,
    stride_xk, stride_qr, stride_xg, stride_qg, limit, PHASE: tl.constexpr, BLOCK_L: tl.constexpr,
    BLOCK_M: tl.constexpr, UNIFORM: tl.constexpr, COUNT_WORDS: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Item ``t`` of :func:`_coop_groups_kernel` in its ``PHASE``: PHASE_FUSED folds a long group's chunk and has the
    others wait and cast, PHASE_LONG casts a long group's chunk and skips the others, the interpreter's phases take
    every chunk."""
    rb, g, n, j, start, end = group_item(t, per_row_block, gs, starts, ends, chunks, firsts)
    long_group = n > limit
    ms = rb * BLOCK_M + tl.arange(0, BLOCK_M)
    ls = start // 16 * 16 + j * BLOCK_L + tl.arange(0, BLOCK_L)
    if INT64_INDEX:
        ms = ms.to(tl.int64)
        ls = ls.to(tl.int64)
        start = start.to(tl.int64)
        end = end.to(tl.int64)
        g = g.to(tl.int64)
    g_row = g * R
    if UNIFORM:  # the expert's own block of x and q
        x_ptr += g * stride_xg
        q_ptr += g * stride_qg
    # loaded: the runs of 16 the group touches (whole vectors); stored: its whole runs as vectors, the partial runs
    # at either end (edges) apart: the head run's 16 positions, then the tail run's, those of the group in this chunk
    # (a group inside one run has it twice: the same bytes stored twice)
    inner_lo = (start + 15) // 16 * 16
    inner_hi = end // 16 * 16
    cover = (ls >= start // 16 * 16) & (ls < (end + 15) // 16 * 16) & (ls < K)
    inner = (ls >= inner_lo) & (ls < inner_hi)
    in_group = (ls >= start) & (ls < end)
    edges = ((j == 0) & (start != inner_lo)) | ((j == n - 1) & (end != inner_hi))
    run = tl.arange(0, 32)
    edge_ls = tl.where(run < 16, start // 16 * 16 + run, inner_hi + run - 16)
    chunk_lo = start // 16 * 16 + j * BLOCK_L
    in_chunk = (edge_ls >= chunk_lo) & (edge_ls < chunk_lo + BLOCK_L)
    edge_mask = (edge_ls >= start) & (edge_ls < end) & ((edge_ls < inner_lo) | (edge_ls >= inner_hi)) & in_chunk
    row_blocks = tl.cdiv(R, BLOCK_M)
    if INT64_INDEX:  # g is int64 already
        row_blocks = row_blocks.to(tl.int64)
    words = ws_ptr + COUNT_WORDS * (2 + G * row_blocks) + g_row + ms
    count = ws_ptr + COUNT_WORDS * (2 + g * row_blocks + rb)
    if PHASE == PHASE_LONG:
        if long_group:  # the fold launch before this one completed its amax
            _quantize_chunk(
                x_ptr, q_ptr, scales_ptr + g_row, words, count, n, j == 0, False, ms, ms < R, ls, cover, inner,
                in_group, edges, edge_ls, edge_mask, stride_xr, stride_xk, stride_qr, PHASE_CAST, True, FP8_DTYPE,
                FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
    else:  # in PHASE_FUSED a long group's chunks fold without waiting: they may outnumber the programs that can wait
        _quantize_chunk(
            x_ptr, q_ptr, scales_ptr + g_row, words, count, n, j == 0, not long_group, ms, ms < R, ls, cover, inner,
            in_group, edges, edge_ls, edge_mask, stride_xr, stride_xk, stride_qr, PHASE, True, FP8_DTYPE, FP8_MAX,
            MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip


def launch_coop_slices(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    table: configs.KernelConfigs,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> None:
    """Quantize every slice (e, m, :) of the (E, M, L) view ``x`` into ``q`` and ``scales``, each element read once.

    Args:
        x: (E, M, L) bf16/f16/f32 view, any strides.
        q: (E, M, L) fp8 output view with ``q.stride(2) == 1`` (written).
        scales: (E * M,) contiguous f32 output (written), ``scales[e * M + m]``.
        table: the config table of the calling op (fp8moe.configs.COOP_TRANSPOSE; COOP_COLUMNS where
            benchmarks/probe_colwise3d_experts.py runs colwise 3D's dense launch of sessions 37-38 on the view x.mT).
        fp8_dtype: q's dtype.
        round_scales_to_power_of_2: apply the pow2 rule.
        backend: where it runs (the config, the cast, one launch or two).

    Raises:
        ValueError: q is not contiguous along L, L is 0 while there are slices, or L needs more chunks than may wait
            for each other on this device (``coop_limit``).
    """
    e, m, length = x.shape
    if e == 0 or m == 0:
        return
    if length == 0:
        raise ValueError("L = 0: the slices have no chunk to write their scales from (the caller's other kernel does)")
    if q.stride(2) != 1 and length > 1:
        raise ValueError(f"q must be contiguous along L, got strides {q.stride()}")
    config = configs.coop_config(table, backend, x.shape)
    block_l, block_m = config.kwargs["BLOCK_L"], config.kwargs["BLOCK_M"]
    chunks, limit = triton.cdiv(length, block_l), coop_limit(backend, x.device)
    if chunks > limit:
        raise ValueError(
            f"L = {length} is {chunks} chunks of {block_l}: more than the {limit} that may wait for each other"
        )
    blocks = e * triton.cdiv(m, block_m)
    workspace = replay.scratch_zeros((_counts_end(blocks, _LINE.value) + e * m,), torch.int32, x.device)
    phases = (PHASE_AMAX, PHASE_CAST) if backend.kind == "interpreter" else (PHASE_FUSED,)
    for phase in phases:
        configs.launch(
            _coop_slices_kernel,
            table,
            backend,
            lambda meta: (blocks * chunks,),
            config=config,
            x_ptr=x,
            q_ptr=q,
            scales_ptr=scales,
            ws_ptr=workspace,
            E=e,
            M=m,
            L=length,
            stride_xe=x.stride(0),
            stride_xm=x.stride(1),
            stride_xl=x.stride(2),
            stride_qe=q.stride(0),
            stride_qm=q.stride(1),
            PHASE=phase,
            INT64_INDEX=configs.needs_int64_index(x, q, scales, workspace),
            **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
        )


def group_config(backend: Backend, view: torch.Tensor) -> triton.Config:
    """The tile the jagged launcher runs the (R, Ktot) ``view`` with (fp8moe.configs.GROUP_COOP's for the view)."""
    return configs.GROUP_COOP.fixed(backend, _group_shape_args(view))


def may_have_long_groups(backend: Backend, longest: int, block_l: int, limit: int) -> bool:
    """Whether a group of at most ``longest`` positions may take more chunks of ``block_l`` than the ``limit`` that
    may wait for each other (``coop_limit``), so that the launch needs its PHASE_LONG pass: a group's chunks start up
    to 15 positions before it. For a jagged view the host never reads offs, and a group may hold all Ktot positions.
    Never in the interpreter, whose fold and cast are two launches that nothing waits in."""
    return backend.kind != "interpreter" and triton.cdiv(longest + 15, block_l) > limit


def group_programs(ktot: int, groups: int, block_l: int) -> int:
    """Programs per row block of the jagged launch: at least its items, whatever the offsets. A group's chunks start
    at the 16-aligned position at or before it, so a group of n positions has at most cdiv(n + 15, BLOCK_L) of them
    (one when empty), and over G groups that sums to at most cdiv(Ktot + 15 G, BLOCK_L) + G - 1."""
    return triton.cdiv(ktot + 15 * groups, block_l) + groups


def _group_shape_args(view: torch.Tensor) -> dict[str, int]:
    """The launch arguments fp8moe.configs.GROUP_COOP picks its config from."""
    return {"R": view.shape[0], "K": view.shape[1], "stride_xr": view.stride(0), "stride_xk": view.stride(1)}


def launch_coop_groups(
    xs: Sequence[torch.Tensor], offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend,
) -> list[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """fp8moe.kernels._group_tiles.launch_group_tiles (same arguments, same outputs: per (R_i, Ktot) view of one offs,
    q (R_i, Ktot) row-major and the scales (G * R_i,) f32) on the cooperative slice kernel, one fused launch per view
    on a GPU, and a second (PHASE_LONG) where a group may have more chunks than may wait for each other
    (:func:`may_have_long_groups`); the fold and the cast per view in the interpreter."""
    outs = view_outputs(xs, offs.numel(), fp8_dtype)
    for x, (q, scales) in zip(xs, outs, strict=True):
        run_coop_group_phases(x, q, scales, offs, fp8_dtype, round_scales_to_power_of_2, backend)
    return outs


def run_coop_group_phases(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool, backend: Backend, phases: Sequence[int] | None = None,
    limit: int | None = None,
) -> tuple[torch.Tensor, int] | None:  # fmt: skip
    """Quantize one (R, Ktot) view into ``q`` (R, Ktot) and ``scales`` (G * R,) in the launches ``phases`` (None: the
    backend's), groups of more than ``limit`` chunks long (None: ``coop_limit``'s), returning the workspace and where
    its amax words start (the arrival counts lie before them, one per (g, row block): :func:`arrival_count` of
    block g * cdiv(R, BLOCK_M) + rb, packed): tests read the counts PHASE_ARRIVE leaves. None where there is nothing to
    launch."""
    r, ktot = x.shape
    groups = offs.numel()
    if groups == 0 or r == 0:
        return None
    config = group_config(backend, x)
    launch = _GroupLaunch(
        x=x,
        q=q,
        scales=scales,
        offs=offs,
        shape_args=_group_shape_args(x),
        groups=groups,
        stride_qr=q.stride(0),
        group_strides=(0, 0),
        table=configs.GROUP_COOP,
        config=config,
        programs_per_row_block=group_programs(ktot, groups, config.kwargs["BLOCK_L"]),
        longest=ktot,
    )
    return _run_group_phases(launch, fp8_dtype, round_scales_to_power_of_2, backend, phases, limit)


def launch_coop_experts(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend, phases: Sequence[int] | None = None, limit: int | None = None,
) -> tuple[torch.Tensor, int] | None:  # fmt: skip
    """colwise_3d_scale_and_cast's columns on the jagged kernel: expert e's columns are the slices (e, n) of E uniform
    groups of K positions along the stacked K axis (UNIFORM), each element read once. On an H100 the jagged kernel
    ran the bytes of (16, 4096, 4096) in 320.6 us (128 registers) where the dense use of :func:`launch_coop_slices`
    took 371.1 us (151 registers) in the same tile and item order (benchmarks/results/s38-summary.md, section 5);
    this launch (141 registers) took 0.92-0.99x the dense one's time at the issue #11 3D points, bitwise
    (benchmarks/results/h100-s39-call26-colwise3d-experts.md).

    Args:
        x: (E, K, N) bf16/f16/f32, any strides fp8moe.configs.coop_columns_fit takes.
        q: (E, K, N) fp8 output with strides (K*N, 1, K) (written).
        scales: (E * N,) contiguous f32 output (written), ``scales[e * N + n]``.
        fp8_dtype: q's dtype.
        round_scales_to_power_of_2: apply the pow2 rule.
        backend: where it runs.
        phases, limit: as :func:`run_coop_group_phases` takes them (tests: an expert of more than ``limit`` chunks
            is cast by PHASE_LONG).

    Returns:
        As :func:`run_coop_group_phases`: the workspace and where its amax words start (its counters
        ``count_words(True)`` words apart), None where there is nothing to launch.

    Raises:
        ValueError: q is not (K*N, 1, K)-strided, or x is an input fp8moe.configs.coop_columns_fit refuses.
    """
    e, k, n = x.shape
    if e == 0 or n == 0:
        return None
    if not configs.coop_columns_fit(x):
        raise ValueError(f"x of shape {tuple(x.shape)} and strides {x.stride()}: K = {k} is empty, or not a multiple "
                         "of 16 with the experts' blocks apart")  # fmt: skip
    if q.stride() != (k * n, 1, k):
        raise ValueError(f"q must have strides {(k * n, 1, k)}, got {q.stride()}")
    config = configs.coop_config(configs.COOP_COLUMNS, backend, (e, n, k))
    # expert g's chunks start at the 16-aligned position at or before g * K: cdiv(K, BLOCK_L) of them where K is a
    # multiple of 16, at most cdiv(K + 15, BLOCK_L) otherwise
    most_chunks = triton.cdiv(k if k % 16 == 0 else k + 15, config.kwargs["BLOCK_L"])
    launch = _GroupLaunch(
        x=x,
        q=q,
        scales=scales,
        offs=None,
        shape_args={"R": n, "K": e * k, "stride_xr": x.stride(2), "stride_xk": x.stride(1)},
        groups=e,
        stride_qr=k,
        group_strides=(x.stride(0) - k * x.stride(1), k * n - k),
        table=configs.COOP_COLUMNS,
        config=config,
        programs_per_row_block=e * most_chunks,
        longest=k,
    )
    return _run_group_phases(launch, fp8_dtype, round_scales_to_power_of_2, backend, phases, limit)


@dataclass(frozen=True)
class _GroupLaunch:
    """One launch of :func:`_coop_groups_kernel`: its tensors (``offs`` None for uniform groups), the view's R, K
    (Ktot) and strides (``shape_args``), G, q's row stride, the per-group strides of x and q (uniform groups), the
    table it reports under and the config, the programs per row block, and the most positions a group may hold
    (:func:`may_have_long_groups`)."""

    x: torch.Tensor
    q: torch.Tensor
    scales: torch.Tensor
    offs: torch.Tensor | None
    shape_args: dict[str, int]
    groups: int
    stride_qr: int
    group_strides: tuple[int, int]
    table: configs.KernelConfigs
    config: triton.Config
    programs_per_row_block: int
    longest: int


def _run_group_phases(
    launch: _GroupLaunch, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend,
    phases: Sequence[int] | None = None, limit: int | None = None,
) -> tuple[torch.Tensor, int]:  # fmt: skip
    """Launch ``launch`` in ``phases`` (:func:`run_coop_group_phases`'s arguments), returning the workspace and where
    its amax words start."""
    block_l, block_m = launch.config.kwargs["BLOCK_L"], launch.config.kwargs["BLOCK_M"]
    r, groups = launch.shape_args["R"], launch.groups
    row_blocks = triton.cdiv(r, block_m)
    counter_words = count_words(launch.offs is None)
    workspace = replay.scratch_zeros(
        (_counts_end(groups * row_blocks, counter_words) + groups * r,), torch.int32, launch.x.device
    )
    programs = row_blocks * launch.programs_per_row_block
    waiting = coop_limit(backend, launch.x.device)
    # the long pass strides over the items: LONG_PASS_PROGRAMS per program that may wait (two per SM on a GPU)
    long_programs = min(programs, LONG_PASS_PROGRAMS * waiting)
    if limit is None:
        limit = waiting
    if phases is None:
        long_pass = (PHASE_LONG,) if may_have_long_groups(backend, launch.longest, block_l, limit) else ()
        phases = (PHASE_AMAX, PHASE_CAST) if backend.kind == "interpreter" else (PHASE_FUSED, *long_pass)
    uniform = launch.offs is None
    for phase in phases:
        configs.launch(
            _coop_groups_kernel,
            launch.table,
            backend,
            lambda meta, phase=phase: (long_programs if phase == PHASE_LONG else programs,),
            config=launch.config,
            x_ptr=launch.x,
            q_ptr=launch.q,
            scales_ptr=launch.scales,
            ws_ptr=workspace,
            offs_ptr=launch.scales if uniform else launch.offs,  # unread under UNIFORM
            **launch.shape_args,
            G=groups,
            stride_qr=launch.stride_qr,
            stride_xg=launch.group_strides[0],
            stride_qg=launch.group_strides[1],
            limit=limit,
            PHASE=int(phase),
            BLOCK_G=triton.next_power_of_2(max(groups, 2)),
            UNIFORM=uniform,
            COUNT_WORDS=counter_words,
            INT64_INDEX=configs.needs_int64_index(launch.x, launch.q, launch.scales, workspace),
            **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
        )
    return workspace, _counts_end(groups * row_blocks, counter_words)


def count_words(uniform: bool) -> int:
    """Workspace words per counter of the jagged launch (_LINE): a line each for uniform groups (colwise 3D's
    experts), packed for groups from offs (the per-group ops) unless fp8moe.configs.GROUP_COOP_COUNT_LINES is set."""
    return _LINE.value if uniform or configs.GROUP_COOP_COUNT_LINES else 1


def _counts_end(blocks: int, counter_words: int) -> int:
    """Where the workspace's amax words start: after the two tickets and ``blocks`` arrival counts, ``counter_words``
    words each."""
    return counter_words * (2 + blocks)


def arrival_count(workspace: torch.Tensor, block: int, counter_words: int) -> int:
    """Slice block ``block``'s arrival count in a workspace a launch left with ``counter_words`` words per counter
    (tests read those of PHASE_ARRIVE)."""
    return int(workspace[counter_words * (2 + block)])
