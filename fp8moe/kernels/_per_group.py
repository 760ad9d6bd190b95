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
from fp8moe.kernels._span import pack_k, quantize_group_span

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
def jagged_program(G, GROUPS_FASTEST: tl.constexpr, DEPENDENT_LAUNCH: tl.constexpr = False):
    """(row block, group) of this program on the grid :func:`jagged_grid` made.

    DEPENDENT_LAUNCH (a programmatic dependent launch, fp8moe.backend.Backend.dependent_launch): before anything
    else, wait until the kernel before this one has finished and its writes are visible (it may have written x or
    offs, or still read memory this launch's outputs reuse), then let the next kernel's programs take the slots this
    one's programs free as they finish.

    The order decides which cells run together. Row blocks fastest: the programs resident at once cover a few
    groups across every row block. Groups fastest: every group of a few row blocks, so on a transposing view their
    stores fill whole rows of q (one row block's rows, every group's columns) instead of a group's part of every row.
    On the H200, with each tile forced in both orders, groups fastest took 0.87-0.96x the time at 11 of the 14
    per-group bench points and 1.00-1.03x at the other three (benchmarks/results/h200-s21-call1-ab-main.md), so most
    CUDA candidates (fp8moe.configs.PER_GROUP, PER_GROUP_DUAL) set it; the launch default stays the first.
    """
    if DEPENDENT_LAUNCH:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
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
    L2_HINTS: tl.constexpr = 0,
):
    """Scale and cast rows [pid_r * BLOCK_R, +BLOCK_R) of an (R, Ktot) view within group pid_g; store
    scales[g * R + r]. q has unit stride along K.

    INT64_INDEX: element offsets in int64, needed once an offset passes 2^31 - 1 (e.g. 16384 rows x 131072 tokens).
    ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS, L2_HINTS: whether groups that fit one tile take the
    one-read branch, that tile's width when it differs from BLOCK_K, whether it holds the edges, whether the edge
    chunks are taken one at a time, how many chunks past the tile the one-read branch takes, and which L2 eviction
    priorities the accesses carry (fp8moe.kernels._span.quantize_group_span).
    """
    start = tl.load(offs_ptr + pid_g - 1, mask=pid_g > 0, other=0)
    end = tl.load(offs_ptr + pid_g)
    start, end = clamped_group_bounds(start, end, K)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    if INT64_INDEX:
        pid_g = pid_g.to(tl.int64)
        rows = rows.to(tl.int64)
        start = start.to(tl.int64)
        end = end.to(tl.int64)
    row_mask = rows < R
    x_rows = x_ptr + rows[:, None] * stride_xr  # (BLOCK_R, 1)
    q_rows = q_ptr + rows[:, None] * stride_qr
    scale = quantize_group_span(
        x_rows, q_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX,
        FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE, ONE_READ, ONE_READ_K, EDGES_IN_TILE,
        EDGE_LOOP, EXTRA_CHUNKS, L2_HINTS,
    )  # fmt: skip
    tl.store(scales_ptr + pid_g * R + rows, scale, mask=row_mask)


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
    L2_HINTS: tl.constexpr = 0,
    DEPENDENT_LAUNCH: tl.constexpr = False,
):
    """x (R, K) any strides -> q (R, K) with unit stride along K. Grid :func:`jagged_grid` of cdiv(R, BLOCK_R) row
    blocks and G groups; GROUPS_FASTEST orders it, ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS and
    L2_HINTS shape the span code (all a config's); DEPENDENT_LAUNCH is the backend's (:func:`jagged_program`).

    K (= Ktot) and G are only in the CUDA autotune key; the group bounds come from offs.
    """
    pid_r, pid_g = jagged_program(G, GROUPS_FASTEST, DEPENDENT_LAUNCH)
    quantize_group_rows(
        x_ptr, q_ptr, scales_ptr, offs_ptr, R, K, pid_r, pid_g, stride_xr, stride_xk,
        stride_qr, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2,
        CAST_MODE, ONE_READ, ONE_READ_K, EDGES_IN_TILE, EDGE_LOOP, EXTRA_CHUNKS, L2_HINTS,
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
