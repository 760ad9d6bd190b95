"""Triton twin of fp8ref.rowwise_3d_transpose_rhs, in two methods that give identical bytes.

q (E, N, K) with strides (N*K, 1, N) is, viewed as ``q.mT``, a contiguous (E, K, N): each row (e, k, :) of x is
quantized in place of itself, so neither method moves data across rows.

- "reduction": the batched row kernel (fp8moe.kernels._rows); one program owns whole rows (one launch).
- "atomic": (BLOCK_K, BLOCK_N) tiles whose partial row amaxes combine across N-tiles by an int32 atomic max on the
  f32 bit patterns. More programs in flight when K*E is small and N large. Two kernels do it, the same bytes
  (fp8moe.configs.transpose_atomic_kernel picks one per call):
  - "two_launch": kernel 1 folds the partials, kernel 2 turns amax into the scale and quantizes its tile, reading
    x a second time;
  - "coop": the cooperative slice kernel (fp8moe.kernels._coop_slices): each tile's program folds, waits for the
    other tiles of its rows and casts the tile it holds, x read once.

All compute the same exact amax (max is exact and order-free) and then the same helpers, hence the same bytes.
"""

from __future__ import annotations

from typing import Literal

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import abs_max_keep_nan, fold_amax, fp8_constexprs, quantize, scale_from_amax
from fp8moe.kernels._coop import coop_limit
from fp8moe.kernels._coop_slices import launch_coop_slices
from fp8moe.kernels._rows import launch_rows

__all__ = ["METHODS", "launch"]

Method = Literal["atomic", "reduction"]
METHODS: tuple[str, ...] = ("atomic", "reduction")


@triton.jit
def _tile_offsets(pid_k, pid_n, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, INT64_INDEX: tl.constexpr):
    """Row (k) and column (n) indices of one tile, int64 when offsets may exceed int32."""
    rows = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INT64_INDEX:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    return rows, cols


@triton.jit
def _transpose_rhs_amax_kernel(
    x_ptr,
    amax_bits_ptr,
    E,
    K,
    N,
    stride_xe,
    stride_xk,
    stride_xn,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    INT64_INDEX: tl.constexpr,
):
    """amax_bits[e * K + k] = max over tiles of the f32 bits of the tile's max |x[e, k, n]|. Grid (K, N, E) tiles.

    amax_bits must start at 0. E is only the grid's third axis (an argument so the CUDA autotune key sees it).
    """
    pid_e = tl.program_id(2)
    if INT64_INDEX:
        pid_e = pid_e.to(tl.int64)
    rows, cols = _tile_offsets(tl.program_id(0), tl.program_id(1), BLOCK_K, BLOCK_N, INT64_INDEX)
    mask = (rows[:, None] < K) & (cols[None, :] < N)
    x = tl.load(x_ptr + pid_e * stride_xe + rows[:, None] * stride_xk + cols[None, :] * stride_xn, mask=mask, other=0.0)
    fold_amax(amax_bits_ptr + pid_e * K + rows, abs_max_keep_nan(x, 1), rows < K)


@triton.jit
def _transpose_rhs_quantize_kernel(
    x_ptr,
    amax_bits_ptr,
    q_ptr,
    scales_ptr,
    E,
    K,
    N,
    stride_xe,
    stride_xk,
    stride_xn,
    stride_qe,
    stride_qk,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
):
    """q[e, k, n] (the (E, K, N) view, unit stride along n) and scales[e * K + k] from the combined amax bits.

    Grid (K, max(N, 1), E) tiles: with N == 0 one column of programs still writes the EPS-derived scales.
    """
    pid_e = tl.program_id(2)
    pid_n = tl.program_id(1)
    if INT64_INDEX:
        pid_e = pid_e.to(tl.int64)
    rows, cols = _tile_offsets(tl.program_id(0), pid_n, BLOCK_K, BLOCK_N, INT64_INDEX)
    row_mask = rows < K
    amax = tl.load(amax_bits_ptr + pid_e * K + rows, mask=row_mask, other=0).to(tl.float32, bitcast=True)
    scale = scale_from_amax(amax, FP8_MAX, ROUND_POW2)  # (BLOCK_K,)
    mask = row_mask[:, None] & (cols[None, :] < N)
    x = tl.load(x_ptr + pid_e * stride_xe + rows[:, None] * stride_xk + cols[None, :] * stride_xn, mask=mask, other=0.0)
    q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
    tl.store(q_ptr + pid_e * stride_qe + rows[:, None] * stride_qk + cols[None, :], q, mask=mask)
    if pid_n == 0:
        tl.store(scales_ptr + pid_e * K + rows, scale, mask=row_mask)


def _launch_atomic(
    x: torch.Tensor,
    q_ekn: torch.Tensor,
    scales: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> None:
    e, k, n = x.shape
    amax_bits = replay.scratch_zeros((e * k,), torch.int32, x.device)
    shape_args = {
        "E": e,
        "K": k,
        "N": n,
        "stride_xe": x.stride(0),
        "stride_xk": x.stride(1),
        "stride_xn": x.stride(2),
        "INT64_INDEX": configs.needs_int64_index(x, q_ekn, scales),
    }
    if n > 0:
        configs.launch(
            _transpose_rhs_amax_kernel,
            configs.TRANSPOSE_AMAX,
            backend,
            lambda meta: (triton.cdiv(meta["K"], meta["BLOCK_K"]), triton.cdiv(meta["N"], meta["BLOCK_N"]), meta["E"]),
            x_ptr=x,
            amax_bits_ptr=amax_bits,
            **shape_args,
        )
    configs.launch(
        _transpose_rhs_quantize_kernel,
        configs.TRANSPOSE_QUANTIZE,
        backend,
        lambda meta: (
            triton.cdiv(meta["K"], meta["BLOCK_K"]),
            max(1, triton.cdiv(meta["N"], meta["BLOCK_N"])),
            meta["E"],
        ),
        x_ptr=x,
        amax_bits_ptr=amax_bits,
        q_ptr=q_ekn,
        scales_ptr=scales,
        stride_qe=q_ekn.stride(0),
        stride_qk=q_ekn.stride(1),
        **shape_args,
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )


@replay.replayable
def launch(
    x: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
    method: Method = "reduction",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate and compute the outputs of rowwise_3d_transpose_rhs for a validated (E, K, N) ``x``, any strides.

    Returns:
        q (E, N, K) with strides (N*K, 1, N), scales (E, K) f32 contiguous.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    e, k, n = x.shape
    q = torch.empty_strided((e, n, k), (n * k, 1, n), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((e, k), dtype=torch.float32, device=x.device)
    if method == "reduction":
        launch_rows(x, q.mT, scales.view(e * k), fp8_dtype, round_scales_to_power_of_2, backend)
    elif configs.transpose_atomic_kernel(backend, x, coop_limit(backend, x.device)) == "coop":
        launch_coop_slices(
            x, q.mT, scales.view(e * k), configs.COOP_TRANSPOSE, fp8_dtype, round_scales_to_power_of_2, backend
        )
    elif e > 0 and k > 0:
        _launch_atomic(x, q.mT, scales.view(e * k), fp8_dtype, round_scales_to_power_of_2, backend)
    return q, scales
