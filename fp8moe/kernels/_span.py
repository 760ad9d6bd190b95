"""The one amax/quantize loop every row kernel runs: scale and cast a span of columns of BLOCK_R rows.

The batched row kernel (fp8moe.kernels._rows) quantizes whole rows, the per-group kernel (fp8moe.kernels._per_group)
the columns of one group; both are this loop on a span [start, end) of an (R, K) view, one scale per row.

Tiles start at ``start`` rounded down to a multiple of 16 elements and loads stop at ``end`` rounded up to one, so
that Triton can prove 16-byte alignment and issue vector loads and stores: a tile starting at the raw group offset
compiled to 2-byte loads and 1-byte stores (PTX for sm_90, triton 3.9: 48 ld.global.b16 and 32 st.global.b8 per
16x256 tile). The few elements read outside the span lie in sectors the span touches anyway and are masked out of
the amax. Stores must stay inside the span (the neighbouring group belongs to another program), so the tile stores
only the aligned interior [ceil16(start), floor16(end)) and the two partial 16-column edges are stored from a small
reload with an exact mask.

When the span fits one tile (ONE_PASS) x stays in registers: one read. Otherwise pass 1 keeps an elementwise running
max over the tiles (one cross-lane reduction at the end) and pass 2 reads the span again, walking backwards so that
the most recently read tiles, the likeliest still in L2, come first. Both passes load the next tile before working on
the current one: Triton does not pipeline these loops (no cp.async in the PTX at num_stages=3, triton 3.9), and with
one tile in flight per program the per-group kernels reached 41-76% of copy bandwidth on the H200
(benchmarks/results/h200-configs-2026-12-01.md). The prefetch keeps two tiles in flight for 95 instead of 94
registers (64x64 tile, 4 warps, rowwise) or 151 instead of 118 (colwise: 3 programs per SM instead of 4, 6 tiles in
flight instead of 4).
"""

from __future__ import annotations

import triton
import triton.language as tl

from fp8moe.kernels._common import abs_max_keep_nan, max_keep_nan, quantize, scale_from_amax

__all__ = ["quantize_span"]


@triton.jit
def _quantize_edge(
    x_rows,
    q_rows,
    row_mask,
    cols,
    start,
    end,
    scale,
    stride_xk,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    EXACT_ENCODE: tl.constexpr,
):
    """Quantize and store the columns of ``cols`` (one 16-column chunk) that lie in [start, end), exact mask."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= start) & (cols < end))[None, :]
    x = tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)
    q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE)
    tl.store(q_rows + cols[None, :], q, mask=mask)


@triton.jit
def _load_tile(x_rows, row_mask, cols, lo, hi, K, stride_xk, INT64_INDEX: tl.constexpr):
    """x[:, cols] of the rows, 0 outside [lo, min(hi, K)) (lo and hi multiples of 16: the mask keeps 16-byte loads)."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= lo) & (cols < hi) & (cols < K))[None, :]
    return tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)


@triton.jit
def quantize_span(
    x_rows,
    q_rows,
    row_mask,
    start,
    end,
    K,
    stride_xk,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ONE_PASS: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    EXACT_ENCODE: tl.constexpr,
):
    """Scale and cast x[r, start:end] of BLOCK_R rows into q[r, start:end]; returns the (BLOCK_R,) f32 scales.

    Args:
        x_rows: (BLOCK_R, 1) pointers to column 0 of each row of x; columns are ``stride_xk`` apart.
        q_rows: (BLOCK_R, 1) pointers to column 0 of each row of q; columns are contiguous.
        row_mask: (BLOCK_R,) rows that exist.
        start, end: the span, 0 <= start <= end <= K (an empty span gives the EPS-derived scale, stores nothing).
        K: the row length (loads never pass it).
        ONE_PASS: the caller guarantees end <= floor16(start) + BLOCK_K (the span fits one aligned tile).
    """
    block = tl.arange(0, BLOCK_K)
    lo = start // 16 * 16
    hi = (end + 15) // 16 * 16
    inner_lo = (start + 15) // 16 * 16
    inner_hi = end // 16 * 16
    if ONE_PASS:
        cols = lo + block
        if INT64_INDEX:
            cols = cols.to(tl.int64)
        load_mask = row_mask[:, None] & ((cols < hi) & (cols < K))[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_xk, mask=load_mask, other=0.0)
        in_span = ((cols >= start) & (cols < end))[None, :]
        scale = scale_from_amax(abs_max_keep_nan(tl.where(in_span, x, 0.0), 1), FP8_MAX, ROUND_POW2)
        q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE)
        store_mask = row_mask[:, None] & ((cols >= inner_lo) & (cols < inner_hi))[None, :]
        tl.store(q_rows + cols[None, :], q, mask=store_mask)
    else:
        # |x| >= 0, so the abs inside abs_max_keep_nan is exact on the accumulated values (NaN included).
        acc = tl.zeros((BLOCK_R, BLOCK_K), dtype=tl.float32)
        x_next = _load_tile(x_rows, row_mask, lo + block, lo, hi, K, stride_xk, INT64_INDEX)
        for k0 in range(lo, hi, BLOCK_K):
            x = x_next
            cols = k0 + block
            x_next = _load_tile(x_rows, row_mask, cols + BLOCK_K, lo, hi, K, stride_xk, INT64_INDEX)
            in_span = ((cols >= start) & (cols < end))[None, :]
            acc = max_keep_nan(acc, tl.where(in_span, tl.abs(x.to(tl.float32)), 0.0))
        scale = scale_from_amax(abs_max_keep_nan(acc, 1), FP8_MAX, ROUND_POW2)
        num_tiles = tl.cdiv(hi - lo, BLOCK_K)
        x_next = _load_tile(x_rows, row_mask, lo + (num_tiles - 1) * BLOCK_K + block, lo, hi, K, stride_xk, INT64_INDEX)
        for i in range(num_tiles):
            cols = lo + (num_tiles - 1 - i) * BLOCK_K + block
            x = x_next
            x_next = _load_tile(x_rows, row_mask, cols - BLOCK_K, lo, hi, K, stride_xk, INT64_INDEX)
            if INT64_INDEX:
                cols = cols.to(tl.int64)
            q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE)
            store_mask = row_mask[:, None] & ((cols >= inner_lo) & (cols < inner_hi))[None, :]
            tl.store(q_rows + cols[None, :], q, mask=store_mask)
    edge = tl.arange(0, 16)
    if start < inner_lo:
        _quantize_edge(
            x_rows, q_rows, row_mask, lo + edge, start, end, scale, stride_xk, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE,
        )  # fmt: skip
    if (inner_hi < end) & (inner_hi >= inner_lo):
        _quantize_edge(
            x_rows, q_rows, row_mask, inner_hi + edge, start, end, scale, stride_xk, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE,
        )  # fmt: skip
    return scale
