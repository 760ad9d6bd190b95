"""The cooperative column kernel: colwise_3d_scale_and_cast on an (E, K, N) input read along N, each column's K
elements read once, however long K is.

Why: the batched row kernel (fp8moe.kernels._rows) reduces each column of an input laid out along N as a strided
row of K elements. Where K outgrows what one program holds it reads the column twice, amax then cast, and the
second read misses L2: the colwise 3D op on row-major input ran at 46-60% of copy bandwidth on the H200
(benchmarks/results/issue11-misses.md), and any design that reads x twice stays under 60%. Here a column block's
K elements are cut into chunks of CHUNK, one program each. Every program loads its (CHUNK, BLOCK_N) tile once,
folds the tile's amax into a workspace word per column (fp8moe.kernels._common.fold_amax), arrives, waits for the
column block's other chunks (fp8moe.kernels._coop.wait_for_slice), reads the complete amax back and casts the tile
it still holds. On an H100 (session 35) it took 0.81-0.93x the row kernel's time at the issue #11 3D points on
row-major input, 56-73% of copy bandwidth against 52-64% (benchmarks/results/h100-s35-colwise3d-rows-vs-coop.md);
which kernel runs is fp8moe.configs.COLWISE_3D_KERNEL (opt-in for now).

Semantics: those of fp8ref.colwise_3d_scale_and_cast (the NaN-keeping amax of fp8moe.kernels._common, its scale and
cast), so the bytes are the row kernel's.

Progress. A program takes its tile from a ticket (an atomic counter), not from its program id, so tiles are taken in
the order programs start and a column block's chunks start together. A program waits only for the chunks of its own
column block, at most ``coop_limit`` of them (fp8moe.kernels._coop: half the device's SMs), after arriving itself;
they all have tickets no later than the last one a running program holds, so they have started or will start on
the SMs running programs free. The launcher refuses a K that needs more chunks than that.

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

__all__ = ["launch_coop_columns"]

#: Workspace words before the per-column-block counts: the tickets of the fused (or fold) and the cast launch.
_TICKETS = tl.constexpr(2)


@triton.jit
def _coop_columns_kernel(
    x_ptr, q_ptr, scales_ptr, ws_ptr, E, K, N, stride_xe, stride_xk, stride_xn, stride_qe, stride_qn,
    PHASE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, INT64_INDEX: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Ticket t: chunk t % CHUNKS of column block t // CHUNKS, block b = (expert b % E, columns (b // E) * BLOCK_N).
    Workspace (int32, zeroed): the two tickets, one arrival count per column block, then the amax bits of column
    (e, n) at e * N + n. scales[e * N + n]; q[e, k, n] at e * stride_qe + n * stride_qn + k."""
    chunks = tl.cdiv(K, CHUNK)
    t = tl.atomic_add(ws_ptr + (1 if PHASE == PHASE_CAST else 0), 1)
    block = t // chunks
    e = block % E
    ns = (block // E) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = (t % chunks) * CHUNK + tl.arange(0, CHUNK)
    if INT64_INDEX:
        e = e.to(tl.int64)
        ns = ns.to(tl.int64)
        ks = ks.to(tl.int64)
    n_mask = ns < N
    k_mask = ks < K
    x = tl.load(x_ptr + e * stride_xe + ks[:, None] * stride_xk + ns[None, :] * stride_xn,
                mask=k_mask[:, None] & n_mask[None, :], other=0.0)  # fmt: skip
    words = ws_ptr + _TICKETS + E * tl.cdiv(N, BLOCK_N) + e * N + ns
    if PHASE != PHASE_CAST:
        fold_amax(words, amax_of_magnitude_bits(magnitude_bits(x), x.dtype, 0), n_mask)
        if PHASE == PHASE_FUSED:
            tl.atomic_add(ws_ptr + _TICKETS + block, 1, sem="release")
            wait_for_slice(ws_ptr + _TICKETS + block, chunks)
    if PHASE != PHASE_AMAX:
        folded = tl.atomic_max(words, tl.zeros_like(ns).to(tl.int32), mask=n_mask, sem="acquire")
        scale = scale_from_amax(folded.to(tl.float32, bitcast=True), FP8_MAX, ROUND_POW2)
        if t % chunks == 0:
            tl.store(scales_ptr + e * N + ns, scale, mask=n_mask)
        q = quantize(x, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
        tl.store(q_ptr + e * stride_qe + ns[:, None] * stride_qn + ks[None, :], tl.trans(q),
                 mask=n_mask[:, None] & k_mask[None, :])  # fmt: skip


def launch_coop_columns(
    x: torch.Tensor,
    q: torch.Tensor,
    scales: torch.Tensor,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    backend: Backend,
) -> None:
    """Quantize every column (e, :, n) of ``x`` (E, K, N) into ``q`` and ``scales``, each element read once.

    Args:
        x: (E, K, N) bf16/f16/f32, any strides (read along N: the row-major layout this kernel exists for).
        q: (E, K, N) fp8 output with ``q.stride(1) == 1`` (written).
        scales: (E * N,) contiguous f32 output (written), ``scales[e * N + n]``.
        fp8_dtype: q's dtype.
        round_scales_to_power_of_2: apply the pow2 rule.
        backend: where it runs (the config, the cast, one launch or two).

    Raises:
        ValueError: K needs more chunks than may wait for each other on this device (``coop_limit``).
    """
    e, k, n = x.shape
    if e == 0 or k == 0 or n == 0:
        return
    if q.stride(1) != 1 and k > 1:
        raise ValueError(f"q must be contiguous along K, got strides {q.stride()}")
    args = {"E": e, "K": k, "N": n}
    config = configs.COOP_COLUMNS.fixed(backend, args)
    chunk, block_n = config.kwargs["CHUNK"], config.kwargs["BLOCK_N"]
    chunks, limit = triton.cdiv(k, chunk), coop_limit(backend, x.device)
    if chunks > limit:
        raise ValueError(f"K = {k} is {chunks} chunks of {chunk}: more than the {limit} that may wait for each other")
    blocks = e * triton.cdiv(n, block_n)
    workspace = replay.scratch_zeros((_TICKETS.value + blocks + e * n,), torch.int32, x.device)
    phases = (PHASE_AMAX, PHASE_CAST) if backend.kind == "interpreter" else (PHASE_FUSED,)
    for phase in phases:
        configs.launch(
            _coop_columns_kernel,
            configs.COOP_COLUMNS,
            backend,
            lambda meta: (blocks * chunks,),
            config=config,
            x_ptr=x,
            q_ptr=q,
            scales_ptr=scales,
            ws_ptr=workspace,
            **args,
            stride_xe=x.stride(0),
            stride_xk=x.stride(1),
            stride_xn=x.stride(2),
            stride_qe=q.stride(0),
            stride_qn=q.stride(2),
            PHASE=phase,
            INT64_INDEX=configs.needs_int64_index(x, q, scales),
            **fp8_constexprs(fp8_dtype, round_scales_to_power_of_2, backend.cast_mode),
        )
