"""The forms of the cooperative slice kernel's meeting that benchmarks/probe_coop_race.py races and
benchmarks/sass_counts.py compiles (``--wait-form``): each a replacement for fp8moe.kernels._coop_slices' ``arrive``
or ``wait_for_slice``, set before anything compiles (Triton keys a kernel's compiled code on the helpers it calls).

- "barrier": the kernel as it ships (fp8moe.kernels._coop: a barrier, then the release arrival; volatile polls).
- "no-barrier": the release arrival alone, the code before session 48.
- "acquire": one acquire atomic on the count after the wait (thread 0's): the order the PTX memory model makes
  formal (SPEC §10.2, "Arrival order"), at the cost of an atomic per program.
- "poll-acquire" (session 50): every poll of the count an acquire load (ld.acquire.gpu, inline PTX: tl.load has no
  acquire) instead of a volatile one, so the poll that sees the count complete is itself the acquire of what the
  arrivals released, with no instruction added. CUDA only: the interpreter runs no inline PTX.

This module imports Triton and fp8moe.kernels._coop only, not fp8moe's __init__ (which turns the interpreter on
where there is no GPU), so the compile-only scripts can use it.
"""

from __future__ import annotations

import triton
import triton.language as tl

from fp8moe.kernels._coop import wait_for_slice

FORMS = ("no-barrier", "barrier", "acquire", "poll-acquire")
#: The forms only a CUDA GPU compiles (inline PTX).
CUDA_ONLY_FORMS = ("poll-acquire",)


@triton.jit
def _arrival_alone(count_ptr):
    """fp8moe.kernels._coop.arrive without its barrier: the slice kernel's arrival before session 48."""
    tl.atomic_add(count_ptr, 1, sem="release")


@triton.jit
def _wait_then_acquire(count_ptr, chunks):
    """fp8moe.kernels._coop.wait_for_slice, then one acquire atomic on the count (thread 0's, the barrier after the
    wait passing its order on): the "acquire" form."""
    wait_for_slice(count_ptr, chunks)
    tl.atomic_max(count_ptr, 0, sem="acquire")


@triton.jit
def _acquire_load(ptr):
    """The i32 at ``ptr`` by an acquire load at GPU scope (ld.acquire.gpu)."""
    return tl.inline_asm_elementwise(
        "ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _wait_polling_acquire(count_ptr, chunks):
    """fp8moe.kernels._coop.wait_for_slice with every poll an acquire load: the "poll-acquire" form."""
    seen = _acquire_load(count_ptr)
    while seen < chunks:
        seen = _acquire_load(count_ptr)


def apply(form: str) -> None:
    """Put ``form``'s helpers into fp8moe.kernels._coop_slices (before any of its kernels compiles); ValueError for
    a form this module does not know."""
    from fp8moe.kernels import _coop_slices

    if form not in FORMS:
        raise ValueError(f"unknown arrival form {form!r}: choose from {FORMS}")
    if form == "no-barrier":
        _coop_slices.arrive = _arrival_alone
    elif form == "acquire":
        _coop_slices.wait_for_slice = _wait_then_acquire
    elif form == "poll-acquire":
        _coop_slices.wait_for_slice = _wait_polling_acquire
