"""What the two fused pair kernels share: one input quantized two ways from two reads.

fp8moe.kernels.colwise_3d_and_transpose_rhs (an expert weight: colwise-3D and transposed-rowwise) and
fp8moe.kernels.rowwise_and_per_group_colwise (an activation: rowwise and per group) both see x as blocks of
(P positions along x's unit-stride dim) x (Q positions across it). Each output needs an amax the other reduction
order holds, so both run three launches: an amax launch reads x once and folds both amaxes by integer atomic max
of the f32 bit patterns into one zeroed workspace (exact, order-free and NaN-keeping, as the atomic transpose
method's, SPEC §4.1), a scales launch turns every amax into its scale (written straight into the two scale
outputs), and a cast launch reads x again and stores both outputs from the same registers: one along P (the
layout x was loaded in), one along Q (across it). Two reads of x and one write of each output: the bytes the two
ops move when each runs at the roofline, while alone the op reducing across x's strided dim reads it twice.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs
from fp8moe.backend import Backend
from fp8moe.kernels._common import amax_of_magnitude_bits, fold_amax, magnitude_bits, quantize, scale_from_amax
from fp8moe.kernels._span import load_quad, store_quad

__all__ = ["cast_along_p", "cast_quad_along_p", "cast_quads", "fold_tiles_along_q", "launch_pair"]


@triton.jit
def _pair_scales_kernel(
    amax_ptr, scales_p_ptr, scales_q_ptr, N_P, N, BLOCK: tl.constexpr, FP8_MAX: tl.constexpr,
    ROUND_POW2: tl.constexpr,
):  # fmt: skip
    """The scales of both outputs from the folded amaxes: amax[i] for i < N_P into scales_p[i], the rest into
    scales_q[i - N_P]. A separate small launch, so the cast launch loads f32 scales instead of computing each
    column's in every program that holds it (sm_90, with the f64 division of the time: 20 -> 10 instructions per
    element in its loop)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    amax = tl.load(amax_ptr + i, mask=i < N, other=0).to(tl.float32, bitcast=True)
    scale = scale_from_amax(amax, FP8_MAX, ROUND_POW2)
    tl.store(scales_p_ptr + i, scale, mask=i < N_P)
    tl.store(scales_q_ptr + (i - N_P), scale, mask=(i >= N_P) & (i < N))


def _launch_scales(
    backend: Backend, amax: torch.Tensor, scales_p: torch.Tensor, scales_q: torch.Tensor, fp8_args: dict
) -> None:
    """scales_p (contiguous, N_P words) and scales_q (contiguous) from the workspace ``amax`` holding the amax bits
    of scales_p's slices first, then scales_q's."""
    configs.launch(
        _pair_scales_kernel,
        configs.PAIR_SCALES,
        backend,
        lambda meta: (triton.cdiv(meta["N"], meta["BLOCK"]),),
        amax_ptr=amax,
        scales_p_ptr=scales_p,
        scales_q_ptr=scales_q,
        N_P=scales_p.numel(),
        N=amax.numel(),
        FP8_MAX=fp8_args["FP8_MAX"],
        ROUND_POW2=fp8_args["ROUND_POW2"],
    )


@triton.jit
def fold_tiles_along_q(
    x_rows, p_mask, lo, hi, stride_xq, fold_ptr, X_DTYPE: tl.constexpr, BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr, INT64_INDEX: tl.constexpr,
):  # fmt: skip
    """The amax loop of both pairs over Q positions [lo, hi) of a (BLOCK_P, .) block: folds each tile's max over its
    P positions into the words at fold_ptr + q (fp8moe.kernels._common.fold_amax) and returns the running
    :func:`~fp8moe.kernels._common.magnitude_bits` max (BLOCK_P, BLOCK_Q), for the caller's max over Q.

    Each tile's load is issued one iteration ahead: the weight pair's loop reached 83% of DRAM bandwidth under
    Nsight Compute, the activation pair's without it 55% (benchmarks/results/h200-s14-summary.md).
    """
    acc = magnitude_bits(tl.zeros((BLOCK_P, BLOCK_Q), dtype=X_DTYPE))
    first = lo + tl.arange(0, BLOCK_Q)
    x_next = tl.load(x_rows + first[None, :] * stride_xq, mask=p_mask[:, None] & (first < hi)[None, :], other=0.0)
    for q0 in range(lo, hi, BLOCK_Q):
        x = x_next
        qs = q0 + tl.arange(0, BLOCK_Q)
        if INT64_INDEX:  # the interpreter's loop variable is a Python int, whatever the bounds' type
            qs = qs.to(tl.int64)
        nxt = qs + BLOCK_Q
        x_next = tl.load(x_rows + nxt[None, :] * stride_xq, mask=p_mask[:, None] & (nxt < hi)[None, :], other=0.0)
        bits = magnitude_bits(x)
        acc = tl.maximum(acc, bits)
        fold_amax(fold_ptr + qs, amax_of_magnitude_bits(bits, X_DTYPE, 0), qs < hi)  # NaN as 0x7FC00000
    return acc


@triton.jit
def cast_along_p(
    x, cols, p_mask, col_mask, along_p_rows, scales_ptr, P,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Quantize the (BLOCK_P, n) tile ``x`` of Q positions ``cols`` at their scales (scales_ptr + cols) into the
    P-contiguous output at along_p_rows + cols * P, in the layout x was loaded in."""
    scale = tl.load(scales_ptr + cols, mask=col_mask, other=0.0)
    q = quantize(x, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    tl.store(along_p_rows + cols[None, :] * P, q, mask=p_mask[:, None] & col_mask[None, :])


@triton.jit
def cast_quad_along_p(
    x0, x1, x2, x3, q0, hi, p_mask, along_p_rows, scales_ptr, P, BLOCK_W: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    CAST_MODE: tl.constexpr,
):  # fmt: skip
    """:func:`cast_along_p` of a tile read as four interleaved quarters (fp8moe.kernels._span.load_quad): quarter j
    holds the Q positions q0 + 4w + j; positions at or past ``hi`` are not stored."""
    cols = q0 + 4 * tl.arange(0, BLOCK_W)
    if INT64_INDEX:
        cols = cols.to(tl.int64)
    cast_along_p(x0, cols, p_mask, cols < hi, along_p_rows, scales_ptr, P, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ,
                 CAST_MODE)  # fmt: skip
    cast_along_p(x1, cols + 1, p_mask, cols + 1 < hi, along_p_rows, scales_ptr, P, FP8_DTYPE, FP8_MAX, MAN_BITS,
                 EMIN, FNUZ, CAST_MODE)  # fmt: skip
    cast_along_p(x2, cols + 2, p_mask, cols + 2 < hi, along_p_rows, scales_ptr, P, FP8_DTYPE, FP8_MAX, MAN_BITS,
                 EMIN, FNUZ, CAST_MODE)  # fmt: skip
    cast_along_p(x3, cols + 3, p_mask, cols + 3 < hi, along_p_rows, scales_ptr, P, FP8_DTYPE, FP8_MAX, MAN_BITS,
                 EMIN, FNUZ, CAST_MODE)  # fmt: skip


@triton.jit
def cast_quads(
    x_rows, p_mask, lo, hi, stride_xq, along_q_rows, scale_q, along_p_rows, scales_p, P,
    BLOCK_Q: tl.constexpr, INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """The cast loop of both pairs over Q positions [lo, hi), both multiples of 16: each (BLOCK_P, BLOCK_Q) tile read
    as four interleaved quarters (fp8moe.kernels._span.load_quad), stored across P at ``scale_q`` (BLOCK_P, 1) in
    4-byte words (store_quad) and along P at the scales at ``scales_p`` (:func:`cast_quad_along_p`).

    Each tile is loaded in the iteration that stores it. A variant issuing the next tile's loads one iteration ahead
    (a second tile in registers) was an autotune candidate in sessions 14-15 and never the fastest
    (fp8moe.configs, the pairs' cast candidates).
    """
    BLOCK_W: tl.constexpr = BLOCK_Q // 4
    for q0 in range(lo, hi, BLOCK_Q):
        x0, x1, x2, x3 = load_quad(x_rows, p_mask, q0, lo, hi, stride_xq, BLOCK_W, INT64_INDEX)
        _store_quads(
            x0, x1, x2, x3, q0, hi, p_mask, along_q_rows, scale_q, along_p_rows, scales_p, P, BLOCK_W,
            INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE,
        )  # fmt: skip


@triton.jit
def _store_quads(
    x0, x1, x2, x3, q0, hi, p_mask, along_q_rows, scale_q, along_p_rows, scales_p, P, BLOCK_W: tl.constexpr,
    INT64_INDEX: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr, FNUZ: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Both outputs of one tile of :func:`cast_quads`."""
    store_quad(
        along_q_rows, p_mask, q0, hi, x0, x1, x2, x3, scale_q, BLOCK_W, INT64_INDEX, FP8_DTYPE, FP8_MAX, MAN_BITS,
        EMIN, FNUZ, CAST_MODE,
    )  # fmt: skip
    cast_quad_along_p(
        x0, x1, x2, x3, q0, hi, p_mask, along_p_rows, scales_p, P, BLOCK_W, INT64_INDEX, FP8_DTYPE, FP8_MAX,
        MAN_BITS, EMIN, FNUZ, CAST_MODE,
    )  # fmt: skip


#: The interpreter's chunk length in tiles (tests/test_kernels_pairs.py runs another): one tile per chunk, so a Q of
#: more than 32 spans two chunks and the cross-chunk folds run.
INTERPRETER_CHUNK_TILES = 1


def _interpreter_config(kernel_configs: configs.KernelConfigs, backend: Backend, args: dict) -> triton.Config | None:
    """The interpreter's tiles with :data:`INTERPRETER_CHUNK_TILES` tiles per chunk and BLOCK_Q at least 16, as every
    CUDA and ROCm config has it (the cast kernels' quarter tiles are BLOCK_Q / 4 wide); None elsewhere (the policy:
    autotuning on CUDA, ROCm's fixed config)."""
    if backend.kind != "interpreter":
        return None
    tiles = kernel_configs.fixed(backend, args)
    blocks = {**tiles.kwargs, "BLOCK_Q": max(tiles.kwargs["BLOCK_Q"], 16), "CHUNK_TILES": INTERPRETER_CHUNK_TILES}
    return triton.Config(blocks, num_warps=tiles.num_warps)


def launch_pair(
    backend: Backend, kernels: tuple, kernel_configs: tuple, grid, shape_args: dict, inputs: dict,
    amax: torch.Tensor, scales_p: torch.Tensor, scales_q: torch.Tensor, outputs: dict, fp8_args: dict,
) -> None:  # fmt: skip
    """The three launches of a pair (module docstring): the amax kernel on ``inputs`` into the zeroed workspace
    ``amax``, the scales into scales_p and scales_q, the cast kernel on ``inputs`` into ``outputs``.

    Args:
        kernels: (amax kernel, cast kernel), both launched on ``grid`` with ``shape_args``.
        kernel_configs: their fp8moe.configs lists.
        inputs: the input pointer arguments both kernels take (x, and offs for the jagged pair).
        outputs: the cast kernel's output pointers (the scale outputs among them) and its other arguments.
    """
    (amax_kernel, cast_kernel), (amax_configs, cast_configs) = kernels, kernel_configs
    configs.launch(
        amax_kernel, amax_configs, backend, grid, config=_interpreter_config(amax_configs, backend, shape_args),
        amax_ptr=amax, **inputs, **shape_args,
    )  # fmt: skip
    _launch_scales(backend, amax, scales_p, scales_q, fp8_args)
    configs.launch(
        cast_kernel, cast_configs, backend, grid,
        config=_interpreter_config(cast_configs, backend, shape_args),
        **inputs, **outputs, **shape_args, **fp8_args,
    )  # fmt: skip
