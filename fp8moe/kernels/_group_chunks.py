"""The chunked per-group kernel: long slices are split into chunks that cooperating programs quantize together,
each chunk read twice.

Why: the span kernel (fp8moe.kernels._per_group) gives each (group, row block) slice to one program, which reads it
twice (amax, then cast). Two things follow for long slices. The slices in flight outgrow L2 (132 SMs x 2-3
programs x 64 columns x 4096 tokens x 2 B is 138-207 MB against the H200's 60 MB), so 1.66-1.92x the input comes
from DRAM (benchmarks/results/h200-bench-2026-12-02-s8-summary.md). And a group holding most of the tokens is one
long serial program per row block while the rest of the GPU idles. Here the slices keep the span kernel's two-pass
loop, but a slice longer than ``chunk`` positions is cut into chunks of ``chunk`` (16-aligned after the first): a
dominant group spreads over many programs, and the bytes between a chunk's two reads are those of the chunks in
flight. Measured on the H200 (benchmarks/results/h200-s12-summary.md): 1.11-1.71x faster than the span kernel where
groups average 2048 positions, the more the more uneven they are; 0.86-0.95x on uniform groups of 4096-8192 (whether
the second read now hits L2 was not measured); and shorter groups are single chunks that gain nothing.

Work items. Item (rb, g, j) is chunk j of group g in row block rb. They are numbered row block major, then group,
then chunk: the chunks of one slice are consecutive. Every program reads offs and derives the table of groups
(bounds are running maxima of the clamped offsets, SPEC §4.7: a partition in group order, whatever the offsets) and
their chunk counts. Programs take items from a ticket (an atomic counter), the next one only once their last item
is cast; the grid is PROGRAMS_PER_SM programs per SM at most (0: one program per item, the program id its item).
The item's work is a call, not inlined: inlined into the loop over items, its values took registers across the
whole loop body (sm_90 compile, 64x64/w4: 226 registers per thread in the loop, 128 as a call).

Chunks of a multi-chunk slice fold their (BLOCK_R,) amax into a zeroed workspace word per (g, row) with an integer
atomic max of the f32 bit patterns (non-negative floats order as integers and every NaN pattern lies above inf: the
exact NaN-keeping max of fp8ref), add one to the slice's arrival count, wait until all its chunks have arrived, read
the amax back and cast their chunk. A single-chunk slice (and an empty group: its EPS scale, no data) is the span
kernel's program, unchanged.

Progress. A slice has at most ``coop_limit`` (half the SMs) chunks: the launcher lengthens ``chunk`` where Ktot
needs it (:func:`chunk_length`). With tickets, programs take items in item order, each holding one item at a time,
and only once started: every slice before the newest ticket's has all its chunks in running programs, each of which
arrives without waiting, so those slices finish; the newest slice's chunks, fewer than the programs the device runs
at once (at least one per SM), find programs as the others finish. Nothing depends on which programs the GPU starts
first, or on all of them fitting at once. With PROGRAMS_PER_SM = 0 (one item per program) it does: the argument then
needs that no program starts before every program of lower index has (NVIDIA GPUs start thread blocks in index order
in practice, but no programming guide promises it); configs that rely on it say so (fp8moe.configs.GROUP_CHUNKS).

L2 hints (configs with L2_HINTS): pass 1 loads a multi-chunk slice's chunk with an evict-last L2 priority, pass 2
reloads it and stores its codes evict-first, so that the chunks waiting for their second read are the last lines
the L2 gives up. Without them the second read mostly missed (per-group colwise, 65536 x 4096, G = 16: 1.49x the
ideal DRAM bytes with 528 programs of 64 KB chunks, Nsight Compute, benchmarks/results/h200-s15-call2-ncu.md).

On the interpreter, whose programs run one after another, a wait would never end: there the fused launch is split
into two launches of the same code (PHASE_AMAX folds, PHASE_CAST casts), the wait left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import fp8_constexprs, scale_from_amax
from fp8moe.kernels._coop import (
    PHASE_AMAX,
    PHASE_ARRIVE,
    PHASE_CAST,
    PHASE_FUSED,
    arrive,
    coop_limit,
    device_multiprocessors,
    group_bounds,
    group_item,
    view_outputs,
    wait_for_slice,
)
from fp8moe.kernels._span import cast_span, pack_k, quantize_group_span, span_amax

__all__ = [
    "ChunkWorkspace",
    "chunk_length",
    "launch_group_chunks",
    "run_chunk_phases",
]


class ChunkWorkspace:
    """The int32 workspace of one call, zeroed before it: two tickets (the fused or amax launch's, the cast
    launch's), then per view the arrival counts (G x row blocks) and the amax bits (G x R).

    Args:
        rows: R of each view the call quantizes.
        groups: G.
        block_r: the launch's BLOCK_R.
    """

    TICKETS = 2

    def __init__(self, rows: Sequence[int], groups: int, block_r: int):
        self.counts: list[int] = []
        self.amax: list[int] = []
        offset = self.TICKETS
        for r in rows:
            self.counts.append(offset)
            offset += groups * triton.cdiv(r, block_r)
            self.amax.append(offset)
            offset += groups * r
        self.size = offset


@triton.jit
def _group_table(offs_ptr, G, K, chunk, BLOCK_G: tl.constexpr):
    """Per group lane g < G: its bounds [start, end) (running maxima of the clamped offsets), its chunk count and the
    number of its first item within a row block; and the items of one row block."""
    gs = tl.arange(0, BLOCK_G)
    starts, ends = group_bounds(offs_ptr, gs, G, K)
    # Chunk 0 runs from start to the first 16-aligned position past it plus chunk; the others are chunk long. A group
    # ending before that first aligned position (ends - inner >= -15) is one chunk.
    inner = (starts + 15) // 16 * 16
    chunks = tl.where(gs < G, tl.maximum((ends - inner + chunk - 1) // chunk, 1), 0)
    firsts = tl.cumsum(chunks, 0) - chunks
    return gs, starts, ends, chunks, firsts, tl.sum(chunks, 0)


@triton.jit
def _quantize_item(
    item, x_ptr, q_ptr, scales_ptr, counts_ptr, amax_ptr, offs_ptr, R, K, G, stride_xr, stride_xk,
    stride_qr, chunk, PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr,
    PACK_K: tl.constexpr, L2_HINTS: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Item ``item`` of one (R, Ktot) view in this PHASE."""
    gs, starts, ends, chunks, firsts, per_row_block = _group_table(offs_ptr, G, K, chunk, BLOCK_G)
    rb, g, n, j, start, end = group_item(item, per_row_block, gs, starts, ends, chunks, firsts)
    inner = (start + 15) // 16 * 16
    lo = tl.where(j == 0, start, inner + j * chunk)
    hi = tl.minimum(end, inner + (j + 1) * chunk)
    rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
    g_row = g * R
    if INT64_INDEX:
        rows = rows.to(tl.int64)
        g_row = g.to(tl.int64) * R
        start = start.to(tl.int64)
        end = end.to(tl.int64)
        lo = lo.to(tl.int64)
        hi = hi.to(tl.int64)
    row_mask = rows < R
    x_rows = x_ptr + rows[:, None] * stride_xr
    q_rows = q_ptr + rows[:, None] * stride_qr
    if n == 1:
        if PHASE == PHASE_FUSED or PHASE == PHASE_CAST:  # noqa: SIM109  (constexprs: `in` is no Triton construct)
            scale = quantize_group_span(
                x_rows, q_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
            tl.store(scales_ptr + g_row + rows, scale, mask=row_mask)
    else:
        # L2 hints (module docstring): the first read keeps the chunk, the second read and the stores go first
        KEEP: tl.constexpr = "evict_last" if L2_HINTS else ""
        DROP: tl.constexpr = "evict_first" if L2_HINTS else ""
        amax_slots = amax_ptr + g_row + rows
        if PHASE != PHASE_CAST:
            amax = span_amax(x_rows, row_mask, lo, hi, stride_xk, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX, KEEP)
            tl.atomic_max(amax_slots, amax.to(tl.int32, bitcast=True), mask=row_mask, sem="release")
        if PHASE == PHASE_FUSED or PHASE == PHASE_ARRIVE:  # noqa: SIM109  (constexprs: `in` is no Triton construct)
            count_ptr = counts_ptr + g * tl.cdiv(R, BLOCK_R) + rb
            arrive(count_ptr)
            if PHASE == PHASE_FUSED:
                wait_for_slice(count_ptr, n)
                tl.debug_barrier()  # the amax reads after the wait
        if PHASE == PHASE_FUSED or PHASE == PHASE_CAST:  # noqa: SIM109  (constexprs: `in` is no Triton construct)
            folded = tl.atomic_max(amax_slots, tl.zeros_like(rows).to(tl.int32), mask=row_mask, sem="acquire")
            scale = scale_from_amax(folded.to(tl.float32, bitcast=True), FP8_MAX, ROUND_POW2)
            cast_span(
                x_rows, q_rows, row_mask, lo, hi, stride_xk, scale, BLOCK_K, PACK_K, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, DROP, DROP,
            )  # fmt: skip
            if j == 0:
                tl.store(scales_ptr + g_row + rows, scale, mask=row_mask)


@triton.jit
def _group_chunks_kernel(
    x1_ptr, q1_ptr, scales1_ptr, x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr, R1, R2, K, G, min_chunk, num_sms,
    counts1_at, amax1_at, counts2_at, amax2_at, stride_x1r, stride_x1k, stride_x2r, stride_x2k,
    PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, CHUNK_TILES: tl.constexpr,
    PROGRAMS_PER_SM: tl.constexpr, BLOCK_G: tl.constexpr, PACK_K: tl.constexpr, L2_HINTS: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """One or two (R_i, K) views of one offs (R2 = 0: one view) -> row-major (R_i, K) outputs. x1's items come
    first, then x2's, in one order. chunk = max(CHUNK_TILES * BLOCK_K, min_chunk). Grid: at most
    PROGRAMS_PER_SM * num_sms programs (only the grid reads those two)."""
    chunk = tl.maximum(CHUNK_TILES * BLOCK_K, min_chunk)
    per_row_block = tl.sum(_group_table(offs_ptr, G, K, chunk, BLOCK_G)[3], 0)
    items_1 = tl.cdiv(R1, BLOCK_R) * per_row_block
    items = items_1 + tl.cdiv(R2, BLOCK_R) * per_row_block
    if PROGRAMS_PER_SM == 0:  # one item per program (module docstring, Progress)
        _quantize_view_item(
            tl.program_id(0), items_1, items, x1_ptr, q1_ptr, scales1_ptr, x2_ptr, q2_ptr, scales2_ptr, offs_ptr,
            ws_ptr, R1, R2, K, G, chunk, counts1_at, amax1_at, counts2_at, amax2_at, stride_x1r, stride_x1k,
            stride_x2r, stride_x2k, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, PACK_K, L2_HINTS, INT64_INDEX, FP8_DTYPE,
            FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip
    else:  # programs take items from a ticket, the next only once the last is cast (module docstring, Progress)
        ticket_ptr = ws_ptr
        if PHASE == PHASE_CAST:
            ticket_ptr = ws_ptr + 1
        item = tl.atomic_add(ticket_ptr, 1, sem="relaxed")
        while item < items:
            _quantize_view_item(
                item, items_1, items, x1_ptr, q1_ptr, scales1_ptr, x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr,
                R1, R2, K, G, chunk, counts1_at, amax1_at, counts2_at, amax2_at, stride_x1r, stride_x1k,
                stride_x2r, stride_x2k, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, PACK_K, L2_HINTS, INT64_INDEX, FP8_DTYPE,
                FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            )  # fmt: skip
            item = tl.atomic_add(ticket_ptr, 1, sem="relaxed")


@triton.jit(noinline=True)
def _quantize_view_item(
    item, items_1, items, x1_ptr, q1_ptr, scales1_ptr, x2_ptr, q2_ptr, scales2_ptr, offs_ptr, ws_ptr, R1, R2, K, G,
    chunk, counts1_at, amax1_at, counts2_at, amax2_at, stride_x1r, stride_x1k, stride_x2r, stride_x2k,
    PHASE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr, PACK_K: tl.constexpr,
    L2_HINTS: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Item ``item`` of the launch: x1's items first, then x2's; none past ``items``.

    Not inlined: inlined into the loop over items, its values took registers across the whole loop body (sm_90
    compile, 64x64/w4: 226 registers per thread in the loop, 128 as a call; 128 with one item per program).
    """
    if item < items_1:
        _quantize_item(
            item, x1_ptr, q1_ptr, scales1_ptr, ws_ptr + counts1_at, ws_ptr + amax1_at, offs_ptr, R1, K, G,
            stride_x1r, stride_x1k, K, chunk, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, PACK_K, L2_HINTS, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip
    elif item < items:
        _quantize_item(
            item - items_1, x2_ptr, q2_ptr, scales2_ptr, ws_ptr + counts2_at, ws_ptr + amax2_at, offs_ptr, R2,
            K, G, stride_x2r, stride_x2k, K, chunk, PHASE, BLOCK_R, BLOCK_K, BLOCK_G, PACK_K, L2_HINTS, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip


def chunk_length(backend: Backend, device: torch.device, ktot: int) -> int:
    """The shortest chunk the launch may use (the kernel's ``min_chunk``): long enough that a slice of Ktot
    positions has at most ``coop_limit`` chunks (module docstring, Progress), a multiple of 16; 16 where nothing
    waits (the interpreter)."""
    if backend.kind == "interpreter":
        return 16
    per_chunk = triton.cdiv(max(ktot, 1), coop_limit(backend, device))
    return max(16, triton.cdiv(per_chunk, 16) * 16)


def _sm_count(backend: Backend, device: torch.device) -> int:
    """The device's SMs (CUs on ROCm); 1 in the interpreter."""
    if backend.kind == "interpreter":
        return 1
    return device_multiprocessors(device)


def _grid(meta) -> tuple[int]:
    """Programs: the items at most (every row block times the chunks of Ktot plus one per group), at most
    PROGRAMS_PER_SM per SM."""
    chunk = max(meta["CHUNK_TILES"] * meta["BLOCK_K"], meta["min_chunk"])
    row_blocks = triton.cdiv(meta["R1"], meta["BLOCK_R"]) + triton.cdiv(meta["R2"], meta["BLOCK_R"])
    items = row_blocks * (triton.cdiv(meta["K"], chunk) + meta["G"])
    if meta["PROGRAMS_PER_SM"] == 0:
        return (max(1, items),)
    return (max(1, min(items, meta["PROGRAMS_PER_SM"] * meta["num_sms"])),)


def launch_group_chunks(
    xs: Sequence[torch.Tensor], offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend,
) -> list[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """fp8moe.kernels._group_tiles.launch_group_tiles (same arguments, same outputs) on the chunked kernel."""
    outs, _ = run_chunk_phases(xs, offs, fp8_dtype, round_scales_to_power_of_2, backend)
    return outs


def run_chunk_phases(
    xs: Sequence[torch.Tensor], offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool,
    backend: Backend, phases: Sequence[int] | None = None, config: triton.Config | None = None,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], tuple[torch.Tensor, ChunkWorkspace] | None]:  # fmt: skip
    """:func:`launch_group_chunks` with the launches ``phases`` (None: the backend's) and ``config`` (None: the
    rule's, fp8moe.configs.GROUP_CHUNKS), returning the workspace with its layout too (None when nothing was
    launched): tests read the arrival counts of PHASE_ARRIVE there, benchmarks force configs."""
    rows = tuple(x.shape[0] for x in xs)
    ktot = xs[0].shape[1]
    num_groups = offs.numel()
    device = xs[0].device
    outs = view_outputs(xs, num_groups, fp8_dtype)
    if num_groups == 0 or sum(rows) == 0:
        return outs, None
    if config is None:
        r2 = rows[1] if len(rows) > 1 else 0
        shape_args = {"R1": rows[0], "R2": r2, "K": ktot, "stride_xr": xs[0].stride(0), "stride_xk": xs[0].stride(1)}
        config = configs.GROUP_CHUNKS.fixed(backend, shape_args)
    if "CHUNK_TILES" not in config.kwargs:  # the interpreter's tiles: one-tile chunks, two programs
        config = triton.Config({**config.kwargs, "CHUNK_TILES": 1, "PROGRAMS_PER_SM": 2}, num_warps=config.num_warps)
    if "L2_HINTS" not in config.kwargs:
        config = triton.Config({**config.kwargs, "L2_HINTS": False}, num_warps=config.num_warps)
    layout = ChunkWorkspace(rows, num_groups, config.kwargs["BLOCK_R"])
    ws = replay.scratch_zeros((layout.size,), torch.int32, device)
    views = [(x, q, s) for x, (q, s) in zip(xs, outs, strict=True)]
    (x1, q1, s1), (x2, q2, s2) = views[0], views[-1]  # one view: x2 is x1 with R2 = 0
    args = {
        "x1_ptr": x1, "q1_ptr": q1, "scales1_ptr": s1, "x2_ptr": x2, "q2_ptr": q2, "scales2_ptr": s2,
        "offs_ptr": offs, "ws_ptr": ws, "R1": rows[0], "R2": rows[1] if len(rows) > 1 else 0, "K": ktot,
        "G": num_groups, "min_chunk": chunk_length(backend, device, ktot),
        "num_sms": _sm_count(backend, device),
        "counts1_at": layout.counts[0], "amax1_at": layout.amax[0], "counts2_at": layout.counts[-1],
        "amax2_at": layout.amax[-1], "stride_x1r": x1.stride(0), "stride_x1k": x1.stride(1),
        "stride_x2r": x2.stride(0), "stride_x2k": x2.stride(1),
        "BLOCK_G": triton.next_power_of_2(max(num_groups, 2)),
        "PACK_K": pack_k(tuple(x.stride(1) for x in xs), *(q for q, _ in outs)),
        "INT64_INDEX": configs.needs_int64_index(*xs, *(t for pair in outs for t in pair)),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    }  # fmt: skip
    if phases is None:
        phases = (PHASE_AMAX, PHASE_CAST) if backend.kind == "interpreter" else (PHASE_FUSED,)
    for phase in phases:
        configs.launch(
            _group_chunks_kernel, configs.GROUP_CHUNKS, backend, _grid, config=config, PHASE=int(phase), **args
        )
    return outs, (ws, layout)
