"""The batched row kernel and its launcher: every dense op of SPEC §5 is this kernel on a view.

The kernel quantizes a batch of matrices (B, S, L) row by row: one scale per (b, s), amax over L.

- rowwise 2D: x (M, K) is the batch (1, M, K); q (M, K) row-major.
- colwise 3D: x (E, K, N) viewed as (E, N, K) (``x.mT``); q (E, K, N) with strides (K*N, 1, K) is, viewed the same
  way, a contiguous (E, N, K).
- rowwise 3D transpose rhs (reduction method): x (E, K, N) as is; q (E, N, K) with strides (N*K, 1, N) is, viewed
  as ``q.mT``, a contiguous (E, K, N).

In every case the reduced dim L is contiguous in q, and in the canonical input layouts it is contiguous in x too.
A program owns BLOCK_S rows and runs the shared span loop (fp8moe.kernels._span) over [0, L): one read when L fits
one BLOCK_L tile, two otherwise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs
from fp8moe.backend import Backend
from fp8moe.kernels._common import fp8_constexprs
from fp8moe.kernels._span import pack_k, quantize_span

__all__ = ["launch_rows"]


@triton.heuristics({"ONE_PASS": lambda args: args["L"] <= args["BLOCK_L"]})
@triton.jit
def _rowwise_scale_and_cast_kernel(
    x_ptr,
    q_ptr,
    scales_ptr,
    B,
    S,
    L,
    stride_xb,
    stride_xs,
    stride_xl,
    stride_qb,
    stride_qs,
    BLOCK_S: tl.constexpr,
    BLOCK_L: tl.constexpr,
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
):
    """x (B, S, L) any strides -> q (B, S, L) with unit stride along L, scales[b * S + s]. Grid (cdiv(S, BLOCK_S), B).

    B is only the grid's second axis; it is an argument so that the CUDA autotune key sees it.
    """
    pid_s = tl.program_id(0)
    pid_b = tl.program_id(1)
    rows = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    if INT64_INDEX:
        pid_b = pid_b.to(tl.int64)
        rows = rows.to(tl.int64)
    row_mask = rows < S
    x_rows = x_ptr + pid_b * stride_xb + rows[:, None] * stride_xs  # (BLOCK_S, 1)
    q_rows = q_ptr + pid_b * stride_qb + rows[:, None] * stride_qs
    scale = quantize_span(
        x_rows, q_rows, row_mask, 0, L, stride_xl, BLOCK_S, BLOCK_L, ONE_PASS, PACK_K, INT64_INDEX,
        FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
    )  # fmt: skip
    tl.store(scales_ptr + pid_b * S + rows, scale, mask=row_mask)


def launch_rows(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> None:
    """Quantize each row (last dim) of ``x`` (B, S, L) into ``q`` and ``scales``.

    Args:
        x: (B, S, L) bf16/f16/f32, any strides.
        q: (B, S, L) fp8 output with ``q.stride(2) == 1`` (written).
        scales: (B * S,) contiguous f32 output (written), ``scales[b * S + s]``.
        fp8_dtype: q's dtype.
        round_scales_to_power_of_2: apply the pow2 rule.
        backend: where it runs (selects configs and the cast).
    """
    b, s, length = x.shape
    if b == 0 or s == 0:
        return
    if q.stride(2) != 1 and length > 1:
        raise ValueError(f"q must be contiguous along the reduced dim, got strides {q.stride()}")
    configs.launch(
        _rowwise_scale_and_cast_kernel,
        configs.ROWWISE,
        backend,
        lambda meta: (triton.cdiv(meta["S"], meta["BLOCK_S"]), meta["B"]),
        x_ptr=x,
        q_ptr=q,
        scales_ptr=scales,
        B=b,
        S=s,
        L=length,
        stride_xb=x.stride(0),
        stride_xs=x.stride(1),
        stride_xl=x.stride(2),
        stride_qb=q.stride(0),
        stride_qs=q.stride(1),
        PACK_K=pack_k((x.stride(2),), q),
        INT64_INDEX=configs.needs_int64_index(x, q, scales),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )
