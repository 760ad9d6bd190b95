"""The one kernel body behind the three per-group (jagged) ops of SPEC §5.

All three ops quantize slices that are jagged along K and write each slice contiguously along K:

- per_group_rowwise_scales: x (M, Ktot), slice = (row m, group g), q (M, Ktot) row-major, s[g * M + m].
- per_group_colwise_scales: x (Ktot, N), slice = (column n, group g), q (Ktot, N) strides (1, Ktot), s[g * N + n].
  Seen through ``x.t()`` and ``q.t()`` this is the rowwise op on an (N, Ktot) view with a row-major output.

So the kernels work on an (R, Ktot) view (R rows = M or N, each jagged along K) given by strides, and
:func:`launch_jagged_rows` is the rowwise op on such a view. A program owns one group and BLOCK_R rows: it reads the
group's [start, end) from ``offs`` on the device, makes one pass when the group fits one BLOCK_K block (x kept in
registers) and otherwise two passes over the group's columns (amax, then quantize and store; x read twice), and
writes its BLOCK_R scales. Empty groups write their EPS-derived scale and no data. Columns past offs[-1] belong to no
group and are left unwritten (fp8ref.ops writes 0x00 there; comparisons exclude them, SPEC §4).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe.backend import Backend
from fp8moe.configs import KernelConfigs, launch, needs_int64_index
from fp8moe.kernels._common import abs_max_keep_nan, fp8_constexprs, max_keep_nan, quantize, scale_from_amax

__all__ = ["PER_GROUP", "launch_jagged_rows", "quantize_group_block"]

#: Tile (BLOCK_R rows, BLOCK_K jagged columns). The rowwise op reads along K (wide-K tiles coalesce), the colwise
#: ops read along R (x.t() of a row-major input: tall-R tiles coalesce), so the CUDA candidates span both shapes.
#: Chosen by measurement on the H200 (benchmarks/tune_configs.py, benchmarks/results/h200-configs-*.md): each is best
#: or within 5% of best at one or more of 10 points (MoE shapes, both ops, canonical and strided inputs); 256x16/w4
#: was dropped (never within 5%, best ratio 1.27). The dual op keeps its own list (per_group_colwise_scales_dual.py).
#: Interpreter: 8 x 32, below the test shapes (12-20 rows, groups of 0-143 columns), so row tails, the one-pass path
#: (group <= 32 columns) and the multi-block two-pass path with column tails all run in the CPU tests.
PER_GROUP = KernelConfigs(
    name="per_group_scales",
    cuda=(
        triton.Config({"BLOCK_R": 4, "BLOCK_K": 1024}, num_warps=8),
        triton.Config({"BLOCK_R": 16, "BLOCK_K": 256}, num_warps=8),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=8),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64}, num_warps=4),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 32}, num_warps=4),
    ),
    rocm=triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=8),
    interpreter=triton.Config({"BLOCK_R": 8, "BLOCK_K": 32}, num_warps=4),
    key=("R", "K", "G", "stride_xr", "stride_xk", "FP8_DTYPE", "POW2"),
)


@triton.jit
def quantize_group_block(
    x_ptr,
    q_ptr,
    s_ptr,
    offs_ptr,
    R,
    K,
    pid_r,
    pid_g,
    stride_xr,
    stride_xk,
    stride_qr,
    stride_qk,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    POW2: tl.constexpr,
    EXACT_ENCODE: tl.constexpr,
):
    """Scale and cast rows [pid_r * BLOCK_R, +BLOCK_R) of an (R, Ktot) view within group pid_g; store s[g * R + r].

    INT64_INDEX: element offsets in int64, needed once an offset passes 2^31 - 1 (e.g. 16384 rows x 131072 tokens).
    """
    start = tl.load(offs_ptr + pid_g - 1, mask=pid_g > 0, other=0)
    end = tl.load(offs_ptr + pid_g)
    # offs are not validated on the host (no sync): clamp to [0, K] on the device, so offs[-1] > Ktot cuts the last
    # group at Ktot exactly as fp8ref's searchsorted does, and no offset can address memory outside x or q.
    start = tl.minimum(tl.maximum(start, 0), K)
    end = tl.minimum(tl.maximum(end, start), K)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    block = tl.arange(0, BLOCK_K)
    if INT64_INDEX:
        pid_g = pid_g.to(tl.int64)
        rows = rows.to(tl.int64)
        start = start.to(tl.int64)
        end = end.to(tl.int64)
    row_mask = rows < R
    x_rows = x_ptr + rows[:, None] * stride_xr  # (BLOCK_R, 1)
    q_rows = q_ptr + rows[:, None] * stride_qr

    if end - start <= BLOCK_K:
        # One pass: the group fits one block, so x stays in registers. Masked lanes load 0 (|x| >= 0 elsewhere).
        cols = start + block
        mask = row_mask[:, None] & (cols < end)[None, :]
        x = tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)
        scale = scale_from_amax(abs_max_keep_nan(x, 1), FP8_MAX, POW2)
        q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE)
        tl.store(q_rows + cols[None, :] * stride_qk, q, mask=mask)
    else:
        amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
        for k0 in range(start, end, BLOCK_K):
            cols = k0 + block
            mask = row_mask[:, None] & (cols < end)[None, :]
            x = tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)
            amax = max_keep_nan(amax, abs_max_keep_nan(x, 1))
        scale = scale_from_amax(amax, FP8_MAX, POW2)
        for k0 in range(start, end, BLOCK_K):
            cols = k0 + block
            mask = row_mask[:, None] & (cols < end)[None, :]
            x = tl.load(x_rows + cols[None, :] * stride_xk, mask=mask, other=0.0)
            q = quantize(x, scale[:, None], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, EXACT_ENCODE)
            tl.store(q_rows + cols[None, :] * stride_qk, q, mask=mask)
    tl.store(s_ptr + pid_g * R + rows, scale, mask=row_mask)


@triton.jit
def _per_group_rows_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    offs_ptr,
    R,
    K,
    G,
    stride_xr,
    stride_xk,
    stride_qr,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    POW2: tl.constexpr,
    EXACT_ENCODE: tl.constexpr,
):
    """x (R, K) any strides -> q (R, K) with unit stride along K. Grid (cdiv(R, BLOCK_R), G).

    K (= Ktot) and G are only in the CUDA autotune key; the group bounds come from offs.
    """
    quantize_group_block(
        x_ptr,
        q_ptr,
        s_ptr,
        offs_ptr,
        R,
        K,
        tl.program_id(0),
        tl.program_id(1),
        stride_xr,
        stride_xk,
        stride_qr,
        1,
        BLOCK_R,
        BLOCK_K,
        INT64_INDEX,
        FP8_DTYPE,
        FP8_MAX,
        MAN_BITS,
        EMIN,
        FNUZ,
        POW2,
        EXACT_ENCODE,
    )


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
    launch(
        _per_group_rows_kernel,
        PER_GROUP,
        backend,
        lambda meta: (triton.cdiv(rows, meta["BLOCK_R"]), num_groups),
        x_ptr=x,
        q_ptr=q,
        s_ptr=scales,
        offs_ptr=offs,
        R=rows,
        K=cols,
        G=num_groups,
        stride_xr=x.stride(0),
        stride_xk=x.stride(1),
        stride_qr=q.stride(0),
        INT64_INDEX=needs_int64_index(x, q, scales),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.exact_encode),
    )
    return q, scales
