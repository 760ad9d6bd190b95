"""The one kernel body behind the three per-group (jagged) ops of SPEC §5.

All three ops quantize slices that are jagged along K and write each slice contiguously along K:

- per_group_rowwise_scales: x (M, Ktot), slice = (row m, group g), q (M, Ktot) row-major, s[g * M + m].
- per_group_colwise_scales: x (Ktot, N), slice = (column n, group g), q (Ktot, N) strides (1, Ktot), s[g * N + n].
  Seen through ``x.t()`` and ``q.t()`` this is the rowwise op on an (N, Ktot) view with a row-major output.

So the kernels work on an (R, Ktot) view (R rows = M or N, each jagged along K) given by strides, and
:func:`launch_jagged_rows` is the rowwise op on such a view. A program owns one group and BLOCK_R rows: it reads the
group's [start, end) from ``offs`` on the device and runs the span loop shared with the dense kernels
(fp8moe.kernels._span) over it: one read when the group fits one BLOCK_K tile, two otherwise. It writes its BLOCK_R
scales. Empty groups write their EPS-derived scale and no data. Columns past offs[-1] belong to no group and are left
unwritten (fp8ref.ops writes 0x00 there; comparisons exclude them, SPEC §4).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs
from fp8moe.backend import Backend
from fp8moe.kernels._common import fp8_constexprs
from fp8moe.kernels._span import group_span_fits, pack_k, quantize_group_span, quantize_span

__all__ = ["jagged_grid", "jagged_program", "launch_jagged_rows", "quantize_group_rows"]


#: Most programs along a grid's first dim (CUDA's limit; the groups-fastest grid puts every program there).
MAX_GRID_X = 2**31 - 1


def jagged_grid(row_blocks: int, groups: int, groups_fastest: bool) -> tuple[int, ...]:
    """The launch grid of a jagged kernel with ``row_blocks * groups`` programs (:func:`jagged_program` maps a
    program to its cell): (row_blocks, groups), or with ``groups_fastest`` one dim whose consecutive programs take
    consecutive groups of one row block."""
    if not groups_fastest:
        return (row_blocks, groups)
    if row_blocks * groups > MAX_GRID_X:
        raise ValueError(
            f"a groups-fastest grid of {row_blocks} row blocks x {groups} groups exceeds {MAX_GRID_X} programs"
        )
    return (row_blocks * groups,)


@triton.jit
def clamped_group_bounds(start, end, K):
    """[start, end) of a group from unvalidated offs (no host sync checks them): clamped to [0, K] with end >= start,
    so offs[-1] > Ktot cuts the last group at Ktot exactly as fp8ref's searchsorted does, and no offset can address
    memory outside x or q."""
    start = tl.minimum(tl.maximum(start, 0), K)
    end = tl.minimum(tl.maximum(end, start), K)
    return start, end


@triton.jit
def jagged_program(G, GROUPS_FASTEST: tl.constexpr):
    """(row block, group) of this program on the grid :func:`jagged_grid` made.

    The order decides which cells run together. Row blocks fastest: the programs resident at once cover a few
    groups across every row block. Groups fastest: every group of a few row blocks, so on a transposing view their
    stores fill whole rows of q (one row block's rows, every group's columns) instead of a group's part of every row.
    On the H200, with each tile forced in both orders, groups fastest took 0.87-0.96x the time at 11 of the 14
    per-group bench points and 1.00-1.03x at the other three (benchmarks/results/h200-s21-call1-ab-main.md), so most
    CUDA candidates (fp8moe.configs.PER_GROUP, PER_GROUP_DUAL) set it; the launch default stays the first.
    """
    if GROUPS_FASTEST:
        pid = tl.program_id(0)
        pid_r = pid // G
        pid_g = pid - pid_r * G
    else:
        pid_r = tl.program_id(0)
        pid_g = tl.program_id(1)
    return pid_r, pid_g


@triton.jit
def quantize_group_rows(
    x_ptr,
    q_ptr,
    scales_ptr,
    offs_ptr,
    R,
    K,
    pid_r,
    pid_g,
    stride_xr,
    stride_xk,
    stride_qr,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PACK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
    ONE_READ: tl.constexpr = True,
    ONE_READ_K: tl.constexpr = 0,
    EDGES_IN_TILE: tl.constexpr = False,
    EDGE_LOOP: tl.constexpr = False,
    EXTRA_CHUNKS: tl.constexpr = 0,
    LOOP_HALVES: tl.constexpr = False,
):
    """Scale and cast rows [pid_r * BLOCK_R, +BLOCK_R) of an (R, Ktot) view within group pid_g; store
    scales[g * R + r]. q has unit stride along K.

    INT64_INDEX: element offsets in int64, needed once an offset passes 2^31 - 1 (e.g. 16384 rows x 131072 tokens).
    ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS: whether groups that fit one tile take the one-read
    branch, that tile's width when it differs from BLOCK_K, whether it holds the edges, whether the edge chunks are
    taken one at a time, and how many chunks past the tile the one-read branch takes
    (fp8moe.kernels._span.quantize_group_span).

    LOOP_HALVES (the ``/h`` candidates): a group that does not fit the one-read tile is quantized in two halves of
    the rows, one after the other, each a two-pass loop over (BLOCK_R // 2, BLOCK_K) tiles with its own scales; a
    group that fits keeps all BLOCK_R rows in one read. Rows are independent, so the bytes written are the same.
    The loop holds about three tiles at once (running max, current, next), so beside a one-read tile of its own
    width it sets the kernel's registers: the one-read gap ladder's largest factor left on the H200, 1.15-1.21x
    (benchmarks/results/issue11-misses.md). In halves it holds three half tiles. Compiled for sm_90 (triton 3.6,
    benchmarks/sass_counts.py --candidates) the dual op's 64x64/w4/g goes from 161 to 128 registers and 32x128/w4/g
    from 142 to 128 (3 -> 4 programs per SM), rowwise 64x128/w4 from 139 to 116 (3 -> 4). The colwise view's
    32-row tiles go the other way: 32x128/w8/g from 63 to 107 registers (4 -> 2). The halves are unrolled: a
    run-time loop over them compiled to more registers for the dual op and rowwise tiles. Not timed yet
    (benchmarks/prepared_calls.sh).
    """
    start = tl.load(offs_ptr + pid_g - 1, mask=pid_g > 0, other=0)
    end = tl.load(offs_ptr + pid_g)
    start, end = clamped_group_bounds(start, end, K)
    if INT64_INDEX:
        pid_g = pid_g.to(tl.int64)
        start = start.to(tl.int64)
        end = end.to(tl.int64)
    halves = LOOP_HALVES and BLOCK_R >= 2
    if halves:
        fits = group_span_fits(start, end, BLOCK_K, PACK_K, ONE_READ, ONE_READ_K, EDGES_IN_TILE, EXTRA_CHUNKS)
    else:
        fits = True
    if fits:
        rows = _block_rows(pid_r * BLOCK_R, BLOCK_R, INT64_INDEX)
        row_mask = rows < R
        scale = quantize_group_span(
            x_ptr + rows[:, None] * stride_xr, q_ptr + rows[:, None] * stride_qr, row_mask, start, end, stride_xk,
            BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
            ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS, TWO_PASS=not halves,
        )  # fmt: skip
        tl.store(scales_ptr + pid_g * R + rows, scale, mask=row_mask)
    else:
        HALF: tl.constexpr = BLOCK_R // 2
        for half in tl.static_range(2):
            half_rows = _block_rows(pid_r * BLOCK_R + half * HALF, HALF, INT64_INDEX)
            half_mask = half_rows < R
            half_scale = quantize_span(
                x_ptr + half_rows[:, None] * stride_xr, q_ptr + half_rows[:, None] * stride_qr, half_mask, start,
                end, stride_xk, HALF, BLOCK_K, False, PACK_K, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ,
                ROUND_POW2, CAST_MODE, EDGE_LOOP,
            )  # fmt: skip
            tl.store(scales_ptr + pid_g * R + half_rows, half_scale, mask=half_mask)


@triton.jit
def _block_rows(first, BLOCK: tl.constexpr, INT64_INDEX: tl.constexpr):
    """Rows [first, first + BLOCK), in int64 where INT64_INDEX says offsets need it."""
    rows = first + tl.arange(0, BLOCK)
    if INT64_INDEX:
        rows = rows.to(tl.int64)
    return rows


@triton.jit
def _per_group_rows_kernel(
    x_ptr,
    q_ptr,
    scales_ptr,
    offs_ptr,
    R,
    K,
    G,
    stride_xr,
    stride_xk,
    stride_qr,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PACK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
    GROUPS_FASTEST: tl.constexpr = False,
    ONE_READ: tl.constexpr = True,
    ONE_READ_K: tl.constexpr = 0,
    EDGES_IN_TILE: tl.constexpr = False,
    EDGE_LOOP: tl.constexpr = False,
    EXTRA_CHUNKS: tl.constexpr = 0,
    LOOP_HALVES: tl.constexpr = False,
):
    """x (R, K) any strides -> q (R, K) with unit stride along K. Grid :func:`jagged_grid` of cdiv(R, BLOCK_R) row
    blocks and G groups; GROUPS_FASTEST orders it, ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS and
    LOOP_HALVES shape the span code (all a config's).

    K (= Ktot) and G are only in the CUDA autotune key; the group bounds come from offs.
    """
    pid_r, pid_g = jagged_program(G, GROUPS_FASTEST)
    quantize_group_rows(
        x_ptr, q_ptr, scales_ptr, offs_ptr, R, K, pid_r, pid_g, stride_xr, stride_xk,
        stride_qr, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2,
        CAST_MODE, ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS, LOOP_HALVES,
    )  # fmt: skip


def launch_jagged_rows(
    x: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row-per-group scale and cast of an (R, Ktot) view jagged along its columns (any strides).

    Returns:
        q: (R, Ktot) fp8_dtype, row-major; columns past offs[-1] unwritten.
        scales: (G * R,) f32, s[g * R + r].
    """
    rows, cols = x.shape
    num_groups = offs.numel()
    q = torch.empty_strided((rows, cols), (cols, 1), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((num_groups * rows,), dtype=torch.float32, device=x.device)
    if rows == 0 or num_groups == 0:
        return q, scales
    configs.launch(
        _per_group_rows_kernel,
        configs.PER_GROUP,
        backend,
        lambda meta: jagged_grid(triton.cdiv(meta["R"], meta["BLOCK_R"]), meta["G"], meta.get("GROUPS_FASTEST", False)),
        x_ptr=x,
        q_ptr=q,
        scales_ptr=scales,
        offs_ptr=offs,
        R=rows,
        K=cols,
        G=num_groups,
        stride_xr=x.stride(0),
        stride_xk=x.stride(1),
        stride_qr=q.stride(0),
        PACK_K=pack_k((x.stride(1),), q),
        INT64_INDEX=configs.needs_int64_index(x, q, scales),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )
    return q, scales
