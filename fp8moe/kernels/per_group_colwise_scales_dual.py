"""Triton twin of fp8ref.ops.per_group_colwise_scales_dual: two (Ktot, N1), (Ktot, N2) tensors, one offs, one launch.

Every jagged kernel takes the two tensors in one launch (fp8moe.configs.PER_GROUP_KERNEL picks one per call): the
chunked kernel (fp8moe.kernels._group_chunks, the default where groups average 1024-4095 rows) and the tile kernel
(fp8moe.kernels._group_tiles) run x1's items, then x2's, in one ticket order. The span kernel below spans both
tensors' column blocks: blocks [0, cdiv(N1, BLOCK_R)) quantize x1, the rest x2, each with the per-group body shared
by every jagged op (fp8moe.kernels._per_group), on the transposed views exactly as per_group_colwise_scales does.
One launch instead of two saves a launch in the grad_B backward and lets both tensors' programs fill the device
together when groups are small. Rows past offs[-1] are left unwritten in q1 and q2 (fp8ref writes 0x00 there;
comparisons exclude them, SPEC §4).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import fp8_constexprs
from fp8moe.kernels._jagged import cooperative_launcher
from fp8moe.kernels._per_group import jagged_grid, jagged_program, quantize_group_rows
from fp8moe.kernels._span import pack_k

__all__ = ["launch"]


@triton.jit
def _per_group_colwise_scales_dual_kernel(
    x1_ptr,
    q1_ptr,
    scales1_ptr,
    x2_ptr,
    q2_ptr,
    scales2_ptr,
    offs_ptr,
    N1,
    N2,
    K,
    G,
    stride_x1n,
    stride_x1k,
    stride_x2n,
    stride_x2k,
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
    """x1.t() (N1, K), x2.t() (N2, K) any strides -> row-major (N, K) outputs. Grid :func:`jagged_grid` of
    cdiv(N1) + cdiv(N2) row blocks and G groups.

    K (= Ktot) and G are only in the CUDA autotune key; the group bounds come from offs.
    """
    pid_r, pid_g = jagged_program(G, GROUPS_FASTEST, DEPENDENT_LAUNCH)
    blocks_1 = tl.cdiv(N1, BLOCK_R)
    if pid_r < blocks_1:
        quantize_group_rows(
            x1_ptr,
            q1_ptr,
            scales1_ptr,
            offs_ptr,
            N1,
            K,
            pid_r,
            pid_g,
            stride_x1n,
            stride_x1k,
            K,
            BLOCK_R,
            BLOCK_K,
            PACK_K,
            INT64_INDEX,
            FP8_DTYPE,
            FP8_MAX,
            MAN_BITS,
            EMIN,
            FNUZ,
            ROUND_POW2,
            CAST_MODE,
            ONE_READ,
            ONE_READ_K,
            EDGES_IN_TILE,
            EDGE_LOOP,
            EXTRA_CHUNKS,
            L2_HINTS,
        )
    else:
        quantize_group_rows(
            x2_ptr,
            q2_ptr,
            scales2_ptr,
            offs_ptr,
            N2,
            K,
            pid_r - blocks_1,
            pid_g,
            stride_x2n,
            stride_x2k,
            K,
            BLOCK_R,
            BLOCK_K,
            PACK_K,
            INT64_INDEX,
            FP8_DTYPE,
            FP8_MAX,
            MAN_BITS,
            EMIN,
            FNUZ,
            ROUND_POW2,
            CAST_MODE,
            ONE_READ,
            ONE_READ_K,
            EDGES_IN_TILE,
            EDGE_LOOP,
            EXTRA_CHUNKS,
            L2_HINTS,
        )


@replay.replayable
def launch(
    x1: torch.Tensor,
    x2: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Allocate the outputs and launch once; arguments are already validated (fp8moe.ops), offs is never read here.

    Args:
        x1: (Ktot, N1) bf16/f16/f32, any strides.
        x2: (Ktot, N2), x1's dtype and device, any strides.
        offs: (G,) int32 exclusive end offsets along the shared rows, on the inputs' device.
        fp8_dtype: an fp8 dtype of ``backend``.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        backend: the backend of the inputs' device.

    Returns:
        (q1, s1, q2, s2): q1 (Ktot, N1) strides (1, Ktot), s1 (G * N1,) with s1[g * N1 + n]; q2, s2 likewise.
    """
    launcher = cooperative_launcher(backend, x1.t(), offs.numel())
    if launcher is None:
        return launch_span(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2, backend)
    (q1_t, s1), (q2_t, s2) = launcher([x1.t(), x2.t()], offs, fp8_dtype, round_scales_to_power_of_2, backend)
    return q1_t.t(), s1, q2_t.t(), s2


def launch_span(
    x1: torch.Tensor,
    x2: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`launch` on the span kernel (fp8moe.kernels._per_group): one program per (group, row block)."""
    ktot, n1 = x1.shape
    n2 = x2.shape[1]
    num_groups = offs.numel()
    # (N, Ktot) row-major, returned transposed: (Ktot, N) with strides (1, Ktot).
    q1_t = torch.empty_strided((n1, ktot), (ktot, 1), dtype=fp8_dtype, device=x1.device)
    q2_t = torch.empty_strided((n2, ktot), (ktot, 1), dtype=fp8_dtype, device=x1.device)
    s1 = torch.empty((num_groups * n1,), dtype=torch.float32, device=x1.device)
    s2 = torch.empty((num_groups * n2,), dtype=torch.float32, device=x1.device)
    if n1 + n2 == 0 or num_groups == 0:
        return q1_t.t(), s1, q2_t.t(), s2
    configs.launch(
        _per_group_colwise_scales_dual_kernel,
        configs.PER_GROUP_DUAL,
        backend,
        lambda meta: jagged_grid(
            triton.cdiv(meta["N1"], meta["BLOCK_R"]) + triton.cdiv(meta["N2"], meta["BLOCK_R"]),
            meta["G"],
            meta.get("GROUPS_FASTEST", False),
        ),
        x1_ptr=x1,
        q1_ptr=q1_t,
        scales1_ptr=s1,
        x2_ptr=x2,
        q2_ptr=q2_t,
        scales2_ptr=s2,
        offs_ptr=offs,
        N1=n1,
        N2=n2,
        K=ktot,
        G=num_groups,
        stride_x1n=x1.stride(1),
        stride_x1k=x1.stride(0),
        stride_x2n=x2.stride(1),
        stride_x2k=x2.stride(0),
        PACK_K=pack_k((x1.stride(0), x2.stride(0)), q1_t, q2_t),
        INT64_INDEX=configs.needs_int64_index(x1, x2, q1_t, q2_t, s1, s2),
        **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
    )
    return q1_t.t(), s1, q2_t.t(), s2
