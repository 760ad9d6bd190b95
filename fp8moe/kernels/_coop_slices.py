"""The cooperative slice kernel: every slice (e, m, :) of an (E, M, L) view quantized over its L elements, each
element read once however long L is, the slice's chunks meeting through workspace atomics.

Why: a kernel in which one program owns a whole slice (the batched row kernel, fp8moe.kernels._rows) reads a slice
twice, amax then cast, once it outgrows what the program holds, and the second read misses L2; a kernel that splits
the slice into tiles and folds their amaxes in one launch must read it again to cast in a second. Any design that
reads x twice stays under 60% of copy bandwidth. Here a slice block's L elements are cut into chunks of BLOCK_L, one
program each. Every program loads its (BLOCK_L, BLOCK_M) tile once, folds the tile's amax into a workspace word per
slice (fp8moe.kernels._common.fold_amax), arrives, waits for the slice block's other chunks
(fp8moe.kernels._coop.wait_for_slice), reads the complete amax back and casts the tile it still holds.

Two ops run it, each with its own config table (the tile follows the axis x is read along):

- colwise_3d_scale_and_cast on an input read along N (fp8moe.configs.COOP_COLUMNS): the view ``x.mT`` (E, N, K),
  each slice a column, the tile read across the slices. On an H100 (session 35) it took 0.81-0.93x the row kernel's
  time at the issue #11 3D points on row-major input, 56-73% of copy bandwidth against 52-64%
  (benchmarks/results/h100-s35-colwise3d-rows-vs-coop.md); fp8moe.configs.COLWISE_3D_KERNEL picks it.
- rowwise_3d_transpose_rhs, method "atomic" (fp8moe.configs.COOP_TRANSPOSE): x (E, K, N) itself, each slice a row,
  the tile read along it; fp8moe.configs.TRANSPOSE_ATOMIC_KERNEL picks it over the method's two-launch form, which
  reads x twice (56-63% of copy bandwidth on the H200, benchmarks/results/issue11-misses.md).

Semantics: those of the op's fp8ref reference (the NaN-keeping amax of fp8moe.kernels._common, its scale and cast),
so the bytes are those of the op's other kernels.

Progress. A program takes its tile from a ticket (an atomic counter), not from its program id, so tiles are taken in
the order programs start and a slice block's chunks start together. A program waits only for the chunks of its own
slice block, at most ``coop_limit`` of them (fp8moe.kernels._coop: half the device's SMs), after arriving itself;
they all have tickets no later than the last one a running program holds, so they have started or will start on
the SMs running programs free. The launcher refuses an L that needs more chunks than that.

On the interpreter, whose programs run one after another, a wait would never end: there the fold and the cast are
two launches of the same code (PHASE_AMAX, PHASE_CAST), the wait left out.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe import configs, replay
from fp8moe.backend import Backend
from fp8moe.kernels._common import (
    amax_of_magnitude_bits,
    fold_amax,
    fp8_constexprs,
    magnitude_bits,
    quantize,
    scale_from_amax,
)
from fp8moe.kernels._coop import PHASE_AMAX, PHASE_CAST, PHASE_FUSED, coop_limit, wait_for_slice

__all__ = ["launch_coop_slices"]

#: Workspace words before the per-slice-block counts: the tickets of the fused (or fold) and the cast launch.
_TICKETS = tl.constexpr(2)


@triton.jit
def _coop_slices_kernel(
    x_ptr, q_ptr, scales_ptr, ws_ptr, E, M, L, stride_xe, stride_xm, stride_xl, stride_qe, stride_qm,
    PHASE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_M: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Ticket t: chunk t % CHUNKS of slice block t // CHUNKS, block b = (e = b % E, slices (b // E) * BLOCK_M on).
    The tile is (BLOCK_L, BLOCK_M), positions along L first, whichever axis x is read along (Triton lays it out by
    the strides). Workspace (int32, zeroed): the two tickets, one arrival count per slice block, then the amax bits
    of slice (e, m) at e * M + m. scales[e * M + m]; q[e, m, l] at e * stride_qe + m * stride_qm + l."""
    chunks = tl.cdiv(L, BLOCK_L)
    t = tl.atomic_add(ws_ptr + (1 if PHASE == PHASE_CAST else 0), 1)
    block = t // chunks
    e = block % E
    ms = (block // E) * BLOCK_M + tl.arange(0, BLOCK_M)
    ls = (t % chunks) * BLOCK_L + tl.arange(0, BLOCK_L)
    if INT64_INDEX:
        e = e.to(tl.int64)
        ms = ms.to(tl.int64)
        ls = ls.to(tl.int64)
    m_mask = ms < M
    mask = (ls < L)[:, None] & m_mask[None, :]
    x = tl.load(x_ptr + e * stride_xe + ls[:, None] * stride_xl + ms[None, :] * stride_xm, mask=mask, other=0.0)
    words = ws_ptr + _TICKETS + E * tl.cdiv(M, BLOCK_M) + e * M + ms
    if PHASE != PHASE_CAST:
        fold_amax(words, amax_of_magnitude_bits(magnitude_bits(x), x.dtype, 0), m_mask)
        if PHASE == PHASE_FUSED:
            tl.atomic_add(ws_ptr + _TICKETS + block, 1, sem="release")
            wait_for_slice(ws_ptr + _TICKETS + block, chunks)
    if PHASE != PHASE_AMAX:
        folded = tl.atomic_max(words, tl.zeros_like(ms).to(tl.int32), mask=m_mask, sem="acquire")
        scale = scale_from_amax(folded.to(tl.float32, bitcast=True), FP8_MAX, ROUND_POW2)
        if t % chunks == 0:
            tl.store(scales_ptr + e * M + ms, scale, mask=m_mask)
        q = quantize(x, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        tl.store(q_ptr + e * stride_qe + ms[None, :] * stride_qm + ls[:, None], q, mask=mask)


def launch_coop_slices(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    table: configs.KernelConfigs,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> None:
    """Quantize every slice (e, m, :) of the (E, M, L) view ``x`` into ``q`` and ``scales``, each element read once.

    Args:
        x: (E, M, L) bf16/f16/f32 view, any strides.
        q: (E, M, L) fp8 output view with ``q.stride(2) == 1`` (written).
        scales: (E * M,) contiguous f32 output (written), ``scales[e * M + m]``.
        table: the config table of the calling op (fp8moe.configs.COOP_COLUMNS or COOP_TRANSPOSE).
        fp8_dtype: q's dtype.
        round_scales_to_power_of_2: apply the pow2 rule.
        backend: where it runs (the config, the cast, one launch or two).

    Raises:
        ValueError: q is not contiguous along L, L is 0 while there are slices, or L needs more chunks than may wait
            for each other on this device (``coop_limit``).
    """
    e, m, length = x.shape
    if e == 0 or m == 0:
        return
    if length == 0:
        raise ValueError("L = 0: the slices have no chunk to write their scales from (the caller's other kernel does)")
    if q.stride(2) != 1 and length > 1:
        raise ValueError(f"q must be contiguous along L, got strides {q.stride()}")
    config = configs.coop_config(table, backend, x.shape)
    block_l, block_m = config.kwargs["BLOCK_L"], config.kwargs["BLOCK_M"]
    chunks, limit = triton.cdiv(length, block_l), coop_limit(backend, x.device)
    if chunks > limit:
        raise ValueError(
            f"L = {length} is {chunks} chunks of {block_l}: more than the {limit} that may wait for each other"
        )
    blocks = e * triton.cdiv(m, block_m)
    workspace = replay.scratch_zeros((_TICKETS.value + blocks + e * m,), torch.int32, x.device)
    phases = (PHASE_AMAX, PHASE_CAST) if backend.kind == "interpreter" else (PHASE_FUSED,)
    for phase in phases:
        configs.launch(
            _coop_slices_kernel,
            table,
            backend,
            lambda meta: (blocks * chunks,),
            config=config,
            x_ptr=x,
            q_ptr=q,
            scales_ptr=scales,
            ws_ptr=workspace,
            E=e,
            M=m,
            L=length,
            stride_xe=x.stride(0),
            stride_xm=x.stride(1),
            stride_xl=x.stride(2),
            stride_qe=q.stride(0),
            stride_qm=q.stride(1),
            PHASE=phase,
            INT64_INDEX=configs.needs_int64_index(x, q, scales),
            **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
        )
