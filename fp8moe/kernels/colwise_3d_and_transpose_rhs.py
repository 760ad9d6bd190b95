"""Both quantizations of an expert weight from two reads: colwise_3d_scale_and_cast and rowwise_3d_transpose_rhs
of one (E, K, N) x in three launches, each output bitwise that op's (SPEC §5.6, §10.2).

Why: the FP8 grouped GEMM quantizes its weight B_t twice per step, over K for the forward GEMM and over N for the
dgrad GEMM. Each op alone needs x's amax before it can cast, and one of the two always reduces across x's strided
dim: that one reads x twice (amax, then cast) and reaches 46-60% of copy bandwidth on the H200 (the row-major
colwise-3D rows of benchmarks/results/h200-bench-2026-12-02-s9.md), while the other runs at 92-103%. Together the
two ops need x's two amaxes and two casts, and here each read serves both:

1. **Amax launch** (``_pair_amax_kernel``): one read of x in (BLOCK_P, BLOCK_Q) tiles. A program owns BLOCK_P
   positions of the contiguous dim and a chunk of the other; it keeps the running max over its chunk per position
   and folds each tile's max over its positions per column, both into zeroed workspace words by an integer atomic
   max of the f32 bit patterns (exact, order-free, NaN-keeping: SPEC §4.1).
2. **Scales launch** (fp8moe.kernels._pair): every folded amax to its scale, straight into the scale outputs.
3. **Cast launch** (``_pair_cast_kernel``): the second read, which quantizes every tile twice from registers with
   the two scales and stores both outputs: one along x's contiguous dim (the layout the tile was loaded in),
   one across it (a transposing store, in 4-byte words of four columns where the dim is 16-aligned, as the span
   loop does: fp8moe.kernels._span).

Bytes: two reads of x and one write of each output, which is what the two ops move when each runs at the
roofline; the programs never wait for each other (stream order separates the launches).

The view. Let V (E, P, Q) be x viewed so that P is x's unit-stride dim: V = x.mT (P = N, Q = K) when x is
row-major per expert, V = x (P = K, Q = N) when it is column-major. Output ``along_p`` is scaled per (e, q) over P
and stored P-contiguous, ``along_q`` per (e, p) over Q and stored Q-contiguous; both are dense (E, P*Q) blocks,
which is exactly the layout each op returns:

- row-major x: along_p is rowwise_3d_transpose_rhs (q (E, N, K) strides (N*K, 1, N), scales (E, K)), along_q is
  colwise_3d_scale_and_cast (q (E, K, N) strides (K*N, 1, K), scales (E, 1, N));
- column-major x: the other way round.

Any other layout (or an empty dim) runs the two ops one after the other.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels import colwise_3d_scale_and_cast as _colwise_3d
from fp8moe.kernels import rowwise_3d_transpose_rhs as _transpose_rhs
from fp8moe.kernels._common import amax_of_magnitude_bits, fold_amax, fp8_constexprs, quantize
from fp8moe.kernels._pair import cast_along_p, cast_quads, fold_tiles_along_q, launch_pair

__all__ = ["fusable", "launch"]


def fusable(x: torch.Tensor) -> bool:
    """Whether the fused launches take this (E, K, N) ``x``: unit stride along K or N and no empty dim (module
    docstring); else :func:`launch` runs the two ops."""
    return x.numel() > 0 and (x.stride(2) == 1 or x.stride(1) == 1)


@triton.jit
def _block(P, Q, BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, CHUNK_TILES: tl.constexpr, INT64_INDEX: tl.constexpr):
    """This program's block of both kernels' grid (cdiv(P, BLOCK_P), cdiv(Q, CHUNK_TILES * BLOCK_Q), E): expert e,
    positions p (BLOCK_P,) with their mask, and columns [q_lo, q_hi)."""
    e = tl.program_id(2)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    q_lo = tl.program_id(1) * (CHUNK_TILES * BLOCK_Q)
    if INT64_INDEX:  # every column index derives from q_lo: offsets col * stride_xq stay in int64
        e = e.to(tl.int64)
        p = p.to(tl.int64)
        q_lo = q_lo.to(tl.int64)
    q_hi = tl.minimum(q_lo + CHUNK_TILES * BLOCK_Q, Q)
    return e, p, p < P, q_lo, q_hi


@triton.jit
def _pair_amax_kernel(
    x_ptr, amax_ptr, E, P, Q, stride_xe, stride_xq,
    BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, CHUNK_TILES: tl.constexpr, INT64_INDEX: tl.constexpr,
):  # fmt: skip
    """amax[e * Q + q] = max |V[e, :, q]| and amax[E * Q + e * P + p] = max |V[e, p, :]| as f32 bits, folded by
    atomic max into zeroed words. Grid (cdiv(P, BLOCK_P), cdiv(Q, CHUNK_TILES * BLOCK_Q), E)."""
    pid_e, p, p_mask, q_lo, q_hi = _block(P, Q, BLOCK_P, BLOCK_Q, CHUNK_TILES, INT64_INDEX)
    x_rows = x_ptr + pid_e * stride_xe + p[:, None]
    acc = fold_tiles_along_q(
        x_rows, p_mask, q_lo, q_hi, stride_xq, amax_ptr + pid_e * Q, x_ptr.dtype.element_ty, BLOCK_P, BLOCK_Q,
        INT64_INDEX,
    )  # fmt: skip
    row_amax = amax_of_magnitude_bits(acc, x_ptr.dtype.element_ty, 1)
    fold_amax(amax_ptr + E * Q + pid_e * P + p, row_amax, p_mask)


@triton.jit
def _pair_cast_kernel(
    x_ptr, along_p_ptr, scales_p_ptr, along_q_ptr, scales_q_ptr, E, P, Q, stride_xe, stride_xq,
    BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, CHUNK_TILES: tl.constexpr, PACK_Q: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """along_p[e, q * P + p] and along_q[e, p * Q + q] (each output a dense (E, P*Q)) at the scales the scales
    kernel wrote. Grid as the amax kernel's. PACK_Q: Q and every chunk bound are multiples of 16, so the
    Q-contiguous stores go out as 4-byte words of four columns (fp8moe.kernels._pair.cast_quads). ROUND_POW2 is
    unused here (the scales are made); it is an argument so the autotune key holds every result argument."""
    pid_e, p, p_mask, q_lo, q_hi = _block(P, Q, BLOCK_P, BLOCK_Q, CHUNK_TILES, INT64_INDEX)
    scale_q = tl.load(scales_q_ptr + pid_e * P + p, mask=p_mask, other=0.0)  # (BLOCK_P,)
    scales_p = scales_p_ptr + pid_e * Q
    x_rows = x_ptr + pid_e * stride_xe + p[:, None]
    block = pid_e * P * Q
    along_p_rows = along_p_ptr + block + p[:, None]
    along_q_rows = along_q_ptr + block + p[:, None] * Q
    if PACK_Q:
        cast_quads(
            x_rows, p_mask, q_lo, q_hi, stride_xq, along_q_rows, scale_q[:, None], along_p_rows, scales_p, P,
            BLOCK_Q, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
        )  # fmt: skip
    else:
        for q0 in range(q_lo, q_hi, BLOCK_Q):
            cols = q0 + tl.arange(0, BLOCK_Q)
            if INT64_INDEX:
                cols = cols.to(tl.int64)
            col_mask = cols < q_hi
            mask = p_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cols[None, :] * stride_xq, mask=mask, other=0.0)
            q = quantize(x, scale_q[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            tl.store(along_q_rows + cols[None, :], q, mask=mask)
            cast_along_p(
                x, cols, p_mask, col_mask, along_p_rows, scales_p, P, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ,
                CAST_MODE,
            )  # fmt: skip


def _grid(meta) -> tuple[int, int, int]:
    chunk = meta["CHUNK_TILES"] * meta["BLOCK_Q"]
    return (triton.cdiv(meta["P"], meta["BLOCK_P"]), triton.cdiv(meta["Q"], chunk), meta["E"])


@replay.replayable
def launch(
    x: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, backend: Backend
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allocate and compute colwise_3d_scale_and_cast(x) and rowwise_3d_transpose_rhs(x) for a validated (E, K, N)
    ``x``, any strides.

    Returns:
        q_colwise (E, K, N) strides (K*N, 1, K), scales_colwise (E, 1, N), q_transpose (E, N, K) strides
        (N*K, 1, N), scales_transpose (E, K): the two ops' outputs, bitwise.
    """
    if not fusable(x):
        q_c, s_c = _colwise_3d.launch(x, fp8_dtype, round_scales_to_power_of_2, backend)
        q_t, s_t = _transpose_rhs.launch(x, fp8_dtype, round_scales_to_power_of_2, backend)
        return q_c, s_c, q_t, s_t
    e, k, n = x.shape
    q_c = torch.empty_strided((e, k, n), (k * n, 1, k), dtype=fp8_dtype, device=x.device)
    s_c = torch.empty((e, 1, n), dtype=torch.float32, device=x.device)
    q_t = torch.empty_strided((e, n, k), (n * k, 1, n), dtype=fp8_dtype, device=x.device)
    s_t = torch.empty((e, k), dtype=torch.float32, device=x.device)
    if x.stride(2) == 1:  # row-major: V = x.mT, P = N; along P is the transpose op, along Q (= K) colwise-3D
        p_len, q_len, stride_xq = n, k, x.stride(1)
        (along_p, out_p), (along_q, out_q) = (q_t, s_t), (q_c, s_c)
    else:  # column-major: V = x, P = K; along P is colwise-3D, along Q (= N) the transpose op
        p_len, q_len, stride_xq = k, n, x.stride(2)
        (along_p, out_p), (along_q, out_q) = (q_c, s_c), (q_t, s_t)
    # One workspace for both amaxes: over P (E * Q words), then over Q (E * P).
    amax = replay.scratch_zeros((e * (p_len + q_len),), torch.int32, x.device)
    scales_p, scales_q = out_p.view(-1), out_q.view(-1)
    shape_args = {
        "E": e, "P": p_len, "Q": q_len, "stride_xe": x.stride(0), "stride_xq": stride_xq,
        "INT64_INDEX": configs.needs_int64_index(x, q_c, q_t),
    }  # fmt: skip
    launch_pair(
        backend, (_pair_amax_kernel, _pair_cast_kernel), (configs.PAIR_AMAX, configs.PAIR_CAST), _grid, shape_args,
        {"x_ptr": x}, amax, scales_p, scales_q,
        {"along_p_ptr": along_p, "scales_p_ptr": scales_p, "along_q_ptr": along_q, "scales_q_ptr": scales_q,
         "PACK_Q": q_len % 16 == 0},
        fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )  # fmt: skip
    return q_c, s_c, q_t, s_t
