"""The one amax/quantize loop every row kernel runs: scale and cast a span of columns of BLOCK_R rows.

The batched row kernel (fp8moe.kernels._rows) quantizes whole rows, the per-group kernel (fp8moe.kernels._per_group)
the columns of one group; both are this loop on a span [start, end) of an (R, K) view, one scale per row.

The span splits into its 16-aligned interior [ceil16(start), floor16(end)) and at most two partial 16-column edges.
Interior tiles start at a multiple of 16 elements, so Triton can prove 16-byte alignment and issue vector loads and
stores (a tile starting at the raw group offset compiled to 2-byte loads and 1-byte stores: PTX for sm_90, triton
3.9, 48 ld.global.b16 and 32 st.global.b8 per 16x256 tile), and every element they load lies in the span, so the amax
needs no span mask (its select and compares were a third of pass 1's instructions). The edges, present only where a
group edge is unaligned, are loaded with exact masks (scalar accesses; stores must stay inside the span, the
neighbouring group belongs to another program), folded into the amax, and reloaded to be quantized. On a
transposing view (below) pass 1 needs no edge code: its loads run along R, so it walks [floor16(start),
ceil16(end)) with the exact mask (:func:`_span_amax_packed`).

When the interior fits one tile (ONE_PASS) x stays in registers: one read. Otherwise pass 1 keeps an elementwise
running max over the tiles, in the input dtype where Triton keeps it there (one packed bf16 max per two elements),
with one cross-lane reduction at the end, and pass 2 reads the span again, walking backwards so that the most
recently read tiles, the likeliest still in L2, come first. Both passes load the next tile before working on the
current one: Triton does not pipeline these loops (no cp.async in the PTX at num_stages=3, triton 3.9), and handing
them to its software pipeliner (``tl.range(num_stages=2..4)``, cp.async in the SASS) ran 0.76-0.98x as fast at every
bench point on the H200 (benchmarks/results/h200-s18-call1-tune-stages.md; the change, h200-s18-span-stages.diff,
reverted). Measured on the H200 (benchmarks/results/h200-bench-2026-12-01-s5-summary.md) the row kernels were
issue-bound, which is why the loop bodies are kept short: `python benchmarks/sass_counts.py` counts them
(tests/test_kernel_instructions.py keeps the cuts).

Views whose x is not contiguous along K (the colwise ops read x.t()) change a tile's layout between load and store,
through shared memory. There (PACK_K = 4, :func:`pack_k`) the interior is read as four interleaved column tiles,
joined so that the codes of four consecutive columns sit in one thread, and the exchange moves 4-byte units, not
bytes (H200: dual op 9-15% faster with words, benchmarks/results/h200-bench-2026-12-01-s6-summary.md; the join 0-3
points of copy bandwidth more, h200-bench-2026-12-02-s7-summary.md). That holds for the two-pass loop only: the
one-read path stores bytes whatever PACK_K says (H200, 128-token groups, 64x128/w4 tile: 38.8 us with bytes, 56.6 us
with words, benchmarks/results/h200-s10-resident-probe.md; at the bench's random-offs point 63.0 against 65.9 us). A
transposing cast alone runs at 97% of copy bandwidth on the H200 (benchmarks/transpose_ceiling.py): what the colwise
ops lose is the two passes. Where slices are long, pass 2 misses L2 once the slices in flight outgrow it (1.66-1.92x
the input read from DRAM, Nsight Compute, h200-bench-2026-12-02-s8-summary.md); where they are short, the bytes are
ideal and the two dependent passes leave too few loads in flight.
"""

from __future__ import annotations

import torch
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

__all__ = [
    "cast_span",
    "fold_quad_magnitudes",
    "load_quad",
    "pack_k",
    "quantize_group_span",
    "quantize_span",
    "span_amax",
    "store_quad",
]


#: The default L2 eviction priority of the span loop's loads and stores: none. A tl.constexpr, not a bare "": triton
#: 3.6 passes an omitted default on to tl.load as it is, and a plain string failed there ("'str' object has no
#: attribute 'type'"; the per-group kernels did not compile on the H200, benchmarks/results/h200-s15-call3-tests.log).
NO_HINT = tl.constexpr("")


def pack_k(x_strides_k: tuple[int, ...], *qs: torch.Tensor) -> int:
    """The PACK_K launch constexpr of :func:`quantize_span`: 4 (store words of four columns) when no x is
    contiguous along K, so every tile changes layout between its load and its store, and every q's rows start
    4-byte aligned (data pointer and every stride but the unit K stride divisible by 4); else 1 (bytes).

    Args:
        x_strides_k: the K stride of each input the launch reads.
        qs: every fp8 output the launch writes, K last.
    """
    if any(stride == 1 for stride in x_strides_k):
        return 1
    aligned = all(q.data_ptr() % 4 == 0 and all(s % 4 == 0 for s in q.stride()[:-1]) for q in qs)
    return 4 if aligned else 1


@triton.jit
def _load_cols(x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = NO_HINT):
    """x[:, cols] of the rows, 0 outside [lo, hi). Aligned lo and hi keep 16-byte loads; the edge chunks pass exact
    bounds. EVICT: the loads' L2 eviction priority, "" for none."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= lo) & (cols < hi))[None, :]
    return tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0, eviction_policy=EVICT)


@triton.jit
def _store_cols(q_rows, row_mask, cols, lo, hi, q, INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = NO_HINT):
    """q[:, cols] = q of the rows, only inside [lo, hi)."""
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    mask = row_mask[:, None] & ((cols >= lo) & (cols < hi))[None, :]
    tl.store(q_rows + cols[None, :], q, mask=mask, eviction_policy=EVICT)


@triton.jit
def _quantize_one_tile(
    x_rows, q_rows, row_mask, inner_lo, inner_hi, edge_amax, stride_xk,
    BLOCK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr, EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """An aligned interior [inner_lo, inner_hi) of at most BLOCK_K columns, read once and kept in registers; returns
    the row scales (the amax folds in ``edge_amax``, the head and tail chunks'). EVICT: the L2 eviction priority of
    its loads and stores ("" for none)."""
    cols = inner_lo + tl.arange(0, BLOCK_K)
    x = _load_cols(x_rows, row_mask, cols, inner_lo, inner_hi, stride_xk, INT64_INDEX, EVICT)
    scale = scale_from_amax(max_of_amaxes(abs_max_keep_nan(x, 1), edge_amax), FP8_MAX, ROUND_POW2)
    q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    _store_cols(q_rows, row_mask, cols, inner_lo, inner_hi, q, INT64_INDEX, EVICT)
    return scale


@triton.jit
def _quantize_cover_tile(
    x_rows, q_rows, row_mask, start, end, stride_xk,
    BLOCK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr, EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """A span on a transposing view whose 16-column cover [floor16(start), ceil16(end)) fits one BLOCK_K tile, read
    once with the span's exact mask, edges included; returns the row scales. EVICT: the L2 eviction priority of its
    loads and stores ("" for none).

    The loads run along R, so the exact mask along K splits no vector load (as in :func:`_span_amax_packed`), and
    the amax needs no edge loads or cross-warp folds of its own (:func:`_edges_amax`). The interior is stored under
    its 16-aligned mask (vector stores), the partial edge chunks from the same registers under the exact mask.
    """
    cols = start // 16 * 16 + tl.arange(0, BLOCK_K)
    x = _load_cols(x_rows, row_mask, cols, start, end, stride_xk, INT64_INDEX, EVICT)
    scale = scale_from_amax(abs_max_keep_nan(x, 1), FP8_MAX, ROUND_POW2)
    q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    inner_lo = (start + 15) // 16 * 16
    inner_hi = tl.maximum(end // 16 * 16, inner_lo)
    _store_cols(q_rows, row_mask, cols, inner_lo, inner_hi, q, INT64_INDEX, EVICT)
    if (start < inner_lo) | (inner_hi < end):
        if INT64_INDEX:
            cols = cols.to(tl.int64)
        edge = (cols >= start) & (cols < end) & ((cols < inner_lo) | (cols >= inner_hi))
        tl.store(q_rows + cols[None, :], q, mask=row_mask[:, None] & edge[None, :], eviction_policy=EVICT)
    return scale


@triton.jit
def _interior_amax(
    x_rows, row_mask, inner_lo, inner_hi, stride_xk, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """Pass 1 over the aligned interior [inner_lo, inner_hi) in (BLOCK_R, BLOCK_K) tiles: the (BLOCK_R,) f32 amax.

    No span mask: every interior element is in the span, and masked lanes load 0. The running max is an integer max
    of |x|'s bit patterns (magnitude_bits: exact and NaN-keeping, one instruction per element, no conversion; a float
    max of bf16 cost a conversion and a max per element on triton 3.6).
    """
    block = tl.arange(0, BLOCK_K)
    acc = magnitude_bits(tl.zeros((BLOCK_R, BLOCK_K), dtype=x_rows.dtype.element_ty))
    x_next = _load_cols(x_rows, row_mask, inner_lo + block, inner_lo, inner_hi, stride_xk, INT64_INDEX, EVICT)
    for k0 in range(inner_lo, inner_hi, BLOCK_K):
        x = x_next
        x_next = _load_cols(x_rows, row_mask, k0 + BLOCK_K + block, inner_lo, inner_hi, stride_xk, INT64_INDEX, EVICT)
        acc = tl.maximum(acc, magnitude_bits(x))
    return amax_of_magnitude_bits(acc, x_rows.dtype.element_ty, 1)


@triton.jit
def _interior_cast(
    x_rows, q_rows, row_mask, inner_lo, inner_hi, scale, stride_xk,
    BLOCK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EVICT: tl.constexpr = NO_HINT, STORE_EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """Pass 2 over the aligned interior at the row scales ``scale`` (BLOCK_R,), walking backwards: the tiles pass 1
    read last are the likeliest still in L2."""
    block = tl.arange(0, BLOCK_K)
    num_tiles = tl.cdiv(inner_hi - inner_lo, BLOCK_K)
    last = inner_lo + (num_tiles - 1) * BLOCK_K
    x_next = _load_cols(x_rows, row_mask, last + block, inner_lo, inner_hi, stride_xk, INT64_INDEX, EVICT)
    for i in range(num_tiles):
        cols = last - i * BLOCK_K + block
        x = x_next
        x_next = _load_cols(x_rows, row_mask, cols - BLOCK_K, inner_lo, inner_hi, stride_xk, INT64_INDEX, EVICT)
        q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        _store_cols(q_rows, row_mask, cols, inner_lo, inner_hi, q, INT64_INDEX, STORE_EVICT)


@triton.jit
def load_quad(
    x_rows, row_mask, k0, lo, hi, stride_xk, BLOCK_W: tl.constexpr, INT64_INDEX: tl.constexpr,
    EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """Columns k0 + 4w + j of the rows for j = 0..3: four (BLOCK_R, BLOCK_W) tiles, 0 outside [lo, hi)."""
    cols = k0 + 4 * tl.arange(0, BLOCK_W)
    x0 = _load_cols(x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX, EVICT)
    x1 = _load_cols(x_rows, row_mask, cols + 1, lo, hi, stride_xk, INT64_INDEX, EVICT)
    x2 = _load_cols(x_rows, row_mask, cols + 2, lo, hi, stride_xk, INT64_INDEX, EVICT)
    x3 = _load_cols(x_rows, row_mask, cols + 3, lo, hi, stride_xk, INT64_INDEX, EVICT)
    return x0, x1, x2, x3


@triton.jit
def store_quad(
    q_rows, row_mask, k0, hi, x0, x1, x2, x3, scale,
    BLOCK_W: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """Quantize the four tiles of :func:`load_quad` (``scale`` is (BLOCK_R, 1)) into q[:, k0:k0 + 4 * BLOCK_W],
    column k0 + 4w + j from tile j; columns at or past ``hi`` are not stored. k0 and every row of q are 4-byte
    aligned.

    The tiles are joined, not cast one by one: x4[r, w, i, j] is tile 2i + j, so after the reshape the four codes
    of columns k0 + 4w .. k0 + 4w + 3 sit side by side in one thread's registers, and the layout exchange on the
    way to the K-contiguous store moves them as one 4-byte unit (sm_90, triton 3.6, colwise 64x64/w4: pass 2 186
    instructions against 259 for four casts packed with shifts and ors, benchmarks/sass_counts.py).
    """
    x4 = tl.join(tl.join(x0, x2), tl.join(x1, x3))
    q4 = quantize(x4, scale[:, :, None, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    q = tl.reshape(q4, (q4.shape[0], 4 * BLOCK_W))
    cols = k0 + tl.arange(0, 4 * BLOCK_W)
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    # k0 and hi are multiples of 16, so the mask is constant over each 16 columns: 16-byte stores (the SASS guard in
    # tests/test_kernel_instructions.py checks that they stay 16 bytes wide).
    mask = row_mask[:, None] & (cols < hi)[None, :]
    tl.store(q_rows + cols[None, :], q, mask=mask, eviction_policy=EVICT)


@triton.jit
def _span_amax_packed(
    x_rows, row_mask, start, end, stride_xk, BLOCK_R: tl.constexpr, BLOCK_W: tl.constexpr,
    INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """Pass 1 of a span on a transposing view (x contiguous along R): the (BLOCK_R,) f32 amax of the whole span,
    edges included, in tiles of 4 * BLOCK_W columns read as four interleaved (BLOCK_R, BLOCK_W) tiles, the loads
    :func:`_interior_cast_packed` makes (so both passes hit the same lines in the same order).

    The loop runs over [floor16(start), ceil16(end)) with the span's exact mask: along K every load here is one
    column of BLOCK_R contiguous elements, so a mask that splits a 16-column chunk does not split a vector load,
    and the edges need no loads and cross-warp reductions of their own (:func:`_edges_amax`, which in sm_90 SASS
    is a shared-memory reduction with three barriers per edge). H200, colwise 16640 x 2048, G = 64, 64x128/w4
    tile: 62.4 -> 57.3 us with every group edge 8 positions off 16, 63.0 -> 57.1 us at random cuts, 39.6 -> 38.6 us
    at 16-aligned groups (benchmarks/results/h200-s18-call2-unaligned.md, the ``edges_in_pass1_loop`` column).
    """
    BLOCK_K: tl.constexpr = 4 * BLOCK_W
    lo = start // 16 * 16
    hi = (end + 15) // 16 * 16
    acc = magnitude_bits(tl.zeros((BLOCK_R, BLOCK_W), dtype=x_rows.dtype.element_ty))
    n0, n1, n2, n3 = load_quad(x_rows, row_mask, lo, start, end, stride_xk, BLOCK_W, INT64_INDEX, EVICT)
    for k0 in range(lo, hi, BLOCK_K):
        x0, x1, x2, x3 = n0, n1, n2, n3
        n0, n1, n2, n3 = load_quad(x_rows, row_mask, k0 + BLOCK_K, start, end, stride_xk, BLOCK_W, INT64_INDEX, EVICT)
        acc = fold_quad_magnitudes(acc, x0, x1, x2, x3)
    return amax_of_magnitude_bits(acc, x_rows.dtype.element_ty, 1)


@triton.jit
def fold_quad_magnitudes(acc, x0, x1, x2, x3):
    """The running elementwise max of :func:`magnitude_bits` over the four tiles of :func:`load_quad`."""
    return tl.maximum(
        acc,
        tl.maximum(
            tl.maximum(magnitude_bits(x0), magnitude_bits(x1)),
            tl.maximum(magnitude_bits(x2), magnitude_bits(x3)),
        ),
    )


@triton.jit
def _interior_cast_packed(
    x_rows, q_rows, row_mask, inner_lo, inner_hi, scale, stride_xk,
    BLOCK_W: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EVICT: tl.constexpr = NO_HINT, STORE_EVICT: tl.constexpr = NO_HINT,
):  # fmt: skip
    """:func:`_interior_cast` for a transposing view (x contiguous along R, q along K) in tiles of 4 * BLOCK_W
    columns, each read as four interleaved (BLOCK_R, BLOCK_W) tiles and stored via 4-byte units
    (:func:`store_quad`). One-read spans store bytes (:func:`_quantize_one_tile`; module docstring).

    x's fast dim is R and q's is K, so a tile changes layout on its way out; Triton does it through shared memory.
    Packing four columns into one word before that makes the exchange a quarter of the elements at four bytes each
    (a byte tile compiled to one STS.U8 per element, benchmarks/sass_counts.py).
    """
    BLOCK_K: tl.constexpr = 4 * BLOCK_W
    num_tiles = tl.cdiv(inner_hi - inner_lo, BLOCK_K)
    last = inner_lo + (num_tiles - 1) * BLOCK_K
    n0, n1, n2, n3 = load_quad(x_rows, row_mask, last, inner_lo, inner_hi, stride_xk, BLOCK_W, INT64_INDEX, EVICT)
    for i in range(num_tiles):
        k0 = last - i * BLOCK_K
        x0, x1, x2, x3 = n0, n1, n2, n3
        n0, n1, n2, n3 = load_quad(
            x_rows, row_mask, k0 - BLOCK_K, inner_lo, inner_hi, stride_xk, BLOCK_W, INT64_INDEX, EVICT
        )
        store_quad(
            q_rows, row_mask, k0, inner_hi, x0, x1, x2, x3, scale[:, None], BLOCK_W, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, STORE_EVICT,
        )  # fmt: skip


@triton.jit
def _span_edges(start, end):
    """The span's 16-aligned interior [inner_lo, inner_hi) and its partial edge chunks: head columns
    start // 16 * 16 + [0, 16) stored inside [start, head_hi), tail columns tail_lo + [0, 16) inside [tail_lo, end).
    Each edge is empty when its group edge is 16-aligned."""
    inner_lo = (start + 15) // 16 * 16
    inner_hi = end // 16 * 16
    edge = tl.arange(0, 16)
    head_hi = tl.minimum(inner_lo, end)
    tail_lo = tl.maximum(inner_hi, inner_lo)
    return inner_lo, inner_hi, start // 16 * 16 + edge, head_hi, tail_lo + edge, tail_lo


@triton.jit
def _edge_chunk(start, end, which):
    """(columns, lo, hi) of the span's partial edge chunk ``which`` (0: head, 1: tail; a run-time value): 16
    columns from a multiple of 16, of which those in [lo, hi) are the span's (none when that group edge is
    16-aligned)."""
    _, _, _, head_hi, _, tail_lo = _span_edges(start, end)
    head = which == 0
    # The first column is selected as a scalar: selecting between the two column vectors cost the one-read path 16
    # more registers (sm_90, triton 3.6, 128-token groups: 112 against 96).
    first = tl.where(head, start // 16 * 16, tail_lo)
    return first + tl.arange(0, 16), tl.where(head, start, tail_lo), tl.where(head, head_hi, end)


@triton.jit
def _fold_cols_amax(acc, x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX: tl.constexpr):
    """``acc`` with the NaN-keeping amax of x's columns ``cols`` inside [lo, hi) folded in (one chunk)."""
    x_cols = _load_cols(x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX)
    return max_of_amaxes(acc, abs_max_keep_nan(x_cols, 1))


@triton.jit
def _cast_cols(
    x_rows, q_rows, row_mask, cols, lo, hi, stride_xk, scale, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Load x's columns ``cols`` inside [lo, hi), quantize them at ``scale`` and store them there (one chunk)."""
    x_cols = _load_cols(x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX)
    q_cols = quantize(x_cols, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    _store_cols(q_rows, row_mask, cols, lo, hi, q_cols, INT64_INDEX)


@triton.jit
def _edges_amax(
    x_rows, row_mask, start, end, stride_xk, BLOCK_R: tl.constexpr, INT64_INDEX: tl.constexpr,
    EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """The (BLOCK_R,) f32 amax of the span's partial head and tail chunks (exact masks, scalar accesses; 0 when
    both are empty).

    EDGE_LOOP takes the two chunks in a run-time loop (one chunk's registers live at a time) instead of unrolled.
    Compiled for sm_90 (triton 3.6) the one-read path with its edges then holds 96 registers instead of 123 at
    128-token groups, the count without any edge code (benchmarks/results/cpu-sm90-registers-s22.md), and on an
    H100 it ran at 0.99-1.05x the stripped one-tile kernel's time against 1.08-1.18x unrolled
    (benchmarks/results/h100-s23-call1-one-read-gap-*.log). The unrolled form stays the default: in the whole
    kernel the loop costs some tiles a program per SM (rowwise 128x32/w4/g 68 -> 80 registers), so the lists carry
    it as a tile of its own (fp8moe.configs.PER_GROUP).
    """
    edge_amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
    if EDGE_LOOP:
        for which in range(2):
            cols, lo, hi = _edge_chunk(start, end, which)
            if lo < hi:
                edge_amax = _fold_cols_amax(edge_amax, x_rows, row_mask, cols, lo, hi, stride_xk, INT64_INDEX)
    else:
        _, _, head_cols, head_hi, tail_cols, tail_lo = _span_edges(start, end)
        if start < head_hi:
            edge_amax = _fold_cols_amax(edge_amax, x_rows, row_mask, head_cols, start, head_hi, stride_xk, INT64_INDEX)
        if tail_lo < end:
            edge_amax = _fold_cols_amax(edge_amax, x_rows, row_mask, tail_cols, tail_lo, end, stride_xk, INT64_INDEX)
    return edge_amax


@triton.jit
def _edges_cast(
    x_rows, q_rows, row_mask, start, end, stride_xk, scale, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Reload, quantize and store the span's partial head and tail chunks (stores stay inside the span: the
    neighbouring columns belong to another program). EDGE_LOOP as in :func:`_edges_amax`."""
    if EDGE_LOOP:
        for which in range(2):
            cols, lo, hi = _edge_chunk(start, end, which)
            if lo < hi:
                _cast_cols(
                    x_rows, q_rows, row_mask, cols, lo, hi, stride_xk, scale, INT64_INDEX, FP8_DTYPE, FP8_MAX,
                    MAN_BITS, EMIN, FNUZ, CAST_MODE,
                )  # fmt: skip
    else:
        _, _, head_cols, head_hi, tail_cols, tail_lo = _span_edges(start, end)
        if start < head_hi:
            _cast_cols(
                x_rows, q_rows, row_mask, head_cols, start, head_hi, stride_xk, scale, INT64_INDEX, FP8_DTYPE,
                FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
            )  # fmt: skip
        if tail_lo < end:
            _cast_cols(
                x_rows, q_rows, row_mask, tail_cols, tail_lo, end, stride_xk, scale, INT64_INDEX, FP8_DTYPE,
                FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
            )  # fmt: skip


@triton.jit
def span_amax(
    x_rows, row_mask, start, end, stride_xk, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, PACK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr, EVICT: tl.constexpr = NO_HINT, EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Pass 1 of a span: the (BLOCK_R,) f32 NaN-keeping amax of x[r, start:end) (0 for an empty span). PACK_K as in
    :func:`quantize_span`: it picks the loads :func:`cast_span` will repeat. EVICT: the interior loads' L2 eviction
    priority ("" for none). EDGE_LOOP: :func:`_edges_amax`'s."""
    if PACK_K == 4 and BLOCK_K >= 4:
        amax = _span_amax_packed(x_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K // 4, INT64_INDEX, EVICT)
    else:
        inner_lo, inner_hi, _, _, _, _ = _span_edges(start, end)
        edge_amax = _edges_amax(x_rows, row_mask, start, end, stride_xk, BLOCK_R, INT64_INDEX, EDGE_LOOP)
        amax = _interior_amax(x_rows, row_mask, inner_lo, inner_hi, stride_xk, BLOCK_R, BLOCK_K, INT64_INDEX, EVICT)
        amax = max_of_amaxes(amax, edge_amax)
    return amax


@triton.jit
def cast_span(
    x_rows, q_rows, row_mask, start, end, stride_xk, scale,
    BLOCK_K: tl.constexpr, PACK_K: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
    EVICT: tl.constexpr = NO_HINT, STORE_EVICT: tl.constexpr = NO_HINT, EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """Pass 2 of a span: q[r, start:end) = quantize(x[r, start:end), scale[r]) for the (BLOCK_R,) f32 ``scale``.
    EVICT, STORE_EVICT: the interior loads' and stores' L2 eviction priorities ("" for none). EDGE_LOOP:
    :func:`_edges_cast`'s."""
    inner_lo, inner_hi, _, _, _, _ = _span_edges(start, end)
    if PACK_K == 4 and BLOCK_K >= 4:
        _interior_cast_packed(
            x_rows, q_rows, row_mask, inner_lo, inner_hi, scale, stride_xk, BLOCK_K // 4, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, EVICT, STORE_EVICT,
        )  # fmt: skip
    else:
        _interior_cast(
            x_rows, q_rows, row_mask, inner_lo, inner_hi, scale, stride_xk, BLOCK_K, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, EVICT, STORE_EVICT,
        )  # fmt: skip
    _edges_cast(
        x_rows, q_rows, row_mask, start, end, stride_xk, scale, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN,
        FNUZ, CAST_MODE, EDGE_LOOP,
    )  # fmt: skip


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
    PACK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
    EDGE_LOOP: tl.constexpr = False,
    EXTRA_CHUNKS: tl.constexpr = 0,
    KEEP: tl.constexpr = NO_HINT,
    DROP: tl.constexpr = NO_HINT,
):
    """Scale and cast x[r, start:end] of BLOCK_R rows into q[r, start:end]; returns the (BLOCK_R,) f32 scales.

    Args:
        x_rows: (BLOCK_R, 1) pointers to column 0 of each row of x; columns are ``stride_xk`` apart.
        q_rows: (BLOCK_R, 1) pointers to column 0 of each row of q; columns are contiguous.
        row_mask: (BLOCK_R,) rows that exist.
        start, end: the span, 0 <= start <= end <= the row length (loads and stores stay inside it; an empty span
            gives the EPS-derived scale and stores nothing).
        ONE_PASS: the caller guarantees that the aligned interior fits one tile and EXTRA_CHUNKS chunks,
            floor16(end) - ceil16(start) <= BLOCK_K + 16 * EXTRA_CHUNKS.
        PACK_K: 4 to store a two-pass interior as 4-byte words of four columns (:func:`_interior_cast_packed`),
            for views whose x is not contiguous along K; the launcher guarantees that q's rows are 4-byte aligned.
            1, and every ONE_PASS span, stores bytes.
        EDGE_LOOP: the partial edge chunks in a run-time loop, one at a time (:func:`_edges_amax`).
        EXTRA_CHUNKS: in the ONE_PASS path, the interior's columns past the tile's BLOCK_K (at most EXTRA_CHUNKS
            whole chunks of 16) are read twice, one chunk at a time, as the partial edges are.
        KEEP, DROP: L2 eviction priorities of the interior's accesses ("" for none): KEEP for pass 1's loads,
            which pass 2 reads again; DROP for the reads that are an element's last (the one-read tile's, pass
            2's) and for every code store. The partial edge chunks and the EXTRA_CHUNKS columns (16 columns each)
            take none (:func:`quantize_group_span`'s L2_HINTS sets both).
    """
    if ONE_PASS:
        inner_lo, inner_hi, _, _, _, _ = _span_edges(start, end)
        edge_amax = _edges_amax(x_rows, row_mask, start, end, stride_xk, BLOCK_R, INT64_INDEX, EDGE_LOOP)
        tile_hi = inner_hi
        if EXTRA_CHUNKS > 0:
            tile_hi = tl.minimum(inner_hi, inner_lo + BLOCK_K)
            for chunk in range(tile_hi, inner_hi, 16):
                cols = chunk + tl.arange(0, 16)
                edge_amax = _fold_cols_amax(edge_amax, x_rows, row_mask, cols, chunk, inner_hi, stride_xk, INT64_INDEX)
        scale = _quantize_one_tile(
            x_rows, q_rows, row_mask, inner_lo, tile_hi, edge_amax, stride_xk, BLOCK_K, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE, DROP,
        )  # fmt: skip
        if EXTRA_CHUNKS > 0:
            for chunk in range(tile_hi, inner_hi, 16):
                _cast_cols(
                    x_rows, q_rows, row_mask, chunk + tl.arange(0, 16), chunk, inner_hi, stride_xk, scale,
                    INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
                )  # fmt: skip
        _edges_cast(
            x_rows, q_rows, row_mask, start, end, stride_xk, scale, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN,
            FNUZ, CAST_MODE, EDGE_LOOP,
        )  # fmt: skip
    else:
        amax = span_amax(
            x_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K, PACK_K, INT64_INDEX, KEEP, EDGE_LOOP
        )
        scale = scale_from_amax(amax, FP8_MAX, ROUND_POW2)
        cast_span(
            x_rows, q_rows, row_mask, start, end, stride_xk, scale, BLOCK_K, PACK_K, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE, DROP, DROP, EDGE_LOOP,
        )  # fmt: skip
    return scale


@triton.jit
def quantize_group_span(
    x_rows, q_rows, row_mask, start, end, stride_xk,
    BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, PACK_K: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr, ONE_READ: tl.constexpr = True,
    ONE_READ_K: tl.constexpr = 0, EDGES_IN_TILE: tl.constexpr = False, EDGE_LOOP: tl.constexpr = False,
    EXTRA_CHUNKS: tl.constexpr = 0, L2_HINTS: tl.constexpr = 0,
):  # fmt: skip
    """:func:`quantize_span` of a span whose length is known only at run time (a group's).

    One read when the span fits one tile, two otherwise (both paths compiled, one branch taken). Six launch-config
    flags (fp8moe.configs) shape it:

    - ONE_READ=False compiles the two-pass loop alone and runs every span through it: a group that fits one tile is
      then read twice (the second read mostly from L2), but the kernel no longer holds the registers of the branch
      it does not take. On the H200 the one-read branch beside the two-pass loop cost 1.17x at uniform 128-token
      groups (benchmarks/results/h200-s21-call1-one-read-gap.md, the ``one_read`` and ``op`` rows), and dropping it
      on the colwise view made the op 0.94-1.01x as long (h200-s21-call1-ab-single_t.md against -ab-main.md).
    - ONE_READ_K > 0 (a power of two) sizes the one-read tile apart from the loop's: spans that fit ONE_READ_K
      columns are read once in a (BLOCK_R, ONE_READ_K) tile, the others loop in (BLOCK_R, BLOCK_K) tiles. The loop
      holds about three tiles at once (the running max, the current tile, the next) and the one-read path one, so a
      loop tile half the one-read tile balances their registers: sm_90, triton 3.6, colwise 64x64/w4 with
      ONE_READ_K=128 takes 124 registers (4 programs per SM) against 166 (3) for 64x128/w4, which reads the same
      groups once (benchmarks/sass_counts.py --one-read-k).
    - EDGES_IN_TILE, on a transposing view (PACK_K = 4), reads a span once when its 16-column cover
      [floor16(start), ceil16(end)) fits the tile, edges included (:func:`_quantize_cover_tile`), instead of when
      its aligned interior does, with the edges loaded, folded across warps through shared memory and cast apart.
      The unaligned layouts are the slowest per-group points, and their cost is latency at the edges
      (per-group-ledger.md); pass 1 of the two-pass loop already folds the edges into its tiles this way. Compiled
      for sm_90 (triton 3.6) it cuts the colwise kernel's instructions (64x64/w4 2664 -> 2328, 64x128/w4 3376 ->
      3200) but not its registers (106 -> 110, 166 -> 168): the two-pass loop sets those.
    - EDGE_LOOP takes the partial edge chunks one at a time in a run-time loop, in both paths
      (:func:`_edges_amax`, :func:`_edges_cast`), so that one chunk's registers are live at once. Compiled for sm_90
      (triton 3.6) it changes the programs an SM holds for some tiles and not others (dual 64x64/w4/g 158 -> 128
      registers, 3 -> 4 programs; rowwise 128x32/w4/g 68 -> 80, 7 -> 6): a tuning candidate, not a default.

    - EXTRA_CHUNKS > 0 (not with EDGES_IN_TILE) widens what the one-read path takes by that many 16-column chunks:
      a span whose interior fits ONE_READ_K + 16 * EXTRA_CHUNKS columns keeps its first ONE_READ_K interior columns
      in the tile and reads the rest twice, one chunk at a time (:func:`quantize_span`), instead of looping over the
      whole span twice. In the bench's aligned layouts 16 of 64 groups are 272 tokens, one chunk past a 256 one-read
      tile, and 16 of 128 are 144 (per-group-ledger.md).
    - L2_HINTS (1 or 2) sets L2 eviction priorities (:func:`quantize_span`'s KEEP and DROP): reads that are an
      element's last and the code stores go first (evict-first), and with 2 pass 1's reads are kept for pass 2
      (evict-last), so lines that are never read again leave L2 before those pass 2 will read. With the group
      sizes spread apart the ops read more from DRAM than their input (an H100 in session 30, Nsight Compute at
      G = 64, the tile tuned at aligned groups: rowwise 5120x16640 1.02x the ideal bytes at aligned16, 1.39x with
      the sizes spread by 240 tokens; dual 16640x2048x2048 1.09x -> 1.36x; benchmarks/results/h100-s30-call{1,2}-
      ncu.md): pass 2 of the long groups misses L2, while the one-read groups' lines, never read again, hold it.
      With /ev2 the same H100 ran the dual op's 64x64/w4/g/t 0.86-0.90x and the rowwise 64x64/w4/g 0.91-0.98x
      their time at every size layout (h100-s30-call6-hints-configs.md).

    Timed on an H100 in session 23 (benchmarks/results/h100-s23-summary.md): ONE_READ_K with EDGES_IN_TILE or
    EDGE_LOOP took 0.91-0.99x the time of the best tile without them at the aligned colwise points, ONE_READ=False
    0.95-0.97x at random groups and at the dual op's G = 128. On the H200 in session 24
    (benchmarks/results/h200-s24-summary.md) ONE_READ_K won the rowwise G = 64 point (0.92x) and, with
    EXTRA_CHUNKS and EDGE_LOOP, G = 128 (0.94x); colwise, EXTRA_CHUNKS ran 1.04-1.09x the best tile.
    fp8moe.configs lists the winning tiles.
    """
    tl.static_assert(EXTRA_CHUNKS == 0 or not EDGES_IN_TILE, "EXTRA_CHUNKS is for the one-read tile without edges")
    tl.static_assert(L2_HINTS == 0 or L2_HINTS == 1 or L2_HINTS == 2, "L2_HINTS is 0, 1 or 2")
    ONE_K: tl.constexpr = ONE_READ_K if ONE_READ_K > 0 else BLOCK_K
    COVER: tl.constexpr = EDGES_IN_TILE and PACK_K == 4
    KEEP: tl.constexpr = "evict_last" if L2_HINTS == 2 else ""
    DROP: tl.constexpr = "evict_first" if L2_HINTS > 0 else ""
    if not ONE_READ:
        fits = False
    elif COVER:
        fits = (end + 15) // 16 * 16 - start // 16 * 16 <= ONE_K
    else:
        fits = end // 16 * 16 - (start + 15) // 16 * 16 <= ONE_K + 16 * EXTRA_CHUNKS
    if fits:
        if COVER:
            scale = _quantize_cover_tile(
                x_rows, q_rows, row_mask, start, end, stride_xk, ONE_K, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS,
                EMIN, FNUZ, ROUND_POW2, CAST_MODE, DROP,
            )  # fmt: skip
        else:
            scale = quantize_span(
                x_rows, q_rows, row_mask, start, end, stride_xk, BLOCK_R, ONE_K, True, PACK_K, INT64_INDEX,
                FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE, EDGE_LOOP, EXTRA_CHUNKS, KEEP, DROP,
            )  # fmt: skip
    else:
        scale = quantize_span(
            x_rows, q_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K, False, PACK_K, INT64_INDEX,
            FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE, EDGE_LOOP, 0, KEEP, DROP,
        )  # fmt: skip
    return scale
