"""The one amax/quantize loop every row kernel runs: scale and cast a span of columns of BLOCK_R rows.

The batched row kernel (fp8moe.kernels._rows) quantizes whole rows, the per-group kernel (fp8moe.kernels._per_group)
the columns of one group; both are this loop on a span [start, end) of an (R, K) view, one scale per row.

The span splits into its 16-aligned interior [ceil16(start), floor16(end)) and at most two partial 16-column edges.
Interior tiles start at a multiple of 16 elements, so Triton can prove 16-byte alignment and issue vector loads and
stores (a tile starting at the raw group offset compiled to 2-byte loads and 1-byte stores: PTX for sm_90, triton
3.9, 48 ld.global.b16 and 32 st.global.b8 per 16x256 tile), and every element they load lies in the span, so the amax
needs no span mask (its select and compares were a third of pass 1's instructions). The edges, present only where a
group edge is unaligned, are loaded with exact masks (scalar accesses; stores must stay inside the span, the
neighbouring group belongs to another program), folded into the amax, and reloaded to be quantized.

When the interior fits one tile (ONE_PASS) x stays in registers: one read. Otherwise pass 1 keeps an elementwise
running max over the tiles, in the input dtype where Triton keeps it there (one packed bf16 max per two elements),
with one cross-lane reduction at the end, and pass 2 reads the span again, walking backwards so that the most
recently read tiles, the likeliest still in L2, come first. Both passes load the next tile before working on the
current one: Triton does not pipeline these loops (no cp.async in the PTX at num_stages=3, triton 3.9). Measured on
the H200 (benchmarks/results/h200-bench-2026-12-01-s5-summary.md) the row kernels were issue-bound, which is why the
loop bodies are kept short: `python benchmarks/sass_counts.py` counts them (tests/test_kernel_instructions.py keeps
the cuts).
"""

from __future__ import annotations

import triton
import triton.language as tl

from fp8moe.kernels._common import (
    abs_max_keep_nan,
    amax_of_magnitude_bits,
    magnitude_bits,
    max_of_amaxes,
    quantize,
    scale_from_amax,
)

__all__ = ["quantize_span"]


@triton.jit
def _load_cols(x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX: tl.constexpr):
    """x[:, cols] of the rows, 0 outside [lo, hi). Aligned lo and hi keep 16-byte loads; the edge chunks pass exact
    bounds."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= lo) & (cols < hi))[None, :]
    return tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)


@triton.jit
def _store_cols(q_rows, row_mask, cols, lo, hi, q, INT64_INDEX: tl.constexpr):
    """q[:, cols] = q of the rows, only inside [lo, hi)."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= lo) & (cols < hi))[None, :]
    tl.store(q_rows + cols[None, :], q, mask=mask)


@triton.jit
def quantize_span(
    x_rows,
    q_rows,
    row_mask,
    start,
    end,
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
    CAST_MODE: tl.constexpr,
):
    """Scale and cast x[r, start:end] of BLOCK_R rows into q[r, start:end]; returns the (BLOCK_R,) f32 scales.

    Args:
        x_rows: (BLOCK_R, 1) pointers to column 0 of each row of x; columns are ``stride_xk`` apart.
        q_rows: (BLOCK_R, 1) pointers to column 0 of each row of q; columns are contiguous.
        row_mask: (BLOCK_R,) rows that exist.
        start, end: the span, 0 <= start <= end <= the row length (loads and stores stay inside it; an empty span
            gives the EPS-derived scale and stores nothing).
        ONE_PASS: the caller guarantees that the aligned interior fits one tile,
            floor16(end) - ceil16(start) <= BLOCK_K.
    """
    inner_lo = (start + 15) // 16 * 16
    inner_hi = end // 16 * 16
    # The span is a head [start, min(inner_lo, end)), the aligned interior [inner_lo, inner_hi) and a tail
    # [max(inner_hi, inner_lo), end). Head and tail are partial 16-column chunks, each empty when its group edge is
    # 16-aligned: they are loaded with exact masks (scalar accesses), only when not empty, and reloaded for pass 2.
    edge = tl.arange(0, 16)
    head_cols = start // 16 * 16 + edge
    head_hi = tl.minimum(inner_lo, end)
    tail_lo = tl.maximum(inner_hi, inner_lo)
    tail_cols = tail_lo + edge
    edge_amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
    if start < head_hi:
        x_head = _load_cols(x_rows, row_mask, head_cols, start, head_hi, stride_xk, INT64_INDEX)
        edge_amax = max_of_amaxes(edge_amax, abs_max_keep_nan(x_head, 1))
    if tail_lo < end:
        x_tail = _load_cols(x_rows, row_mask, tail_cols, tail_lo, end, stride_xk, INT64_INDEX)
        edge_amax = max_of_amaxes(edge_amax, abs_max_keep_nan(x_tail, 1))
    block = tl.arange(0, BLOCK_K)
    if ONE_PASS:
        cols = inner_lo + block
        x = _load_cols(x_rows, row_mask, cols, inner_lo, inner_hi, stride_xk, INT64_INDEX)
        scale = scale_from_amax(max_of_amaxes(abs_max_keep_nan(x, 1), edge_amax), FP8_MAX, ROUND_POW2)
        q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        _store_cols(q_rows, row_mask, cols, inner_lo, inner_hi, q, INT64_INDEX)
    else:
        # Pass 1 needs no span mask: every interior element is in the span, and masked lanes load 0. The running max
        # is an integer max of |x|'s bit patterns (magnitude_bits: exact and NaN-keeping, one instruction per
        # element, no conversion; a float max of bf16 cost a conversion and a max per element on triton 3.6).
        acc = magnitude_bits(tl.zeros((BLOCK_R, BLOCK_K), dtype=x_rows.dtype.element_ty))
        x_next = _load_cols(x_rows, row_mask, inner_lo + block, inner_lo, inner_hi, stride_xk, INT64_INDEX)
        for k0 in range(inner_lo, inner_hi, BLOCK_K):
            x = x_next
            x_next = _load_cols(x_rows, row_mask, k0 + BLOCK_K + block, inner_lo, inner_hi, stride_xk, INT64_INDEX)
            acc = tl.maximum(acc, magnitude_bits(x))
        amax = amax_of_magnitude_bits(acc, x_rows.dtype.element_ty, 1)
        scale = scale_from_amax(max_of_amaxes(amax, edge_amax), FP8_MAX, ROUND_POW2)
        num_tiles = tl.cdiv(inner_hi - inner_lo, BLOCK_K)
        last = inner_lo + (num_tiles - 1) * BLOCK_K
        x_next = _load_cols(x_rows, row_mask, last + block, inner_lo, inner_hi, stride_xk, INT64_INDEX)
        for i in range(num_tiles):
            cols = last - i * BLOCK_K + block
            x = x_next
            x_next = _load_cols(x_rows, row_mask, cols - BLOCK_K, inner_lo, inner_hi, stride_xk, INT64_INDEX)
            q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            _store_cols(q_rows, row_mask, cols, inner_lo, inner_hi, q, INT64_INDEX)
    if start < head_hi:
        x_head = _load_cols(x_rows, row_mask, head_cols, start, head_hi, stride_xk, INT64_INDEX)
        q_head = quantize(x_head, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        _store_cols(q_rows, row_mask, head_cols, start, head_hi, q_head, INT64_INDEX)
    if tail_lo < end:
        x_tail = _load_cols(x_rows, row_mask, tail_cols, tail_lo, end, stride_xk, INT64_INDEX)
        q_tail = quantize(x_tail, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        _store_cols(q_rows, row_mask, tail_cols, tail_lo, end, q_tail, INT64_INDEX)
    return scale
