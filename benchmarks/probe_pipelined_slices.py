"""Does a program that walks several groups with the next group's tile loading while it casts the current one lift
the one-read ceiling? A probe of the transposing one-read path's data movement, not of fp8moe's kernel.

    python benchmarks/probe_pipelined_slices.py --out results.md      # on a CUDA GPU; a Markdown table

Why: the one-read per-group path (a group's whole slice of BLOCK_N columns loaded at once, its amax, then the cast
and the transposed store) holds its bytes in flight only while it loads. Each program takes one group, so while it
reduces and stores, the SM's bytes in flight are the other resident programs' (3-4 per SM, their registers the
limit). On an H100 the op's one-read path at 256-token groups runs at the stripped ceiling kernel's time, 86-94% of
copy bandwidth (benchmarks/results/h100-s35-gap256-64_w4-pdl0.md); on the H200, whose copy bandwidth is 1.4x the
H100's for the same SMs, the ceiling itself reaches only 79-83% at 16640 x 2048 and 87-90% at 16640 x 5120
(h200-s27-call3-one_read_gap_256.log), and the op 1.08-1.09x its time. A loop over groups that Triton software
pipelines (``tl.range(..., num_stages=S)``: the next iteration's tile goes through asynchronous copies into shared
memory, no registers held) keeps a program's next load in flight during its own reduction and stores.

Variants, each the stripped one-read math of benchmarks/transpose_ceiling.py (448 / amax by ``div_rn``, a saturating
cast, the transposed pointer store), uniform groups of ``--group`` tokens, tile = the group x ``--tile`` columns:

- ``one``: one tile (a group's slice of the column block) per program, the ceiling's structure;
- ``walk<p>/s<S>``: p programs per SM in all, program i taking tiles i, i + P, ... (P programs; consecutive tiles
  are consecutive column blocks of one group) in a loop of S stages (S = 1: the same loop, not pipelined);
- ``/offs``: the group bounds loaded from offs in the loop (the dependent load the op has), rows past the bound
  masked.

Each variant's codes are checked against transpose_ceiling.expected (every byte) before it is timed; times are
CUDA-graph medians; % of copy is ideal bytes (2 read + 1 written per element) over the copy bandwidth timed in the
same run.

First run (session 35, an H100, benchmarks/results/h100-s35-pipelined-slices-{128,256}.md, all bitwise): pipelined
walks 1.03-2.34x the time of one tile per program, 1.78-3.04x with the bounds from offs; the walk without
pipelining 0.98x at 256-token groups, 1.15-1.18x at 128. Not taken into the kernels.
"""

from __future__ import annotations

import sys
from functools import partial

import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on first)

# isort: split
import triton
import triton.language as tl
from transpose_ceiling import _slice_scale, _store_scaled, expected

from fp8moe.kernels._coop import device_multiprocessors

#: The variants main times by default (the first is every row's baseline).
VARIANTS = (
    "one", "one/offs", "walk2/s1", "walk2/s2", "walk3/s2", "walk4/s2", "walk1/s3", "walk2/s3", "walk2/s2/offs",
    "walk3/s2/offs",
)  # fmt: skip


@triton.jit
def _walk_kernel(
    x_ptr, q_ptr, offs_ptr, KT, N, TILES, COLUMN_BLOCKS,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr, OFFS: tl.constexpr,
):  # fmt: skip
    """Program i of P (the grid): tiles i, i + P, ... of TILES, tile t the slice of group t // COLUMN_BLOCKS (GROUP
    tokens) in column block t % COLUMN_BLOCKS, in a loop of STAGES stages. OFFS: the bounds come from offs (end
    offsets), rows at or past the end masked."""
    for t in tl.range(tl.program_id(0), TILES, tl.num_programs(0), num_stages=STAGES):
        g = t // COLUMN_BLOCKS
        n0 = (t % COLUMN_BLOCKS) * BLOCK_N
        ns = n0 + tl.arange(0, BLOCK_N)
        if OFFS:
            start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
            end = tl.load(offs_ptr + g)
        else:
            start = g * GROUP
            end = start + GROUP
        ks = start + tl.arange(0, GROUP)
        rows = ks < end
        x = tl.load(x_ptr + ks[:, None] * N + ns[None, :], mask=rows[:, None], other=0.0)
        scale = _slice_scale(tl.abs(x.to(tl.float32)), BLOCK_N)
        if OFFS:
            q = (x.to(tl.float32) * scale[None, :]).to(tl.float8e4nv)
            tl.store(q_ptr + ns[:, None] * KT + ks[None, :], tl.trans(q), mask=rows[None, :])
        else:
            _store_scaled(q_ptr, None, x, start, n0, N, KT, scale, GROUP, BLOCK_N, 0)


def variant_call(
    variant: str, x: torch.Tensor, offs: torch.Tensor, group: int, block_n: int, warps: int, sms: int | None = None
):  # fmt: skip
    """(call, bitwise, programs) of one variant: ``one``, ``walk<p>/s<S>``, either with ``/offs``; the walks' grid
    is p programs per SM of x's GPU (``sms`` of them where given)."""
    kt, n = x.shape
    column_blocks = n // block_n
    tiles = column_blocks * offs.numel()
    parts = variant.split("/")
    if parts[0] == "one":
        programs, stages = tiles, 1
    else:
        per_sm = int(parts[0].removeprefix("walk"))
        programs = min(tiles, per_sm * (sms or device_multiprocessors(x.device)))
        stages = int(parts[1].removeprefix("s"))
    q = torch.empty((n, kt), dtype=torch.float8_e4m3fn, device=x.device)

    def call():
        _walk_kernel[(programs,)](
            x, q, offs, kt, n, tiles, column_blocks, GROUP=group, BLOCK_N=block_n, STAGES=stages,
            OFFS="offs" in parts, num_warps=warps,
        )  # fmt: skip

    q.view(torch.uint8).fill_(0xAA)
    call()
    return call, torch.equal(q.view(torch.uint8), expected(x, group, "ptr").view(torch.uint8)), programs


def main(argv: list[str] | None = None) -> int:
    from probe_timing import uniform_group_probe

    def prepare(x, offs, group, block_n, warps):
        return partial(variant_call, x=x, offs=offs, group=group, block_n=block_n, warps=warps)

    shapes = "16640x2048,16640x5120"
    return uniform_group_probe(argv, __doc__, "pipelined slices", VARIANTS, shapes, prepare, ("programs",))


if __name__ == "__main__":
    sys.exit(main())
