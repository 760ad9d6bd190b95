"""Where fp8moe's one-read per-group path loses to the stripped ceiling kernel: a ladder of variants between them.

    python benchmarks/probe_one_read_gap.py --out results.md      # on a CUDA GPU; a Markdown table

Why: one tile of 128 tokens x 64 columns per 128-token group, 4 warps, read once and held in registers, ran 29.1 us
(82% of copy bandwidth) at 16640 x 2048 and 68.0 us (88%) at 16640 x 5120 in the stripped kernel of
benchmarks/transpose_ceiling.py (benchmarks/results/h200-s10-ceiling-one-tile.md), and 38.8 us and 89.8 us in
fp8moe's one-read path with the same tile and byte stores (h200-s10-resident-probe.md): 1.32-1.34x slower for the
same bytes and the same tile. The variants below change one thing at a time, from the ceiling to the op; the first
run (h200-s21-call1-one-read-gap.md, before ``op_half_loop`` existed) put the op at 1.48-1.50x the ceiling, three
factors of 1.09-1.18x each: fp8ref's semantics in the span code, the bounds loaded from offs, and the two-pass loop
compiled beside the one-read path:

- ``ceiling``: transpose_ceiling's one-tile kernel (``ptr`` mode): f32 |x| max, 448 / amax, a plain cast; the
  slice bounds are arithmetic; consecutive programs take consecutive slices of one column block.
- ``ceiling_columns_fastest``: the same kernel with consecutive programs on consecutive column blocks of one slice,
  the order fp8moe's per-group grid has by default (fp8moe.kernels._per_group.jagged_grid).
- ``one_read_fixed_bounds`` / ``/g``: fp8moe's one-read span code (fp8moe.kernels._span.quantize_span with ONE_PASS:
  fp8ref's NaN-keeping amax, scale and cast, masks, the edge chunks' code) compiled alone, group bounds arithmetic;
  ``/g``: groups fastest in the grid, the ceiling's order.
- ``one_read_no_edges``: bounds loaded from offs, as the op does, but without the code of the partial edge
  chunks (timing only: right for 16-aligned groups alone, as here), so that this step splits into the dependent
  load of the bounds and the edge code the compiler can no longer prove dead.
- ``one_read_edge_loop``: as ``one_read`` below, with the edge chunks taken one at a time in a run-time loop
  (fp8moe's EDGE_LOOP): the edge code in the binary, at the registers of ``one_read_no_edges`` (sm_90, triton 3.6:
  96 against 123 at 128-token groups, 159 against 206 at 256; benchmarks/results/cpu-sm90-registers-s22.md).
- ``one_read`` / ``/g``: fp8moe's one-read span code with each program's bounds loaded from offs, as the op does.
- ``op`` / ``/g``: per_group_colwise_scales itself with its 64x128/w4 config forced: the one-read path beside the
  two-pass loop in one compiled kernel, the offs clamps, the int64 guard.
- ``op_half_loop`` / ``/g``: the op with the one-read tile as above and the two-pass loop in tiles of half its
  width (ONE_READ_K = the group, BLOCK_K = half of it; fp8moe.kernels._span.quantize_group_span), which holds fewer
  registers than the 64x128/w4 loop beside it (sm_90, triton 3.6: 124 against 166 registers).

Every variant is checked before it is timed: the ceiling ones against transpose_ceiling.expected, the others bitwise
against fp8ref.ops.per_group_colwise_scales (codes and scales). Times are CUDA-graph medians; % of copy is ideal bytes
(bf16 read once, fp8 written once, the scales) over the copy bandwidth timed in the same run; ``x ceiling`` is the
variant's time over the ceiling's at the same shape.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on first)

# isort: split
import triton
import triton.language as tl
from probe_timing import uniform_offs  # noqa: F401  (tests build the probe's offs with it)

from fp8moe import configs, replay
from fp8moe.backend import backend_for
from fp8moe.kernels import per_group_colwise_scales
from fp8moe.kernels._common import fp8_constexprs
from fp8moe.kernels._per_group import jagged_grid, jagged_program
from fp8moe.kernels._span import _quantize_one_tile, _span_edges, quantize_span
from fp8ref import ops as ref
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the sibling script the ceiling variants run (transpose_ceiling)
    sys.path.insert(0, _HERE)

E4 = torch.float8_e4m3fn
VARIANTS = (
    "ceiling",
    "ceiling_columns_fastest",
    "one_read_fixed_bounds",
    "one_read_fixed_bounds/g",
    "one_read_no_edges",
    "one_read_edge_loop",
    "one_read",
    "one_read/g",
    "op",
    "op/g",
    "op_half_loop",
    "op_half_loop/g",
)


@triton.jit
def _one_read_kernel(
    x_ptr, q_ptr, scales_ptr, offs_ptr, R, G, stride_xr, stride_xk, stride_qr,
    SLICE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, GROUPS_FASTEST: tl.constexpr,
    FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr, MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr, EDGES: tl.constexpr = True, EDGE_LOOP: tl.constexpr = False,
):  # fmt: skip
    """fp8moe's one-read span path alone on the (R, Ktot) view: group pid_g is [g * SLICE, (g + 1) * SLICE) when
    SLICE > 0, else [offs[g - 1], offs[g]) loaded; every group's interior must fit BLOCK_K (the caller's uniform
    groups). Scales at s[g * R + r], as the op stores them. EDGES=False leaves out the code of the partial 16-column
    edge chunks (right only for 16-aligned groups); EDGE_LOOP takes them one at a time (fp8moe's EDGE_LOOP)."""
    pid_r, pid_g = jagged_program(G, GROUPS_FASTEST)
    if SLICE > 0:
        start = pid_g * SLICE
        end = start + SLICE
    else:
        start = tl.load(offs_ptr + pid_g - 1, mask=pid_g > 0, other=0)
        end = tl.load(offs_ptr + pid_g)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    x_rows = x_ptr + rows[:, None] * stride_xr
    q_rows = q_ptr + rows[:, None] * stride_qr
    if EDGES:
        scale = quantize_span(
            x_rows, q_rows, row_mask, start, end, stride_xk, BLOCK_R, BLOCK_K, True, 1, False, FP8_DTYPE, FP8_MAX,
            MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE, EDGE_LOOP,
        )  # fmt: skip
    else:
        inner_lo, inner_hi, _, _, _, _ = _span_edges(start, end)
        scale = _quantize_one_tile(
            x_rows, q_rows, row_mask, inner_lo, inner_hi, tl.zeros((BLOCK_R,), dtype=tl.float32), stride_xk,
            BLOCK_K, False, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, ROUND_POW2, CAST_MODE,
        )  # fmt: skip
    tl.store(scales_ptr + pid_g * R + rows, scale, mask=row_mask)


@contextlib.contextmanager
def forced_span_config(config: triton.Config):
    """Every per-group span launch inside the block takes ``config`` (no autotuning, the span kernel)."""
    fixed, min_elements = configs.KernelConfigs.fixed, configs.AUTOTUNE_MIN_ELEMENTS
    kernels = dict(configs.PER_GROUP_KERNEL)

    def forced(self, backend, args):
        return config if self.name == configs.PER_GROUP.name else fixed(self, backend, args)

    configs.KernelConfigs.fixed = forced
    configs.AUTOTUNE_MIN_ELEMENTS = float("inf")
    configs.PER_GROUP_KERNEL.update(dict.fromkeys(kernels, "span"))
    replay.forget()  # a launch plan replays the config it recorded
    try:
        yield
    finally:
        configs.KernelConfigs.fixed, configs.AUTOTUNE_MIN_ELEMENTS = fixed, min_elements
        configs.PER_GROUP_KERNEL.update(kernels)
        replay.forget()


def variant_call(
    variant: str, x: torch.Tensor, offs: torch.Tensor, slice_len: int, block_r: int, warps: int,
    expected: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[Callable[[], object], Callable[[], bool]]:  # fmt: skip
    """(call, check) of one variant on x (Ktot, N) row-major, uniform groups of ``slice_len`` tokens (offs): call
    launches it once; check runs it on poisoned outputs and says whether every byte is the one it must write. The
    tile is ``slice_len`` tokens x ``block_r`` columns. ``expected``: fp8ref's (q, scales) for x and offs, computed
    here when None."""
    import transpose_ceiling

    ktot, n = x.shape
    groups = offs.numel()
    backend = backend_for(x.device.type)
    if variant.startswith("ceiling"):
        q = torch.empty((n, ktot), dtype=E4, device=x.device)
        columns_fastest = variant == "ceiling_columns_fastest"
        slices, column_blocks = ktot // slice_len, n // block_r
        grid = (column_blocks, slices) if columns_fastest else (slices, column_blocks)

        def call():
            transpose_ceiling._cast_t_kernel[grid](
                x, q, None, None, ktot, n, SLICE=slice_len, BLOCK_K=slice_len, BLOCK_N=block_r,
                MODE=transpose_ceiling.MODES["ptr"], COLUMNS_FASTEST=columns_fastest, num_warps=warps,
            )  # fmt: skip

        def check():
            q.view(torch.uint8).fill_(0xAA)
            call()
            expected = transpose_ceiling.expected(x, slice_len, "ptr")
            return torch.equal(q.view(torch.uint8), expected.view(torch.uint8))

        return call, check

    groups_fastest = variant.endswith("/g")
    q_ref, s_ref = expected if expected is not None else ref.per_group_colwise_scales(x, offs, E4, False)
    if variant.startswith("op"):
        blocks = {"BLOCK_R": block_r, "BLOCK_K": slice_len}
        if variant.startswith("op_half_loop"):
            blocks = {"BLOCK_R": block_r, "BLOCK_K": slice_len // 2, "ONE_READ_K": slice_len}
        config = triton.Config({**blocks, **({"GROUPS_FASTEST": True} if groups_fastest else {})}, num_warps=warps)

        def launch():
            with forced_span_config(config):
                return per_group_colwise_scales.launch(x, offs, E4, False, backend)

        launch()  # compiled outside the timed graph

        def call():
            return launch()

        def check():
            with poisoned_allocations(POISON_BYTES[0]):  # fresh outputs: no earlier run's bytes can pass for its own
                q, s = launch()
            return _same(q, s, q_ref, s_ref)

        return call, check

    q_t = torch.empty((n, ktot), dtype=E4, device=x.device)
    s = torch.empty((groups * n,), dtype=torch.float32, device=x.device)
    fixed_bounds = variant.startswith("one_read_fixed_bounds")
    edges = not variant.startswith("one_read_no_edges")
    edge_loop = variant.startswith("one_read_edge_loop")

    def call():
        _one_read_kernel[jagged_grid(triton.cdiv(n, block_r), groups, groups_fastest)](
            x, q_t, s, offs, n, groups, x.stride(1), x.stride(0), q_t.stride(0),
            SLICE=slice_len if fixed_bounds else 0, BLOCK_R=block_r, BLOCK_K=slice_len, GROUPS_FASTEST=groups_fastest,
            EDGES=edges, EDGE_LOOP=edge_loop,
            **fp8_constexprs(E4, False, backend.cast_mode), num_warps=warps,
        )  # fmt: skip

    def check():
        q_t.view(torch.uint8).fill_(0xAA)
        s.view(torch.int32).fill_(-1)
        call()
        return _same(q_t.t(), s, q_ref, s_ref)

    return call, check


def checked_call(variant: str, *args) -> tuple[Callable[[], object], bool]:
    """(call, bitwise) of :func:`variant_call`'s variant, checked (probe_timing.check_and_time's ``prepare``)."""
    call, check = variant_call(variant, *args)
    return call, check()


def _same(q: torch.Tensor, s: torch.Tensor, q_ref: torch.Tensor, s_ref: torch.Tensor) -> bool:
    """Codes and scales bit for bit (the groups cover Ktot, so every code belongs to one)."""
    return torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(
        s.view(torch.int32), s_ref.view(torch.int32)
    )


def main(argv: list[str] | None = None) -> int:
    from probe_timing import uniform_group_probe

    def prepare(x, offs, group, block_r, warps):
        expected = ref.per_group_colwise_scales(x, offs, E4, False)  # once per shape, on the GPU
        return lambda variant: checked_call(variant, x, offs, group, block_r, warps, expected)

    shapes = "16640x2048,16640x5120"
    return uniform_group_probe(argv, __doc__, "one-read gap", VARIANTS, shapes, prepare, scale_bytes=True)


if __name__ == "__main__":
    sys.exit(main())
