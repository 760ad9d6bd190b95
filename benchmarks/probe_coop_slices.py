"""Can long slices be read once? Programs that split a slice, hold their chunk in registers and meet through atomics.

    python benchmarks/probe_coop_slices.py --out results.md      # on a CUDA GPU; a Markdown table

Why: where a group's slice is longer than a tile can hold (per-group colwise at 4096-token groups, colwise 3D on
row-major input with K = 2048-8192), fp8moe reads it twice, amax then cast, and the second read misses L2: DRAM
reads 1.66-1.92x the input (benchmarks/results/h200-bench-2026-12-02-s8-summary.md). A design that reads x twice
cannot pass 60% of copy bandwidth; per-group colwise 65536x4096 G16 runs at 94% of that bound (issue11-misses.md).
fp8moe's tile kernel (fp8moe.kernels._group_tiles, opt-in) reads such slices once, but its generality (any jagged
layout, long-slice lists, about 250 registers) made it 4-9x slower than the span kernel on short groups
(per-group-ledger.md rows 11). This probe is that design stripped to uniform long slices: a slice of SLICE tokens
x BLOCK_N columns is cut into SLICE / CHUNK chunks, one program each, taken in ticket order (an atomic counter, so
a slice's programs start together); each loads its chunk once, folds the chunk's amax into a workspace word per
column (integer atomic max of the f32 bits), arrives (fp8moe.kernels._coop.arrive: a barrier, then the release;
the arrival alone until session 48, so the timings before then are of a kernel without that barrier), waits for the
slice's other chunks (fp8moe.kernels._coop.wait_for_slice) and casts the chunk it still holds. Math as the
stripped ceiling (benchmarks/transpose_ceiling.py: 448 / amax by ``div_rn``, saturating cast, transposed pointer
stores).

Variants: ``op`` (fp8moe.ops.per_group_colwise_scales on the same x and uniform offs, autotuned: the baseline),
``coop<CHUNK>x<BLOCK_N>/w<W>`` (the cooperative kernel; its time includes zeroing its workspace, one memset), and
the rungs that take the meeting apart (session 44): ``/pid`` the program id for the ticket (nothing then guarantees
that a slice's chunks have all started: timing only), ``/ld`` the slice's amax read back by volatile loads instead
of atomics, ``/arrive`` each chunk folding and arriving but casting with its own amax without waiting, ``/local``
no atomic at all (each chunk its own slice, transpose_ceiling.py's one-read math at the chunk's length). The
``/arrive`` and ``/local`` rows are checked at the chunk's length. ``/defer<D>`` (alone) defers the meeting: each
program folds one chunk and casts the chunk D tickets before it, read again, instead of holding its tile while it
waits (_deferred_kernel). ``/pad`` puts each arrival count and ticket on its own 128-byte line (in the full
kernel 32 items' counts share a line with each other and the tickets, polled by every waiting program), and
``/sleep<N>`` sleeps N ns between polls. ``/pipe<P>`` (with /pad or alone) holds two chunks: a persistent grid of P
programs per SM, each loading its next ticket's chunk before it waits for the slice of the chunk it holds, so the
load's latency and the wait overlap (_pipelined_kernel; each register tile then holds half the elements). On an H100
(session 45, benchmarks/results/h100-s45-call39-coop_pipe.md) its best, 128x64/w4/pad/pipe3 (152 registers, 3 per
SM), took 0.97x the full kernel's time at 8192x5120/8192 and 1.05-1.09x at the two larger points: not kept; the
no-wait rung stayed 0.85-0.93x.

Each coop variant's codes are checked against transpose_ceiling.expected (every byte), the op's against fp8ref,
before timing; times are CUDA-graph medians; % of copy is ideal bytes (2 read + 1 written per element) over the copy
bandwidth timed in the same run. The interpreter (CPU) runs the fold and the cast as two launches, since its
programs run one after another and a wait would never end (fp8moe.kernels._coop).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import torch

import fp8moe

# isort: split
import triton
import triton.language as tl
from transpose_ceiling import _load_tile, _slice_scale, _store_scaled, expected

from fp8moe.backend import backend_for
from fp8moe.kernels._coop import (
    PHASE_AMAX,
    PHASE_CAST,
    PHASE_FUSED,
    arrive,
    coop_limit,
    device_multiprocessors,
    wait_for_slice,
)

#: The variants main times by default (the first is every row's baseline).
VARIANTS = ("op", "coop128x64/w4", "coop256x64/w4", "coop128x128/w8", "coop256x32/w4", "coop64x128/w4")


@triton.jit
def _coop_kernel(
    x_ptr, q_ptr, ws_ptr, KT, N, SLICES,
    SLICE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, PHASE: tl.constexpr, TICKET: tl.constexpr,
    MEET: tl.constexpr, LOAD_BACK: tl.constexpr, PAD: tl.constexpr, SLEEP: tl.constexpr,
):  # fmt: skip
    """Workspace (int32, zeroed): the ticket of each launch's phase (fused or fold, then cast), then one arrival
    count per item, each of these PAD words apart (PAD = 32: a 128-byte line each, so that the programs polling one
    count do not share its line with other items' arrivals and the tickets), then BLOCK_N amax words per item. A
    waiting program sleeps SLEEP ns between polls (0: it polls back to back). Item i = (slice i % SLICES, column
    block i // SLICES); ticket t takes chunk t % CHUNKS of item t // CHUNKS. Without TICKET, t is the program id
    (nothing then guarantees that a chunk's slice-mates have started: a timing variant). MEET < MEET_ALL casts with
    the chunk's own amax: MEET_ARRIVE after folding and arriving as the full kernel does, MEET_NONE with no atomics
    at all. LOAD_BACK reads the folded amax back by volatile loads instead of an atomic max of 0 per word."""
    CHUNKS: tl.constexpr = SLICE // CHUNK
    items = SLICES * tl.cdiv(N, BLOCK_N)
    t = tl.atomic_add(ws_ptr + (PAD if PHASE == PHASE_CAST else 0), 1) if TICKET else tl.program_id(0)
    item, k0, n0 = _chunk_at(t, SLICES, SLICE, CHUNK, BLOCK_N)
    count = _count_ptr(ws_ptr, item, PAD)
    words = _amax_words(ws_ptr, item, items, BLOCK_N, PAD)
    x = _load_tile(x_ptr, None, k0, n0, N, CHUNK, BLOCK_N, False)
    chunk_amax = tl.max(tl.abs(x.to(tl.float32)), 0)
    if PHASE != PHASE_CAST and MEET != MEET_NONE:
        tl.atomic_max(words, chunk_amax.to(tl.int32, bitcast=True), sem="relaxed")
        if PHASE == PHASE_FUSED:
            arrive(count)
            if MEET == MEET_ALL and SLEEP > 0:
                _wait_sleeping(count, CHUNKS, SLEEP)
            elif MEET == MEET_ALL:
                wait_for_slice(count, CHUNKS)
    if PHASE != PHASE_AMAX:
        if MEET == MEET_ALL and LOAD_BACK:
            amax = tl.load(words, volatile=True).to(tl.float32, bitcast=True)
        elif MEET == MEET_ALL:
            amax = tl.atomic_max(words, tl.zeros((BLOCK_N,), tl.int32), sem="acquire").to(tl.float32, bitcast=True)
        else:
            amax = chunk_amax
        scale = _slice_scale(amax[None, :], BLOCK_N)
        _store_scaled(q_ptr, None, x, k0, n0, N, KT, scale, CHUNK, BLOCK_N, 0)


@triton.jit
def _chunk_at(t, SLICES, SLICE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """(item, k0, n0) of ticket t: chunk t % CHUNKS of item t // CHUNKS, item i = (slice i % SLICES, column block
    i // SLICES), its tile x[k0:k0+CHUNK, n0:n0+BLOCK_N]."""
    CHUNKS: tl.constexpr = SLICE // CHUNK
    item = t // CHUNKS
    return item, (item % SLICES) * SLICE + (t % CHUNKS) * CHUNK, (item // SLICES) * BLOCK_N


@triton.jit
def _count_ptr(ws_ptr, item, PAD: tl.constexpr):
    """Item's arrival count in the workspace (after the two tickets, counters PAD words apart)."""
    return ws_ptr + 2 * PAD + item * PAD


@triton.jit
def _amax_words(ws_ptr, item, items, BLOCK_N: tl.constexpr, PAD: tl.constexpr):
    """Item's BLOCK_N amax words in the workspace (after the tickets and the ``items`` counts)."""
    return ws_ptr + 2 * PAD + items * PAD + item * BLOCK_N + tl.arange(0, BLOCK_N)


@triton.jit
def _wait_sleeping(count_ptr, chunks, SLEEP: tl.constexpr):
    """fp8moe.kernels._coop.wait_for_slice with a nanosleep of SLEEP ns between polls (PTX, so GPUs only: the
    interpreter never waits)."""
    seen = tl.load(count_ptr, volatile=True)
    while seen < chunks:
        seen = tl.inline_asm_elementwise(
            "nanosleep.u32 $2;\n\tmov.b32 $0, $1;", "=r,r,r", [seen, tl.full((), SLEEP, tl.int32)], dtype=tl.int32,
            is_pure=False, pack=1,
        )  # fmt: skip
        seen = tl.load(count_ptr, volatile=True)


@triton.jit
def _deferred_kernel(
    x_ptr, q_ptr, ws_ptr, KT, N, SLICES, TOTAL,
    SLICE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, DEFER: tl.constexpr,
):  # fmt: skip
    """The meeting deferred: ticket t loads chunk t (if t < TOTAL, the chunks), folds its amax and arrives, holding
    nothing, then casts chunk t - DEFER (if t >= DEFER): it waits for that chunk's slice, reads the chunk again (an
    L2 hit while the DEFER chunks read since still fit there) and stores it. Workspace and items as _coop_kernel's.
    With DEFER >= the chunks per slice every chunk a program waits for has a smaller ticket, so it has started, and
    nothing stands between its start and its arrival: no program can wait for one that has not started, whatever
    the residency (and the interpreter, whose programs run in ticket order, runs the same code in one launch)."""
    CHUNKS: tl.constexpr = SLICE // CHUNK
    items = SLICES * tl.cdiv(N, BLOCK_N)
    t = tl.atomic_add(ws_ptr, 1)
    if t < TOTAL:
        item, k0, n0 = _chunk_at(t, SLICES, SLICE, CHUNK, BLOCK_N)
        _fold_and_arrive(_load_tile(x_ptr, None, k0, n0, N, CHUNK, BLOCK_N, False), ws_ptr, item, items, BLOCK_N, 1)
    if t >= DEFER:
        item, k0, n0 = _chunk_at(t - DEFER, SLICES, SLICE, CHUNK, BLOCK_N)
        words = _amax_words(ws_ptr, item, items, BLOCK_N, 1)
        wait_for_slice(_count_ptr(ws_ptr, item, 1), CHUNKS)
        amax = tl.atomic_max(words, tl.zeros((BLOCK_N,), tl.int32), sem="acquire").to(tl.float32, bitcast=True)
        x = _load_tile(x_ptr, None, k0, n0, N, CHUNK, BLOCK_N, False)
        _store_scaled(q_ptr, None, x, k0, n0, N, KT, _slice_scale(amax[None, :], BLOCK_N), CHUNK, BLOCK_N, 0)


@triton.jit
def _pipelined_kernel(
    x_ptr, q_ptr, ws_ptr, KT, N, SLICES, TOTAL,
    SLICE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, PHASE: tl.constexpr, PAD: tl.constexpr,
):  # fmt: skip
    """The meeting pipelined: a persistent program takes ticket after ticket (the TOTAL chunks in _coop_kernel's
    order and workspace) and holds two chunks. For each new ticket it issues the chunk's load, waits for the slice
    of the chunk it already holds and reads that slice's amax, folds the new chunk's amax and arrives, then casts and
    stores the held chunk, so the load's latency runs under the wait. A new chunk of the slice it waits for is
    folded before the wait (it would otherwise wait for itself). The tickets are relaxed atomics and the stores come
    after the arrival's release, so no fence waits for a store: the fence before an arrival finds the last
    iteration's stores long done.

    Progress: a program holding a chunk unarrived waits only for an earlier slice, so the earliest slice any
    program waits for has every taken chunk arrived, and its untaken chunks go to the next tickets. All programs
    could wait at once only with all of their two chunks each inside that slice: fewer chunks per slice than twice
    the programs that run at once never stall (the probe's points have at most 64, its grids 132 programs or more).
    The interpreter, whose programs run one after another, takes the fold (PHASE_AMAX) and the cast (PHASE_CAST) in
    two launches of the same loop."""
    CHUNKS: tl.constexpr = SLICE // CHUNK
    items = SLICES * tl.cdiv(N, BLOCK_N)
    ticket = ws_ptr + (PAD if PHASE == PHASE_CAST else 0)
    held = tl.atomic_add(ticket, 1, sem="relaxed")
    x_held = _ticket_chunk(x_ptr, held, SLICES, N, SLICE, CHUNK, BLOCK_N)
    if (PHASE != PHASE_CAST) & (held < TOTAL):
        _fold_and_arrive(x_held, ws_ptr, held // CHUNKS, items, BLOCK_N, PAD)
    while held < TOTAL:
        new = tl.atomic_add(ticket, 1, sem="relaxed")
        x_new = _ticket_chunk(x_ptr, new, SLICES, N, SLICE, CHUNK, BLOCK_N)
        same_slice = new // CHUNKS == held // CHUNKS
        if (PHASE != PHASE_CAST) & same_slice & (new < TOTAL):
            _fold_and_arrive(x_new, ws_ptr, new // CHUNKS, items, BLOCK_N, PAD)
        item, k0, n0 = _chunk_at(held, SLICES, SLICE, CHUNK, BLOCK_N)
        if PHASE == PHASE_FUSED:
            wait_for_slice(_count_ptr(ws_ptr, item, PAD), CHUNKS)
        if PHASE != PHASE_AMAX:
            words = _amax_words(ws_ptr, item, items, BLOCK_N, PAD)
            amax = tl.atomic_max(words, tl.zeros((BLOCK_N,), tl.int32), sem="acquire").to(tl.float32, bitcast=True)
        if (PHASE != PHASE_CAST) & (not same_slice) & (new < TOTAL):
            _fold_and_arrive(x_new, ws_ptr, new // CHUNKS, items, BLOCK_N, PAD)
        if PHASE != PHASE_AMAX:
            _store_scaled(q_ptr, None, x_held, k0, n0, N, KT, _slice_scale(amax[None, :], BLOCK_N), CHUNK, BLOCK_N, 0)
        held = new
        x_held = x_new


@triton.jit
def _ticket_chunk(x_ptr, t, SLICES, N, SLICE: tl.constexpr, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """The chunk of ticket t (CHUNK, BLOCK_N), zeros where t is past the TOTAL chunks: its column block then lies
    past N (items run slices fastest), so the columns' mask is the tickets' too."""
    _, k0, n0 = _chunk_at(t, SLICES, SLICE, CHUNK, BLOCK_N)
    ks = k0 + tl.arange(0, CHUNK)
    ns = n0 + tl.arange(0, BLOCK_N)
    return tl.load(x_ptr + ks[:, None] * N + ns[None, :], mask=(ns < N)[None, :], other=0.0)


@triton.jit
def _fold_and_arrive(x, ws_ptr, item, items, BLOCK_N: tl.constexpr, PAD: tl.constexpr):
    """Fold chunk x's column amax into item's words and arrive on its count (_coop_kernel's workspace)."""
    words = _amax_words(ws_ptr, item, items, BLOCK_N, PAD)
    tl.atomic_max(words, tl.max(tl.abs(x.to(tl.float32)), 0).to(tl.int32, bitcast=True), sem="relaxed")
    arrive(_count_ptr(ws_ptr, item, PAD))


#: How a chunk's programs meet (the kernel's MEET): not at all (each chunk casts with its own amax), by folding and
#: arriving without waiting (the same), or in full (fold, arrive, wait, read the slice's amax back).
MEET_NONE, MEET_ARRIVE, MEET_ALL = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)
#: ``/pad``: each count on its own 128-byte line of PAD_WORDS words.
PAD_WORDS = 32


@dataclass(frozen=True)
class Variant:
    """A coop variant: its tile (CHUNK x BLOCK_N, warps) and how its chunks meet (the kernels' constexprs): a ticket
    or the program id, the meeting in full or a partial rung, the amax read back by atomics or loads, the counters
    ``pad`` words apart, ``sleep`` ns between polls, the meeting deferred by ``defer`` chunks (0: not deferred), or
    pipelined by a persistent grid of ``pipe`` programs per SM (0: one program per chunk)."""

    chunk: int
    block_n: int
    warps: int
    ticket: bool = True
    meet: int = MEET_ALL
    load_back: bool = False
    pad: int = 1
    sleep: int = 0
    defer: int = 0
    pipe: int = 0


#: Suffixes that set one field: the program id for a ticket, the two partial meetings, the amax read back by loads,
#: the counters a line apart.
SUFFIXES = {
    "pid": {"ticket": False},
    "arrive": {"meet": MEET_ARRIVE},
    "local": {"meet": MEET_NONE},
    "ld": {"load_back": True},
    "pad": {"pad": PAD_WORDS},
}
#: Suffixes with a number: ``/sleep<N>`` (ns between polls); ``/defer<D>``, alone (_deferred_kernel); ``/pipe<P>``,
#: alone or with /pad (_pipelined_kernel).
NUMBERED = {"sleep": "sleep", "defer": "defer", "pipe": "pipe"}


def parse_variant(variant: str) -> Variant:
    """The Variant of ``coop<CHUNK>x<BLOCK_N>/w<W>[/pid][/arrive|/local][/ld][/pad][/sleep<N>]``,
    ``coop<CHUNK>x<BLOCK_N>/w<W>/defer<D>`` or ``coop<CHUNK>x<BLOCK_N>/w<W>[/pad]/pipe<P>``.

    Raises:
        ValueError: an unknown suffix, /defer<D> beside another, or /pipe<P> beside one other than /pad.
    """
    tile, warps, *suffixes = variant.removeprefix("coop").split("/")
    chunk, block_n = (int(v) for v in tile.split("x"))
    fields: dict[str, object] = {}
    for suffix in suffixes:
        name = suffix.rstrip("0123456789")
        if suffix in SUFFIXES:
            fields.update(SUFFIXES[suffix])
        elif name in NUMBERED and suffix != name and _fits_beside(name, suffixes):
            fields[NUMBERED[name]] = int(suffix.removeprefix(name))
        else:
            known = ", ".join([*SUFFIXES, *(f"{n}<N>" for n in NUMBERED)])
            alone = "/defer<D> stands alone, /pipe<P> beside /pad only"
            raise ValueError(f"{variant}: unknown suffix /{suffix} ({alone}); known: {known}")
    return Variant(chunk, block_n, int(warps.removeprefix("w")), **fields)


def _fits_beside(name: str, suffixes: list[str]) -> bool:
    """Whether numbered suffix ``name`` may stand with the variant's ``suffixes``: /defer<D> alone, /pipe<P> with /pad
    at most (the other rungs are _coop_kernel's), /sleep<N> with any of that kernel's."""
    others = [s for s in suffixes if s.rstrip("0123456789") != name]
    if name == "defer":
        return not others
    if name == "pipe":
        return others in ([], ["pad"])
    return not any(s.rstrip("0123456789") in ("defer", "pipe") for s in others)


def coop_call(variant: str, x: torch.Tensor, slice_len: int):
    """(call, bitwise) of a coop variant on x (KT, N), uniform slices of ``slice_len`` tokens. A variant that casts
    with each chunk's own amax (/arrive, /local) is checked against slices of a chunk's length."""
    v = parse_variant(variant)
    if v.defer:
        return _deferred_call(x, slice_len, v)
    if v.pipe:
        return _pipelined_call(x, slice_len, v)
    kt, n = x.shape
    slices, chunks = kt // slice_len, slice_len // v.chunk
    items = slices * triton.cdiv(n, v.block_n)
    backend = backend_for(x.device.type)
    if chunks > coop_limit(backend, x.device) and backend.kind != "interpreter":
        raise ValueError(f"{chunks} chunks per slice: more than the {coop_limit(backend, x.device)} that may wait")
    q, ws = _buffers(x, items, v.block_n, v.pad)
    phases = [PHASE_AMAX, PHASE_CAST] if backend.kind == "interpreter" else [PHASE_FUSED]

    def call():
        ws.zero_()
        for phase in phases:
            _coop_kernel[(items * chunks,)](
                x, q, ws, kt, n, slices, SLICE=slice_len, CHUNK=v.chunk, BLOCK_N=v.block_n, PHASE=phase,
                TICKET=v.ticket or phase == PHASE_CAST, MEET=v.meet, LOAD_BACK=v.load_back, PAD=v.pad, SLEEP=v.sleep,
                num_warps=v.warps,
            )  # fmt: skip

    return _checked(call, q, x, slice_len if v.meet == MEET_ALL else v.chunk)


def _buffers(x: torch.Tensor, items: int, block_n: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q (N, KT) e4m3fn for x (KT, N), and the kernels' workspace (zeroed by each call): two tickets and a count per
    item, ``pad`` words apart, then ``block_n`` amax words per item."""
    kt, n = x.shape
    q = torch.empty((n, kt), dtype=torch.float8_e4m3fn, device=x.device)
    return q, torch.empty((2 * pad + items * pad + items * block_n,), dtype=torch.int32, device=x.device)


def _checked(call, q: torch.Tensor, x: torch.Tensor, slice_len: int):
    """(call, bitwise): q poisoned, ``call`` run once, then its bytes against transpose_ceiling.expected at
    ``slice_len``."""
    q.view(torch.uint8).fill_(0xAA)
    call()
    return call, torch.equal(q.view(torch.uint8), expected(x, slice_len, "ptr").view(torch.uint8))


def _deferred_call(x: torch.Tensor, slice_len: int, v: Variant):
    """(call, bitwise) of the deferred meeting (_deferred_kernel) on x (KT, N): one launch of chunks + ``v.defer``
    programs, on a GPU and in the interpreter alike."""
    chunk, block_n, warps, defer = v.chunk, v.block_n, v.warps, v.defer
    kt, n = x.shape
    slices, chunks = kt // slice_len, slice_len // chunk
    if defer < chunks:
        raise ValueError(f"/defer{defer}: less than the {chunks} chunks per slice, a chunk could wait for a later one")
    items = slices * triton.cdiv(n, block_n)
    q, ws = _buffers(x, items, block_n, 1)

    def call():
        ws.zero_()
        _deferred_kernel[(items * chunks + defer,)](
            x, q, ws, kt, n, slices, items * chunks, SLICE=slice_len, CHUNK=chunk, BLOCK_N=block_n, DEFER=defer,
            num_warps=warps,
        )  # fmt: skip

    return _checked(call, q, x, slice_len)


def _pipelined_call(x: torch.Tensor, slice_len: int, v: Variant):
    """(call, bitwise) of the pipelined meeting (_pipelined_kernel) on x (KT, N): a persistent grid of ``v.pipe``
    programs per SM (per one "SM" in the interpreter, which runs the fold and the cast as two launches)."""
    kt, n = x.shape
    slices, chunks = kt // slice_len, slice_len // v.chunk
    items = slices * triton.cdiv(n, v.block_n)
    backend = backend_for(x.device.type)
    interpreted = backend.kind == "interpreter"
    programs = min(items * chunks, v.pipe * (1 if interpreted else device_multiprocessors(x.device)))
    if not interpreted and chunks >= 2 * programs:
        raise ValueError(f"{chunks} chunks per slice: not fewer than twice the grid's {programs} programs")
    q, ws = _buffers(x, items, v.block_n, v.pad)
    phases = [PHASE_AMAX, PHASE_CAST] if interpreted else [PHASE_FUSED]

    def call():
        ws.zero_()
        for phase in phases:
            _pipelined_kernel[(programs,)](
                x, q, ws, kt, n, slices, items * chunks, SLICE=slice_len, CHUNK=v.chunk, BLOCK_N=v.block_n,
                PHASE=phase, PAD=v.pad, num_warps=v.warps,
            )  # fmt: skip

    return _checked(call, q, x, slice_len)


def op_call(x: torch.Tensor, slice_len: int):
    """(call, bitwise) of fp8moe's per-group colwise op on x with uniform groups of ``slice_len`` tokens."""
    from fp8ref import ops as ref

    offs = torch.arange(slice_len, x.shape[0] + 1, slice_len, dtype=torch.int32, device=x.device)
    q_ref, s_ref = ref.per_group_colwise_scales(x, offs, torch.float8_e4m3fn, False)
    q, s = fp8moe.ops.per_group_colwise_scales(x, offs)
    same = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)
    return (lambda: fp8moe.ops.per_group_colwise_scales(x, offs)), same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the Markdown table here")
    parser.add_argument("--points", default="65536x4096/4096,131072x5120/8192,16384x5120/2048",
                        help="KTxN/slice, comma-separated")  # fmt: skip
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    from probe_timing import table_head, time_variants, write_table

    from fp8moe.bench import copy_bandwidth_gbps

    bw = copy_bandwidth_gbps()
    variants = args.variants.split(",")
    lines = table_head("coop slices", bw, "", variants[0])
    gen = torch.Generator(device="cuda").manual_seed(0)
    status = 0
    for point in args.points.split(","):
        shape, slice_len = point.split("/")
        kt, n = (int(v) for v in shape.split("x"))
        x = torch.randn(kt, n, device="cuda", generator=gen).to(torch.bfloat16)

        def prepare(variant, x=x, slice_len=int(slice_len)):
            return op_call(x, slice_len) if variant == "op" else coop_call(variant, x, slice_len)

        status |= time_variants(lines, point, variants, prepare, 3 * kt * n, bw)
        del x
        torch.cuda.empty_cache()
    write_table(lines, args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
