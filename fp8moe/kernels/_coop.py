"""What the two cooperative jagged kernels share: the programs of one slice meeting through a zeroed workspace.

The tile kernel (fp8moe.kernels._group_tiles) and the chunked kernel (fp8moe.kernels._group_chunks) both split a
slice over several programs that fold their partial amax into a workspace word, count their arrivals and wait for
the slice's last. Here: the launch phases (one fused launch on GPUs; the interpreter, whose programs run one after
another, runs the fold and the cast as two launches), the clamped offsets every group bound derives from, the wait,
and the bound on how many programs a slice may wait for (``coop_limit``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from fp8moe.backend import Backend

__all__ = [
    "INTERPRETER_COOP_LIMIT",
    "PHASE_AMAX",
    "PHASE_ARRIVE",
    "PHASE_CAST",
    "PHASE_FUSED",
    "PHASE_LONG",
    "arrive",
    "clamped_ends",
    "coop_limit",
    "device_multiprocessors",
    "group_bounds",
    "group_item",
    "lane",
    "max_combine",
    "multiprocessors",
    "view_outputs",
    "wait_for_slice",
]

#: Most chunks a shared slice spans in the interpreter (nothing waits there; the tile kernel's long-slice path takes
#: longer slices, tests/test_kernels_group_tiles.py).
INTERPRETER_COOP_LIMIT = 2

#: One launch, programs wait for the other programs of their slice (GPUs).
PHASE_FUSED = tl.constexpr(0)
#: First of two launches: fold the partial amaxes of shared slices, store nothing (the interpreter).
PHASE_AMAX = tl.constexpr(1)
#: Second of two launches: read the folded amaxes, cast and store (the interpreter).
PHASE_CAST = tl.constexpr(2)
#: The launch after them all: cast the long slices of the listed tiles.
PHASE_LONG = tl.constexpr(3)
#: PHASE_FUSED's folds and arrivals alone, no wait and no store: how the interpreter checks the arrival counts the
#: GPU's waits rely on (tests/test_kernels_group_tiles.py).
PHASE_ARRIVE = tl.constexpr(4)


@triton.jit
def clamped_ends(offs_ptr, gs, G, K):
    """offs[g] clamped to [0, K] for the lanes g < G, 0 elsewhere. offs are never validated on the host: every group
    bound is derived from these on the device, so no offset can address memory outside x or q."""
    ends = tl.load(offs_ptr + gs, mask=(gs >= 0) & (gs < G), other=0)
    return tl.minimum(tl.maximum(ends, 0), K)


@triton.jit
def lane(values, gs, g):
    """values[g] of a per-group vector whose lanes are the group indices ``gs``."""
    return tl.sum(tl.where(gs == g, values, 0), 0)


@triton.jit
def group_item(item, per_row_block, gs, starts, ends, chunks, firsts):
    """Item ``item`` of a jagged launch whose items are numbered row block major, then group, then chunk, from the
    per-group table (bounds, chunk counts, and each group's first item within a row block; lanes past G hold
    firsts = per_row_block): its row block, group, the group's chunk count, its chunk within the group, and the
    group's bounds."""
    rb = item // per_row_block
    u = item - rb * per_row_block
    g = tl.sum((firsts + chunks <= u).to(tl.int32), 0)
    return rb, g, lane(chunks, gs, g), u - lane(firsts, gs, g), lane(starts, gs, g), lane(ends, gs, g)


@triton.jit
def group_bounds(offs_ptr, gs, G, K):
    """(starts, ends) of the groups in lanes ``gs``: running maxima of the clamped offsets (SPEC §4.7), so the groups
    partition [0, K) in order whatever the offsets."""
    ends = tl.associative_scan(clamped_ends(offs_ptr, gs, G, K), 0, max_combine)
    starts = tl.associative_scan(clamped_ends(offs_ptr, gs - 1, G, K), 0, max_combine)
    return starts, ends


@triton.jit
def max_combine(a, b):
    """The combine of a running maximum (tl.associative_scan)."""
    return tl.maximum(a, b)


@triton.jit
def arrive(count_ptr):
    """Count this program in at its slice block's arrival count (release) once every warp of it has folded: a
    barrier, then the arrival. One thread makes a scalar atomic, and its release orders only what that thread, and
    threads it has synchronized with, did before it; the folds are made by the threads that hold the reduced amax,
    in other warps too. Without the barrier a program of the slice may see the count complete and read the amax
    before another warp's fold lands, and cast with too small an amax. Triton 3.9 happens to put a barrier there
    (its lowering of the atomic guards shared memory), Triton 3.6, the GPU's, does not: the cooperative slice kernel
    had that race until session 48 (benchmarks/sass_counts.py --meetings; tests/test_kernel_instructions.py)."""
    tl.debug_barrier()
    tl.atomic_add(count_ptr, 1, sem="release")


@triton.jit
def wait_for_slice(count_ptr, chunks):
    """Wait until all ``chunks`` programs of a slice have arrived. It spins on volatile loads, not atomics:
    read-modify-writes of the count would queue behind each other and the arrivals in the L2's atomic unit. Every
    thread spins; callers put a barrier after it, so that no thread reads the folded amax before all have seen the
    count complete. The read is an acquire atomic on the amax words, made after the poll that saw the count
    (control dependence, then the barrier) and so performed after the folds the arrivals released; the PTX memory
    model would have the poll itself acquire (or a fence after it) to make that order formal, which costs an atomic
    or a fence per program: 1.000-1.007x the time on an H100 (session 49, benchmarks/probe_coop_race.py's "acquire"
    form), not taken until the GPU suite runs under it. Polls that are acquire loads (inline PTX on CUDA; the
    "poll-acquire" form of benchmarks/arrival_forms.py) would give it with no instruction added: untimed."""
    seen = tl.load(count_ptr, volatile=True)
    while seen < chunks:
        seen = tl.load(count_ptr, volatile=True)


@functools.cache
def multiprocessors(index: int) -> int:
    """SMs (CUs on ROCm) of GPU ``index``, read once."""
    return torch.cuda.get_device_properties(index).multi_processor_count


def device_multiprocessors(device: torch.device) -> int:
    """SMs (CUs) of the GPU ``device`` names (the current one for a bare "cuda")."""
    return multiprocessors(device.index if device.index is not None else torch.cuda.current_device())


def view_outputs(
    xs: Sequence[torch.Tensor], groups: int, fp8_dtype: torch.dtype
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The outputs of a cooperative launch over (R_i, Ktot) views: per view q (R_i, Ktot) row-major and the scales
    (G * R_i,) f32."""
    ktot, device = xs[0].shape[1], xs[0].device
    return [
        (
            torch.empty_strided((x.shape[0], ktot), (ktot, 1), dtype=fp8_dtype, device=device),
            torch.empty((groups * x.shape[0],), dtype=torch.float32, device=device),
        )
        for x in xs
    ]


def coop_limit(backend: Backend, device: torch.device) -> int:
    """Most programs a slice may wait for (each kernel's module docstring, Progress): half the device's SMs (CUs on
    ROCm), so a slice's programs fit on the device with room to spare for other streams' kernels;
    INTERPRETER_COOP_LIMIT in the interpreter, where nothing waits."""
    if backend.kind == "interpreter":
        return INTERPRETER_COOP_LIMIT
    return max(device_multiprocessors(device) // 2, 1)
