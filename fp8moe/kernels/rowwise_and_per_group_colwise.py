"""Both quantizations of a jagged activation from two reads: rowwise_2d_scale_and_cast and per_group_colwise_scales
of one (M, K) x in three launches, each output bitwise that op's (SPEC §5.6, §11).

Why: the FP8 grouped GEMM quantizes A rowwise for the forward GEMM and per (group, column) for the weight-gradient
GEMM, and grad_out likewise for the dgrad and weight-gradient GEMMs. Run as ops, each tensor is read three times
(the rowwise op once, the per-group op twice: amax, then cast). This is the expert-weight pair of
fp8moe.kernels._pair with jagged columns: P = K is x's contiguous dim, Q = M its rows, cut into the groups of offs.

1. **Amax launch**: work items are (position block, group, chunk of the group's rows), plus the chunks of the rows
   past offs[-1] (in no group, quantized rowwise only). An item reads its (BLOCK_P, chunk) block of x once, folds
   each tile's max over its positions into the row amaxes and its running max over its rows into the group's
   column amaxes, by integer atomic max into zeroed words (fp8moe.kernels._pair).
2. **Scales launch**: both outputs' scales from the folded amaxes (an empty group's column amax stays 0: the EPS
   scale, as the op's).
3. **Cast launch**: the same items read their block again and store both outputs: the rowwise one in the layout x
   was loaded in, the per-group one (column-major) across it, in 4-byte words of four rows where the chunk's bounds
   and M are 16-aligned (the grouped GEMM's groups are), with exact byte masks elsewhere.

Items never wait for each other. Group bounds are the running maxima of the clamped offsets (SPEC §4.7, as the
cooperative kernels take them): for valid offsets, the op's groups. Rows past offs[-1] get no per-group output
(unspecified there, SPEC §4). x must have unit stride along K; any other layout, or an empty dim, runs the two ops.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels import per_group_colwise_scales as _per_group_colwise
from fp8moe.kernels import rowwise_2d_scale_and_cast as _rowwise_2d
from fp8moe.kernels._common import amax_of_magnitude_bits, fold_amax, fp8_constexprs, quantize
from fp8moe.kernels._coop import group_bounds
from fp8moe.kernels._pair import cast_along_p, cast_quads, fold_tiles_along_q, launch_pair

__all__ = ["fusable", "launch"]


def fusable(x: torch.Tensor) -> bool:
    """Whether the fused launches take this (M, K) ``x``: unit stride along K and no empty dim; else :func:`launch`
    runs the two ops."""
    return x.numel() > 0 and x.stride(1) == 1


@triton.jit
def _item(offs_ptr, G, M, item, chunk, BLOCK_G: tl.constexpr):
    """Item ``item`` of one position block (items numbered group by group, chunk by chunk; lane G is the rows past
    offs[-1]): its group g (G for those rows), its rows [lo, hi), and whether it exists."""
    gs = tl.arange(0, BLOCK_G)
    starts, ends = group_bounds(offs_ptr, gs, G, M)
    ends = tl.where(gs >= G, M, ends)
    starts = tl.where(gs > G, M, starts)
    chunks = (ends - starts + chunk - 1) // chunk
    firsts = tl.cumsum(chunks, 0) - chunks
    g = tl.sum((firsts + chunks <= item).to(tl.int32), 0)
    exists = g <= G
    j = item - tl.sum(tl.where(gs == g, firsts, 0), 0)
    lo = tl.sum(tl.where(gs == g, starts, 0), 0) + j * chunk
    hi = tl.minimum(lo + chunk, tl.sum(tl.where(gs == g, ends, 0), 0))
    return g, lo, hi, exists


def _items_bound(meta) -> int:
    """Items per position block at most: the chunks of M plus one partial chunk per group and for the tail."""
    return triton.cdiv(meta["M"], meta["CHUNK_TILES"] * meta["BLOCK_Q"]) + meta["G"] + 1


def _grid(meta) -> tuple[int]:
    """One program per (item, position block), the position block fastest (:func:`_program`)."""
    return (_items_bound(meta) * triton.cdiv(meta["P"], meta["BLOCK_P"]),)


@triton.jit
def _program(P, BLOCK_P: tl.constexpr):
    """(item, position block) of this program. Position blocks vary fastest, so the programs running together read
    whole rows of x (as the weight pair's do); with items fastest they read 64-128-byte stripes of far-apart rows,
    and the pair ran at 37-66% of copy bandwidth on the H200 (benchmarks/results/h200-s13-summary.md)."""
    blocks = tl.cdiv(P, BLOCK_P)
    pid = tl.program_id(0)
    return pid // blocks, pid % blocks


@triton.jit
def _jagged_amax_kernel(
    x_ptr, offs_ptr, amax_ptr, G, M, P, stride_xq,
    BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, CHUNK_TILES: tl.constexpr, BLOCK_G: tl.constexpr,
    INT64_INDEX: tl.constexpr,
):  # fmt: skip
    """amax[q] = max |x[q, :]| (rowwise, M words) and amax[M + g * P + p] = max |x[q, p]| over the rows q of group g,
    as f32 bits folded by atomic max into zeroed words. Grid: :func:`_grid`."""
    item, p_block = _program(P, BLOCK_P)
    g, lo, hi, exists = _item(offs_ptr, G, M, item, CHUNK_TILES * BLOCK_Q, BLOCK_G)
    if exists:
        p = p_block * BLOCK_P + tl.arange(0, BLOCK_P)
        g_at = g * P
        if INT64_INDEX:
            p = p.to(tl.int64)
            lo = lo.to(tl.int64)
            hi = hi.to(tl.int64)
            g_at = g.to(tl.int64) * P
        p_mask = p < P
        x_rows = x_ptr + p[:, None]
        acc = fold_tiles_along_q(
            x_rows, p_mask, lo, hi, stride_xq, amax_ptr, x_ptr.dtype.element_ty, BLOCK_P, BLOCK_Q, INT64_INDEX
        )  # the row amaxes, folded tile by tile
        if g < G:
            col_amax = amax_of_magnitude_bits(acc, x_ptr.dtype.element_ty, 1)
            fold_amax(amax_ptr + M + g_at + p, col_amax, p_mask)


@triton.jit
def _jagged_cast_kernel(
    x_ptr, offs_ptr, rows_q_ptr, rows_scales_ptr, cols_q_ptr, cols_scales_ptr, G, M, P, stride_xq,
    BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, CHUNK_TILES: tl.constexpr, BLOCK_G: tl.constexpr,
    PACK_Q: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """rows_q[q * P + p] (row-major) and, for rows in a group, cols_q[p * M + q] (column-major) at the scales the
    scales launch wrote. PACK_Q: M % 16 == 0, so a chunk with 16-aligned bounds (the grouped GEMM's groups) reads
    its tiles as four interleaved quarters (fp8moe.kernels._span.load_quad) and stores the column-major output in
    4-byte words of four rows (fp8moe.kernels._pair.cast_quads); other chunks store bytes with exact masks.
    ROUND_POW2 is unused here (the scales are made); it is an argument so the autotune key holds every result
    argument."""
    item, p_block = _program(P, BLOCK_P)
    g, lo, hi, exists = _item(offs_ptr, G, M, item, CHUNK_TILES * BLOCK_Q, BLOCK_G)
    if exists:
        p = p_block * BLOCK_P + tl.arange(0, BLOCK_P)
        in_group = g < G
        aligned = (lo % 16 == 0) & (hi % 16 == 0) & in_group
        g_at = tl.minimum(g, G - 1) * P  # the rows past offs[-1] (g = G) load group G - 1's scales and store none
        if INT64_INDEX:
            p = p.to(tl.int64)
            lo = lo.to(tl.int64)
            hi = hi.to(tl.int64)
            g_at = tl.minimum(g, G - 1).to(tl.int64) * P
        p_mask = p < P
        scale_col = tl.load(cols_scales_ptr + g_at + p, mask=p_mask, other=0.0)  # (BLOCK_P,)
        x_rows = x_ptr + p[:, None]
        rows_q = rows_q_ptr + p[:, None]
        cols_q = cols_q_ptr + p[:, None] * M
        BLOCK_W: tl.constexpr = BLOCK_Q // 4
        if PACK_Q and aligned:
            # lo and hi are multiples of 16; written so that Triton can prove it, which keeps the word stores 16
            # bytes wide (store_quad), as the weight pair's chunk bounds are.
            cast_quads(
                x_rows, p_mask, lo // 16 * 16, hi // 16 * 16, stride_xq, cols_q, scale_col[:, None], rows_q,
                rows_scales_ptr, P, BLOCK_Q, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ,
                CAST_MODE,
            )  # fmt: skip
        else:  # unaligned chunk bounds, or the rows past offs[-1]: per-group bytes with exact masks, in quarter
            # tiles (full tiles took 168-255 registers per thread where the aligned loop takes 72-122, sm_90)
            for q0 in range(lo, hi, BLOCK_W):
                rows = q0 + tl.arange(0, BLOCK_W)
                if INT64_INDEX:
                    rows = rows.to(tl.int64)
                row_mask = rows < hi
                mask = p_mask[:, None] & row_mask[None, :]
                x = tl.load(x_rows + rows[None, :] * stride_xq, mask=mask, other=0.0)
                cast_along_p(
                    x, rows, p_mask, row_mask, rows_q, rows_scales_ptr, P, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ,
                    CAST_MODE,
                )  # fmt: skip
                if in_group:
                    q = quantize(x, scale_col[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
                    tl.store(cols_q + rows[None, :], q, mask=mask)


@replay.replayable
def launch(
    x: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allocate and compute rowwise_2d_scale_and_cast(x) and per_group_colwise_scales(x, offs) for a validated
    (M, K) ``x``, any strides; offs is never read on the host.

    Returns:
        q_rows (M, K) row-major, scales_rows (M, 1), q_cols (M, K) strides (1, M), scales_cols (G * K,): the two ops'
        outputs, bitwise (rows past offs[-1] of q_cols unspecified, as the op's).
    """
    if not fusable(x) or offs.numel() == 0:
        q_r, s_r = _rowwise_2d.launch(x, fp8_dtype, round_scales_to_power_of_2, backend)
        q_c, s_c = _per_group_colwise.launch(x, offs, fp8_dtype, round_scales_to_power_of_2, backend)
        return q_r, s_r, q_c, s_c
    m, k = x.shape
    groups = offs.numel()
    q_r = torch.empty_strided((m, k), (k, 1), dtype=fp8_dtype, device=x.device)
    s_r = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    q_c = torch.empty_strided((m, k), (1, m), dtype=fp8_dtype, device=x.device)
    s_c = torch.empty((groups * k,), dtype=torch.float32, device=x.device)
    amax = replay.scratch_zeros((m + groups * k,), torch.int32, x.device)  # rowwise words, then per group
    shape_args = {
        "G": groups, "M": m, "P": k, "stride_xq": x.stride(0),
        "BLOCK_G": triton.next_power_of_2(groups + 1),
        "INT64_INDEX": configs.needs_int64_index(x, q_r, q_c),
    }  # fmt: skip
    launch_pair(
        backend, (_jagged_amax_kernel, _jagged_cast_kernel), (configs.JAGGED_PAIR_AMAX, configs.JAGGED_PAIR_CAST),
        _grid, shape_args, {"x_ptr": x, "offs_ptr": offs}, amax, s_r.view(-1), s_c,
        {"rows_q_ptr": q_r, "rows_scales_ptr": s_r, "cols_q_ptr": q_c, "cols_scales_ptr": s_c, "PACK_Q": m % 16 == 0},
        fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )  # fmt: skip
    return q_r, s_r, q_c, s_c
