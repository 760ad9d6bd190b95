"""Is the one-read kernels' fixed time per launch in their first and last waves? Half-width tiles there, a probe.

    python benchmarks/probe_ramp_waves.py --out results.md      # on a CUDA GPU; a Markdown table

Why: fitted over four widths on an H100 (benchmarks/results/h100-s35-ceiling-widths.md), the stripped kernels that
stream a tile (load, cast, store, no reduction) take no fixed time per launch (-1.2 to 1.1 us), while the same
tiles read once, reduced to an amax and only then cast and stored take 3.3-3.4 us, transposing or not; on the H200
the one-read ceiling takes 4.8 us (h200-s27-call3-one_read_gap_256.log), 16% of its time at 16640 x 2048. A
program that must hold its whole tile before its first store keeps its loads and its stores apart; in the first
wave every program does so at once, and in the last wave each SM's last program runs alone. Smaller tiles take less
(h100-s35-gap128-*.md: 0.9-1.8 us at 8-16 KB per tile) but move fewer bytes per unit time in between. Here the
first and last H tiles of the grid are split into two half-width tiles each, the rest keep the full width:

- ``head<k>``: H = k programs per SM (0: the plain one-read ceiling, the baseline);
- every variant reads each group's slice once (the stripped ceiling's math: 448 / amax by ``div_rn``, a
  saturating cast, the transposed pointer store), uniform groups of ``--group`` tokens, consecutive programs on
  consecutive groups of one column block (the ceiling's order).

Each variant's codes are checked against transpose_ceiling.expected (every byte) before it is timed; times are
CUDA-graph medians; % of copy is ideal bytes (2 read + 1 written per element) over the copy bandwidth timed in the
same run.

First run (session 35, an H100, benchmarks/results/h100-s35-ramp-waves-{128,256}.md, all bitwise): ``head1`` took
0.7-0.8 us off every width at 256-token groups (0.96-0.99x) and 0.3-0.4 us at 128 (0.98-1.00x); more split
programs gave that back (``head2``-``head4`` 0.99-1.09x). So about a quarter of the 3.4 us is in the waves at the
ends. Not taken into the kernels.
"""

from __future__ import annotations

import sys
from functools import partial

import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on first)

# isort: split
import triton
import triton.language as tl
from transpose_ceiling import _load_tile, _slice_scale, _store_scaled, expected

from fp8moe.kernels._coop import device_multiprocessors

#: The variants main times by default (the first is every row's baseline).
VARIANTS = ("head0", "head1", "head2", "head3", "head4")


@triton.jit
def _one_read_tile(x_ptr, q_ptr, k0, n0, N, KT, GROUP: tl.constexpr, WIDTH: tl.constexpr):
    """Slice [k0, k0 + GROUP) x columns [n0, n0 + WIDTH): read once, 448 / amax per column, cast, stored as q^T."""
    x = _load_tile(x_ptr, None, k0, n0, N, GROUP, WIDTH, False)
    scale = _slice_scale(tl.abs(x.to(tl.float32)), WIDTH)
    _store_scaled(q_ptr, None, x, k0, n0, N, KT, scale, GROUP, WIDTH, 0)


@triton.jit
def _ramp_kernel(x_ptr, q_ptr, KT, N, SLICES, TILES, HEAD, GROUP: tl.constexpr, BLOCK_N: tl.constexpr):
    """Tile t (slice t % SLICES, column block t // SLICES) of TILES; the first and last HEAD tiles each taken by two
    programs of half its width, the others by one: program p < 2 HEAD takes half p % 2 of tile p // 2, p >= TILES
    half of tile TILES - HEAD + (p - TILES) // 2, and the others tile p - HEAD."""
    pid = tl.program_id(0)
    half = -1
    t = pid - HEAD
    if pid < 2 * HEAD:
        t = pid // 2
        half = pid % 2
    elif pid >= TILES:
        t = TILES - HEAD + (pid - TILES) // 2
        half = (pid - TILES) % 2
    k0 = (t % SLICES) * GROUP
    n0 = (t // SLICES) * BLOCK_N
    if half < 0:
        _one_read_tile(x_ptr, q_ptr, k0, n0, N, KT, GROUP, BLOCK_N)
    else:
        _one_read_tile(x_ptr, q_ptr, k0, n0 + half * (BLOCK_N // 2), N, KT, GROUP, BLOCK_N // 2)


def variant_call(variant: str, x: torch.Tensor, group: int, block_n: int, warps: int, sms: int | None = None):
    """(call, bitwise, programs) of ``head<k>``: the first and last k programs per SM of x's GPU (``sms`` where
    given) in half-width tiles."""
    kt, n = x.shape
    slices = kt // group
    tiles = slices * (n // block_n)
    head = min(tiles // 2, int(variant.removeprefix("head")) * (sms or device_multiprocessors(x.device)))
    q = torch.empty((n, kt), dtype=torch.float8_e4m3fn, device=x.device)

    def call():
        _ramp_kernel[(tiles + 2 * head,)](
            x, q, kt, n, slices, tiles, head, GROUP=group, BLOCK_N=block_n, num_warps=warps
        )  # fmt: skip

    q.view(torch.uint8).fill_(0xAA)
    call()
    return call, torch.equal(q.view(torch.uint8), expected(x, group, "ptr").view(torch.uint8)), tiles + 2 * head


def main(argv: list[str] | None = None) -> int:
    from probe_timing import uniform_group_probe

    def prepare(x, offs, group, block_n, warps):
        return partial(variant_call, x=x, group=group, block_n=block_n, warps=warps)

    shapes = "16640x1024,16640x2048,16640x3072,16640x5120"
    return uniform_group_probe(argv, __doc__, "ramp waves", VARIANTS, shapes, prepare, ("programs",))


if __name__ == "__main__":
    sys.exit(main())
