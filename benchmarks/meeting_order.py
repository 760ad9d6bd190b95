"""How the programs of a cooperative launch meet, read from its compiled text (TTGIR or PTX), in order.

The cooperative kernels (fp8moe.kernels._coop_slices, _group_tiles, _group_chunks) split a slice over programs that
fold partial amaxes into workspace words, arrive at a count and wait for the slice's other programs, then read the
folded amax. One thread of a program makes the arrival, so a barrier must lie between every warp's fold and it
(fp8moe.kernels._coop.arrive); the slice kernel had none until session 48, and Triton 3.6, the GPU's, added none of
its own. benchmarks/sass_counts.py --meetings applies this to each kernel compiled for sm_90; here the reading
alone, so that tests can check it on text of their own (tests/test_kernel_instructions.py).
"""

from __future__ import annotations

import re

#: How the programs of a cooperative launch meet, as (TTGIR, PTX) patterns: a fold of a partial amax (an atomic max
#: that does not acquire), a barrier of the program's threads, an arrival (an atomic add that releases), a poll of
#: the count (a volatile load, or an acquire load written as inline PTX: benchmarks/arrival_forms.py's
#: "poll-acquire" form) and a read of the folded amax (an atomic max that acquires).
_MEETING_PATTERNS = {
    "fold": (
        r"tt\.atomic_rmw max, (relaxed|release|acq_rel)",
        r"(red|atom)\.global\.gpu\.(relaxed|release|acq_rel)\.max",
    ),
    "barrier": (r"(gpu|ttg)\.barrier", r"bar\.sync"),  # triton 3.6 writes gpu.barrier, 3.9 ttg.barrier all
    "arrival": (r"tt\.atomic_rmw add, release", r"(red|atom)\.global\.gpu\.release\.add"),
    "acquiring poll": (r"elementwise_inline_asm .*ld\.acquire\.gpu", r"ld\.acquire\.gpu\.global"),
    "poll": (r"tt\.load .*isVolatile = true", r"ld\.volatile\.global"),
    "read": (r"tt\.atomic_rmw max, acquire", r"atom\.global\.gpu\.acquire\.max"),
}


def meeting_order(text: str, level: int) -> dict:
    """The meeting of a cooperative kernel's programs in ``text``, its TTGIR (``level`` 0) or PTX (1), read in order:
    its arrivals, and how many of them have a barrier after the last fold before them (so that the release of the
    one thread that arrives covers every warp's fold: fp8moe.kernels._coop.arrive); its reads of the folded amax
    after a poll, how many have a barrier after the last poll before them, and how many follow a poll that acquires
    (the order the PTX memory model makes formal: the acquire reads the count the arrivals released). In the TTGIR
    a barrier is one the kernel asks for (tl.debug_barrier); the PTX has the barriers Triton adds of its own too."""
    patterns = {kind: re.compile(pair[level]) for kind, pair in _MEETING_PATTERNS.items()}
    counts = dict.fromkeys(
        ("arrivals", "arrivals_after_barrier", "reads_after_poll", "reads_after_poll_barrier", "reads_after_acquire"),
        0,
    )
    # since the last fold / poll: None before the first, False until a barrier comes, True after one
    since_fold = since_poll = None
    poll_acquired = False  # whether the last poll acquired
    for line in text.splitlines():
        kind = next((k for k, pattern in patterns.items() if pattern.search(line)), None)
        if kind == "fold":
            since_fold = False
        elif kind in ("poll", "acquiring poll"):
            since_poll = False
            poll_acquired = kind == "acquiring poll"
        elif kind == "barrier":
            since_fold = None if since_fold is None else True
            since_poll = None if since_poll is None else True
        elif kind == "arrival":
            counts["arrivals"] += 1
            counts["arrivals_after_barrier"] += since_fold is not False
        elif kind == "read" and since_poll is not None:
            counts["reads_after_poll"] += 1
            counts["reads_after_poll_barrier"] += since_poll is True
            counts["reads_after_acquire"] += poll_acquired
    return counts
