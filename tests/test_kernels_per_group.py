"""The per-group (jagged) kernels against fp8ref.ops, bit for bit.

Covers fp8moe/kernels/per_group_rowwise_scales.py, per_group_colwise_scales.py and per_group_colwise_scales_dual.py
through their ``launch`` functions (the validated public wrappers live in fp8moe.ops), each test on both jagged
kernels: the tile kernel (fp8moe.kernels._group_tiles; its own paths are in tests/test_kernels_group_tiles.py) and
the span kernel described next. Runs wherever Triton runs:
the interpreter on the CPU (blocks sized from the problem, fp8moe.configs.interpreter_block: 12 rows take BLOCK_R=8,
a row tail; a jagged length of 150 takes BLOCK_K=128, so groups up to ~113 columns take the one-pass path and the
larger ones ("dominant", "single_group") the two-pass loop with a column tail; groups starting or ending off a
multiple of 16 run the edge stores of fp8moe.kernels._span) and natively on a GPU (hardware cast; fnuz formats
skipped where the backend lacks them).

Elements past offs[-1] belong to no group: the kernels leave them unwritten (fp8ref writes 0x00 there), so byte
comparisons cover only the jagged extent [0, offs[-1]). fp8 codes are compared as bytes and f32 scales as int32 bits,
NaN as a class (any NaN code equals any NaN code).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import triton

import fp8moe  # noqa: F401  (turns the interpreter on when there is no GPU)
from fp8moe import configs, replay
from fp8moe.backend import backend_for
from fp8moe.kernels import (
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
    rowwise_and_per_group_colwise,
)
from fp8moe.kernels._span import pack_k
from fp8ref import ops as ref
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations, unwritten_mask
from fp8ref.formats import all_formats, fmt
from fp8ref.scaling import amax_to_scale
from fp8ref.testing import assert_same_bits

E4 = torch.float8_e4m3fn


@pytest.fixture(autouse=True, params=configs.PER_GROUP_KERNELS)
def per_group_kernel(request, monkeypatch):
    """Every test runs on every jagged kernel (fp8moe.configs.PER_GROUP_KERNEL), whatever the backend's default."""
    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, request.param))
    replay.forget()  # a plan records the kernel of its first call
    yield request.param
    replay.forget()


FP8_DTYPES = [f.dtype for f in all_formats()]
INPUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@dataclass(frozen=True)
class JaggedOp:
    """One single-tensor per-group op: its launcher, its reference and which dim of x is jagged."""

    name: str
    launch: Callable
    reference: Callable
    jagged_dim: int

    def shape(self, rows: int, length: int) -> tuple[int, int]:
        """x's shape for ``rows`` slices jagged over ``length``."""
        return (rows, length) if self.jagged_dim == 1 else (length, rows)


def _pair_per_group_half(x, offs, fp8_dtype, pow2, backend):
    """The per-group half of the fused activation pair (fp8moe.kernels.rowwise_and_per_group_colwise): every
    single-op test runs it as per_group_colwise_scales; its rowwise half is checked against the rowwise reference in
    tests/test_kernels_pairs.py."""
    return rowwise_and_per_group_colwise.launch(x, offs, fp8_dtype, pow2, backend)[2:]


OPS = [
    JaggedOp("per_group_rowwise_scales", per_group_rowwise_scales.launch, ref.per_group_rowwise_scales, 1),
    JaggedOp("per_group_colwise_scales", per_group_colwise_scales.launch, ref.per_group_colwise_scales, 0),
    JaggedOp("pair-per_group_colwise", _pair_per_group_half, ref.per_group_colwise_scales, 0),
]

#: Named offsets (exclusive END offsets) over a jagged length of 150.
LAYOUTS: dict[str, list[int]] = {
    "uniform": [30, 60, 90, 120, 150],
    "uneven": [7, 40, 41, 113, 150],
    "block_edges": [32, 65, 97, 150],  # 16-aligned ends; then an end 1 past 64; then starts 1 past 64 and 96
    "empty_first": [0, 50, 150],
    "empty_middle": [33, 33, 33, 150],
    "empty_last": [70, 150, 150],
    "all_empty": [0, 0, 0],
    "size1": [1, 2, 90, 91, 150],
    "dominant": [2, 145, 147, 150],
    "tail": [20, 64, 100],  # offs[-1] < Ktot: columns 100..149 belong to no group
    "single_group": [150],
    "many_groups": [10, 20, 25, 60, 61, 100, 130, 150],
}
LENGTH = 150
ROWS = 12


def _skip_unless_native(fp8_dtype: torch.dtype, device: str) -> None:
    backend = backend_for(device)
    if fp8_dtype not in backend.fp8_dtypes:
        pytest.skip(f"{fmt(fp8_dtype).name} is not native on {backend.kind}/{backend.arch}")


def _offs(ends: list[int], device: str = "cpu") -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32, device=device)


def _values(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Normal values times 2^[-10, 10] per element: each slice spans ~20 binades, so the scaled values reach fp8
    subnormals and round at every exponent. |x| < 2^13 stays finite in f16 (max 65504)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen) * torch.exp2(torch.randint(-10, 11, shape, generator=gen).float())
    return x.to(dtype)


def _nan_codes(fp8_dtype: torch.dtype) -> torch.Tensor:
    table = torch.zeros(256, dtype=torch.bool)
    table[list(fmt(fp8_dtype).nan_codes)] = True
    return table


def _jagged_bytes(q: torch.Tensor, jagged_dim: int, end: int) -> torch.Tensor:
    """q's bytes over [0, end) of its jagged dim (the elements that belong to a group), on the CPU."""
    return q.cpu().view(torch.uint8).narrow(jagged_dim, 0, end)


def _assert_q_equal(q: torch.Tensor, expected: torch.Tensor, end: int, jagged_dim: int) -> None:
    """Same dtype, shape and strides; same bytes over [0, end) of the jagged dim, NaN codes as a class."""
    assert (q.dtype, q.shape, q.stride()) == (expected.dtype, expected.shape, expected.stride())
    assert_same_bits(q.cpu().narrow(jagged_dim, 0, end), expected.cpu().narrow(jagged_dim, 0, end), what="q")


def _assert_scales_equal(s: torch.Tensor, expected: torch.Tensor) -> None:
    assert_same_bits(s, expected, what="scales")


def _run(op: JaggedOp, x: torch.Tensor, ends: list[int], fp8_dtype, pow2: bool, device: str):
    return op.launch(x.to(device), _offs(ends, device), fp8_dtype, pow2, backend_for(device))


def _check_against_reference(op: JaggedOp, x: torch.Tensor, ends: list[int], fp8_dtype, pow2: bool, device: str):
    q, s = _run(op, x, ends, fp8_dtype, pow2, device)
    q_ref, s_ref = op.reference(x, _offs(ends), fp8_dtype, pow2)
    _assert_q_equal(q, q_ref, ends[-1] if ends else 0, op.jagged_dim)
    _assert_scales_equal(s, s_ref)


def _dual_reference(x1, x2, ends, fp8_dtype, pow2):
    return ref.per_group_colwise_scales_dual(x1, x2, _offs(ends), fp8_dtype, pow2)


def _assert_dual_equal(out, expected, end: int) -> None:
    q1, s1, q2, s2 = out
    e_q1, e_s1, e_q2, e_s2 = expected
    _assert_q_equal(q1, e_q1, end, 0)
    _assert_scales_equal(s1, e_s1)
    _assert_q_equal(q2, e_q2, end, 0)
    _assert_scales_equal(s2, e_s2)


def _fmt_id(fp8_dtype: torch.dtype) -> str:
    return fmt(fp8_dtype).name


def _dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------------------------------------
# Bitwise equality with the reference
# ---------------------------------------------------------------------------------------------------------------


#: The colwise op runs the rowwise kernel on x.t(): the layouts that stress its stride mapping (tails, empties).
COLWISE_LAYOUTS = ["uneven", "empty_first", "dominant", "tail"]


@pytest.mark.parametrize(
    ("op", "layout"),
    [(OPS[0], name) for name in LAYOUTS] + [(OPS[1], name) for name in COLWISE_LAYOUTS],
    ids=[f"{OPS[0].name}-{name}" for name in LAYOUTS] + [f"{OPS[1].name}-{name}" for name in COLWISE_LAYOUTS],
)
def test_group_layout_matches_reference_bitwise(op, layout, device):
    x = _values(op.shape(ROWS, LENGTH), torch.bfloat16, seed=1)
    _check_against_reference(op, x, LAYOUTS[layout], E4, False, device)


#: Every (input dtype, format) pair for the rowwise op, the bf16 ones for colwise (same kernel body), pow2
#: alternating: the pow2 rule itself is checked near every power of two in tests/test_kernel_helpers.py; here it only
#: has to reach the stored scales.
DTYPE_FORMAT_GRID = [
    (op, dtype, fp8_dtype, (i + j) % 2 == 1)
    for op in OPS
    for i, dtype in enumerate(INPUT_DTYPES if op is OPS[0] else [torch.bfloat16])
    for j, fp8_dtype in enumerate(FP8_DTYPES)
]


@pytest.mark.parametrize(
    ("op", "dtype", "fp8_dtype", "pow2"),
    DTYPE_FORMAT_GRID,
    ids=[f"{o.name}-{_dtype_id(d)}-{_fmt_id(f)}-{'pow2' if p else 'exact'}" for o, d, f, p in DTYPE_FORMAT_GRID],
)
def test_input_dtype_and_format_match_reference_bitwise(op, dtype, fp8_dtype, pow2, device):
    _skip_unless_native(fp8_dtype, device)
    x = _values(op.shape(ROWS, 100), dtype, seed=2)
    _check_against_reference(op, x, [0, 17, 17, 60, 100], fp8_dtype, pow2, device)


@pytest.mark.parametrize("memory_layout", ["row_major", "col_major", "strided_view"])
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_input_memory_layout_matches_reference_bitwise(op, memory_layout, device):
    x = _values(op.shape(ROWS, LENGTH), torch.float32, seed=4)
    if memory_layout == "col_major":
        x = x.t().contiguous().t()
    elif memory_layout == "strided_view":
        x = _values((2 * x.shape[0], 2 * x.shape[1]), torch.float32, seed=4)[::2, 1::2]
    _check_against_reference(op, x, LAYOUTS["uneven"], E4, False, device)


@pytest.mark.parametrize(
    ("rows", "length", "ends"),
    [(3, 5, [2, 5]), (1, 1, [1]), (ROWS, 0, [0, 0]), (0, 40, [10, 40]), (ROWS, 40, [])],
    ids=["smaller_than_one_block", "one_element", "zero_length", "zero_rows", "zero_groups"],
)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_degenerate_shape_matches_reference_bitwise(op, rows, length, ends, device):
    x = _values(op.shape(rows, length), torch.bfloat16, seed=5)
    _check_against_reference(op, x, ends, E4, True, device)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_same_shape_with_1_3_8_groups_each_matches_reference(op, device):
    """Guards any per-shape cache (autotuning on CUDA): the group count changes the result, not the shape."""
    x = _values(op.shape(ROWS, LENGTH), torch.bfloat16, seed=6)
    for ends in ([150], [40, 41, 150], LAYOUTS["many_groups"]):
        _check_against_reference(op, x, ends, E4, False, device)


# ---------------------------------------------------------------------------------------------------------------
# The dual op
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fp8_dtype", "pow2"),
    [(d, i % 2 == 1) for i, d in enumerate(FP8_DTYPES)],
    ids=[f"{_fmt_id(d)}-{'pow2' if i % 2 else 'exact'}" for i, d in enumerate(FP8_DTYPES)],
)
def test_dual_matches_reference_bitwise(fp8_dtype, pow2, device):
    """N1=12 and N2=20 give the two tensors different block counts (2 and 3 blocks of 8 columns, both with tails)."""
    _skip_unless_native(fp8_dtype, device)
    x1 = _values((100, 12), torch.bfloat16, seed=7)
    x2 = _values((100, 20), torch.bfloat16, seed=8).t().contiguous().t()  # column-major beside a row-major x1
    ends = [0, 17, 17, 60, 100]
    out = per_group_colwise_scales_dual.launch(
        x1.to(device),
        x2.to(device),
        _offs(ends, device),
        fp8_dtype,
        pow2,
        backend_for(device),
    )
    _assert_dual_equal(out, _dual_reference(x1, x2, ends, fp8_dtype, pow2), ends[-1])


# ---------------------------------------------------------------------------------------------------------------
# Word stores: transposing views store four columns per 4-byte word (fp8moe.kernels._span.pack_k)
# ---------------------------------------------------------------------------------------------------------------

#: A jagged length that is a multiple of 4: the colwise ops' (N, Ktot) outputs then have 4-byte aligned rows and
#: row-major inputs take the word stores. LENGTH (150) keeps the byte stores.
WORD_LENGTH = 152


def test_pack_k_stores_words_only_for_transposing_views_with_aligned_rows():
    q = torch.empty((ROWS, WORD_LENGTH), dtype=E4)
    assert pack_k((ROWS,), q) == 4  # x.t() of a row-major (152, 12) input: K stride 12
    assert pack_k((ROWS, 20), q, q) == 4
    assert pack_k((1,), q) == 1  # contiguous along K: load and store layouts agree, nothing to pack
    assert pack_k((ROWS, 1), q, q) == 1  # the dual op with one column-major input
    assert pack_k((ROWS,), torch.empty((ROWS, LENGTH), dtype=E4)) == 1  # rows 150 bytes apart
    misaligned = torch.empty(ROWS * WORD_LENGTH + 1, dtype=E4)[1:].view(ROWS, WORD_LENGTH)
    assert pack_k((ROWS,), misaligned) == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_colwise_word_stores_match_reference_bitwise(layout, device):
    """Every layout through the word stores: one- and two-pass groups, edge chunks, empty groups, a tail."""
    op = OPS[1]
    x = _values(op.shape(ROWS, WORD_LENGTH), torch.bfloat16, seed=13)
    assert pack_k((x.stride(0),), torch.empty((ROWS, WORD_LENGTH), dtype=E4)) == 4
    _check_against_reference(op, x, LAYOUTS[layout], E4, False, device)


#: Over a jagged length of 200 (the interpreter's BLOCK_K is 128): groups whose interior outgrows one tile, so they
#: take the two-pass loop, with starts off a multiple of 16 right after another group. On the transposing views
#: pass 1's tiles start at floor16(start), inside the previous group: a pass 2 that reused those tiles without a
#: lower store bound (session 20's carried-tile change, benchmarks/results/h200-s20-carried-tile.diff) overwrote the
#: previous group's columns and failed 12 of these tests, which no earlier layout caught (at a jagged length of 150,
#: every group with an unaligned start fits one tile).
TWO_PASS_UNALIGNED_LAYOUTS: dict[str, list[int]] = {
    "start_8": [8, 200],  # the second group's first tile begins 8 columns inside the first group
    "start_13_end_190": [3, 13, 190, 200],  # two short groups share the first tile; an unaligned tail edge too
    "start_5_tail": [5, 180],  # offs[-1] < Ktot: columns past 180 belong to no group
}
TWO_PASS_LENGTH = 200


@pytest.mark.parametrize("layout", TWO_PASS_UNALIGNED_LAYOUTS)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_two_pass_groups_with_unaligned_starts_match_reference_bitwise(op, layout, device):
    """Word stores on the colwise view (q's rows 4-byte aligned: 200 is a multiple of 4) and byte stores on the
    rowwise one, each two-pass group starting off a multiple of 16 after a group it must not touch."""
    x = _values(op.shape(ROWS, TWO_PASS_LENGTH), torch.bfloat16, seed=16)
    if op.jagged_dim == 0:
        assert pack_k((x.stride(0),), torch.empty((ROWS, TWO_PASS_LENGTH), dtype=E4)) == 4
    _check_against_reference(op, x, TWO_PASS_UNALIGNED_LAYOUTS[layout], E4, True, device)


@pytest.mark.parametrize("layout", TWO_PASS_UNALIGNED_LAYOUTS)
def test_dual_two_pass_groups_with_unaligned_starts_match_reference_bitwise(layout, device):
    _check_dual_word_stores(E4, (17, 18), device, TWO_PASS_UNALIGNED_LAYOUTS[layout], TWO_PASS_LENGTH)


def _check_dual_word_stores(
    fp8_dtype, seeds: tuple[int, int], device: str, ends: list[int] = LAYOUTS["many_groups"], length: int = WORD_LENGTH
) -> None:
    """The dual op on bf16 (length, 12) and (length, 20) inputs (word stores, two block counts) over ``ends``, pow2
    scales, against the reference bitwise."""
    x1 = _values((length, 12), torch.bfloat16, seed=seeds[0])
    x2 = _values((length, 20), torch.bfloat16, seed=seeds[1])
    out = per_group_colwise_scales_dual.launch(
        x1.to(device), x2.to(device), _offs(ends, device), fp8_dtype, True, backend_for(device)
    )
    _assert_dual_equal(out, _dual_reference(x1, x2, ends, fp8_dtype, True), ends[-1])


@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES, ids=_fmt_id)
def test_dual_word_stores_match_reference_bitwise(fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    _check_dual_word_stores(fp8_dtype, (14, 15), device)


@pytest.mark.parametrize("layout", ["uneven", "tail"])
def test_dual_equals_two_single_calls_bitwise(layout, device):
    x1 = _values((LENGTH, 12), torch.float32, seed=9).to(device)
    x2 = _values((LENGTH, 8), torch.float32, seed=10).to(device)
    offs = _offs(LAYOUTS[layout], device)
    backend = backend_for(device)
    dual = per_group_colwise_scales_dual.launch(x1, x2, offs, E4, True, backend)
    single = (
        *per_group_colwise_scales.launch(x1, offs, E4, True, backend),
        *per_group_colwise_scales.launch(x2, offs, E4, True, backend),
    )
    _assert_dual_equal(dual, tuple(t.cpu() for t in single), LAYOUTS[layout][-1])


# ---------------------------------------------------------------------------------------------------------------
# Special values: one run per (op, format), several claims about it
# ---------------------------------------------------------------------------------------------------------------

#: Groups [0, 20) (one pass), empty, [20, 45) (one pass), [45, 80) (two passes: 32 + 3 columns); 80..89 in no group.
SPECIAL_ENDS = [20, 20, 45, 80]
NAN_SLICES = ((3, 0), (10, 3))  # (row, group): one NaN each; the second sits in the second block of a two-pass group
INF_SLICE = (5, 2)  # +inf and -inf
ZERO_SLICE = (7, 3)  # all +-0
TINY_SLICE = (9, 2)  # -0 and input subnormals only


def _special_input() -> torch.Tensor:
    """(12, 90) bf16 in the rowwise orientation (slices along columns)."""
    x = _values((ROWS, 90), torch.float32, seed=11)
    x[NAN_SLICES[0][0], 4] = math.nan
    x[NAN_SLICES[1][0], 78] = math.nan
    x[INF_SLICE[0], 30] = math.inf
    x[INF_SLICE[0], 31] = -math.inf
    x[ZERO_SLICE[0], 45:80] = 0.0
    x[ZERO_SLICE[0], 50:60] = -0.0
    x[TINY_SLICE[0], 20:45] = -0.0
    x[TINY_SLICE[0], 25:30] = torch.tensor([1e-40, -2e-40, 9.2e-41, 3e-39, -1e-45])  # bf16 subnormals
    return x.to(torch.bfloat16)


@functools.cache
def _special_run(op: JaggedOp, fp8_dtype: torch.dtype, device: str):
    """(x, q, s, q_ref, s_ref) with q permuted to the rowwise orientation (slices along dim 1), all on the CPU."""
    x = _special_input()
    x = x if op.jagged_dim == 1 else x.t().contiguous()
    with warnings.catch_warnings():
        # The interpreter evaluates inf * 0 (the inf slice's scale) in numpy, which warns; the NaN is intended.
        warnings.filterwarnings("ignore", "invalid value encountered in multiply", RuntimeWarning)
        q, s = _run(op, x, SPECIAL_ENDS, fp8_dtype, False, device)
    q_ref, s_ref = op.reference(x, _offs(SPECIAL_ENDS), fp8_dtype, False)
    return x, q.cpu(), s.cpu(), q_ref, s_ref


def _rowwise_view(op: JaggedOp, t: torch.Tensor) -> torch.Tensor:
    return t if op.jagged_dim == 1 else t.t()


def _slice_columns(group: int) -> slice:
    bounds = [0, *SPECIAL_ENDS]
    return slice(bounds[group], bounds[group + 1])


special_params = pytest.mark.parametrize(
    ("op", "fp8_dtype"),
    [(op, d) for op in OPS for d in FP8_DTYPES],
    ids=[f"{op.name}-{fmt(d).name}" for op in OPS for d in FP8_DTYPES],
)


@special_params
def test_special_values_match_reference_bitwise(op, fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    _, q, s, q_ref, s_ref = _special_run(op, fp8_dtype, device)
    _assert_q_equal(q, q_ref, SPECIAL_ENDS[-1], op.jagged_dim)
    _assert_scales_equal(s, s_ref)


@special_params
def test_nan_makes_only_its_own_slice_nan(op, fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    _, q, s, _, _ = _special_run(op, fp8_dtype, device)
    nan_scales = torch.isnan(s.view(len(SPECIAL_ENDS), ROWS)).nonzero().tolist()
    assert nan_scales == [[group, row] for row, group in NAN_SLICES], f"NaN scales at (group, row) {nan_scales}"
    is_nan = _nan_codes(fp8_dtype)[_rowwise_view(op, q).view(torch.uint8)[:, : SPECIAL_ENDS[-1]].long()]
    expected = torch.zeros_like(is_nan)
    for row, group in NAN_SLICES:
        expected[row, _slice_columns(group)] = True
    expected[INF_SLICE[0], [30, 31]] = True  # inf * 0
    assert torch.equal(is_nan, expected), f"NaN codes differ at {(is_nan != expected).nonzero()[:4].tolist()}"


@special_params
def test_inf_slice_gets_zero_scale_and_nan_at_inf_zero_elsewhere(op, fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    x, q, s, _, _ = _special_run(op, fp8_dtype, device)
    row, group = INF_SLICE
    assert s.view(len(SPECIAL_ENDS), ROWS)[group, row].view(torch.int32) == 0  # +0.0: fp8_max / inf
    codes = _rowwise_view(op, q).view(torch.uint8)[row, _slice_columns(group)].long()
    values = _rowwise_view(op, x)[row, _slice_columns(group)]
    is_nan = _nan_codes(fp8_dtype)[codes]
    assert bool((is_nan == torch.isinf(values)).all())  # inf * 0 = NaN
    zero_codes = {0x00} if fmt(fp8_dtype).fnuz else {0x00, 0x80}  # finite * 0 = +-0; fnuz has no -0
    assert set(codes[~is_nan].tolist()) <= zero_codes


@special_params
def test_empty_group_and_all_zero_slice_get_eps_scale(op, fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    _, q, s, _, _ = _special_run(op, fp8_dtype, device)
    scales = s.view(len(SPECIAL_ENDS), ROWS)
    eps_scale = amax_to_scale(torch.zeros(()), fp8_dtype).view(torch.int32)  # e4m3fn 447999985582080.0
    assert bool((scales[1].view(torch.int32) == eps_scale).all()), "empty group 1 must hold the EPS scale"
    row, group = ZERO_SLICE
    assert scales[group, row].view(torch.int32) == eps_scale
    codes = _rowwise_view(op, q).view(torch.uint8)[row, _slice_columns(group)]
    expected = torch.tensor([0x80 if 5 <= i < 15 and not fmt(fp8_dtype).fnuz else 0 for i in range(35)])
    assert codes.tolist() == expected.tolist()  # -0 is 0x80 in fn formats, 0x00 in fnuz


@special_params
def test_slice_of_signed_zeros_and_input_subnormals_gets_eps_scale_and_keeps_signs(op, fp8_dtype, device):
    """amax = 3e-39 (a bf16 subnormal) is below EPS = 1e-12, so the scale is the EPS one (e4m3fn 4.48e14); every
    product (<= 1.3e-24) is below the smallest fp8 subnormal (2^-17) and rounds to a zero of the input's sign."""
    _skip_unless_native(fp8_dtype, device)
    _, q, s, _, _ = _special_run(op, fp8_dtype, device)
    row, group = TINY_SLICE
    eps_scale = amax_to_scale(torch.zeros(()), fp8_dtype).view(torch.int32)
    assert s.view(len(SPECIAL_ENDS), ROWS)[group, row].view(torch.int32) == eps_scale
    codes = _rowwise_view(op, q).view(torch.uint8)[row, _slice_columns(group)]
    negative_zero = 0x00 if fmt(fp8_dtype).fnuz else 0x80
    positive = {5, 7, 8}  # 1e-40, 9.2e-41, 3e-39; -1e-45 rounds to bf16 -0
    assert codes.tolist() == [0x00 if i in positive else negative_zero for i in range(25)]


# ---------------------------------------------------------------------------------------------------------------
# Written elements and determinism
# ---------------------------------------------------------------------------------------------------------------


def _launch_case(op_name: str, device: str):
    """A zero-argument launch of one op on the 'tail' layout, plus the outputs' jagged dims."""
    backend = backend_for(device)
    offs = _offs(LAYOUTS["tail"], device)
    if op_name == "per_group_colwise_scales_dual":
        x1 = _values((LENGTH, 12), torch.bfloat16, seed=12).to(device)
        x2 = _values((LENGTH, 20), torch.bfloat16, seed=13).to(device)
        return (lambda: per_group_colwise_scales_dual.launch(x1, x2, offs, E4, False, backend)), (0, None, 0, None)
    op = next(op for op in OPS if op.name == op_name)
    x = _values(op.shape(ROWS, LENGTH), torch.bfloat16, seed=12).to(device)
    return (lambda: op.launch(x, offs, E4, False, backend)), (op.jagged_dim, None)


ALL_OP_NAMES = [op.name for op in OPS] + ["per_group_colwise_scales_dual"]


@pytest.mark.parametrize("op_name", ALL_OP_NAMES)
def test_writes_every_in_group_element_and_nothing_past_last_offset(op_name, device):
    run, jagged_dims = _launch_case(op_name, device)
    with poisoned_allocations(POISON_BYTES[0]):
        first = [t.cpu() for t in run()]
    with poisoned_allocations(POISON_BYTES[1]):
        second = [t.cpu() for t in run()]
    end = LAYOUTS["tail"][-1]
    for a, b, dim in zip(first, second, jagged_dims):
        unwritten = unwritten_mask(a, b)
        if dim is None:  # scales: every word written
            assert not bool(unwritten.any()), f"unwritten scales at {unwritten.nonzero().flatten().tolist()[:8]}"
            continue
        in_groups = unwritten.narrow(dim, 0, end)
        past_end = unwritten.narrow(dim, end, a.shape[dim] - end)
        assert not bool(in_groups.any()), f"unwritten in-group elements at {in_groups.nonzero()[:4].tolist()}"
        assert bool(past_end.all()), "a kernel wrote past offs[-1]"
        assert torch.equal(_jagged_bytes(a, dim, end), _jagged_bytes(b, dim, end))


def _force_span_kwargs(monkeypatch, **kwargs) -> None:
    """Every launch of the span kernel's lists (the per-group and dual ones) takes the config the backend would
    pick, with ``kwargs`` added (a callable value is called with that config's kwargs)."""
    names = {configs.PER_GROUP.name, configs.PER_GROUP_DUAL.name}
    fixed = configs.KernelConfigs.fixed

    def with_kwargs(self, backend, args):
        config = fixed(self, backend, args)
        if self.name not in names:
            return config
        added = {k: v(config.kwargs) if callable(v) else v for k, v in kwargs.items()}
        return triton.Config({**config.kwargs, **added}, num_warps=config.num_warps)

    monkeypatch.setattr(configs.KernelConfigs, "fixed", with_kwargs)
    monkeypatch.setattr(configs, "AUTOTUNE_MIN_ELEMENTS", float("inf"))  # every launch takes ``fixed``


@pytest.fixture
def groups_fastest_grid(per_group_kernel, monkeypatch):
    """The span kernel launched on its groups-fastest grid (GROUPS_FASTEST, fp8moe.kernels._per_group.jagged_grid)
    whatever config the backend picks; yields the groups_fastest flag of every grid the launches built. Its tests
    run on the span kernel alone (the grid order is its own): ``ON_THE_SPAN_KERNEL``."""
    assert per_group_kernel == "span", per_group_kernel
    from fp8moe.kernels import _per_group

    built, jagged_grid = [], _per_group.jagged_grid

    def recording_grid(row_blocks, groups, fastest):
        built.append(fastest)
        return jagged_grid(row_blocks, groups, fastest)

    _force_span_kwargs(monkeypatch, GROUPS_FASTEST=True)
    monkeypatch.setattr(_per_group, "jagged_grid", recording_grid)
    monkeypatch.setattr(per_group_colwise_scales_dual, "jagged_grid", recording_grid)
    replay.forget()
    yield built
    replay.forget()


@pytest.fixture
def span_flags(per_group_kernel, monkeypatch):
    """Call it with config kwargs (``ONE_READ=False``, ``ONE_READ_K=...``, ``EDGES_IN_TILE=True``; a callable value
    gets the picked config's kwargs): every span-kernel launch of the test then takes the config the backend would
    pick with them added (:func:`_force_span_kwargs`). Launch plans recorded under the forced configs are dropped
    at both ends. Its tests run on the span kernel alone: ``ON_THE_SPAN_KERNEL``."""
    assert per_group_kernel == "span", per_group_kernel
    replay.forget()
    yield lambda **kwargs: _force_span_kwargs(monkeypatch, **kwargs)
    replay.forget()


#: The autouse kernel fixture narrowed to the span kernel, for the tests of its own grid.
ON_THE_SPAN_KERNEL = pytest.mark.parametrize("per_group_kernel", ["span"], indirect=True)


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_groups_fastest_grid_matches_reference_bitwise(op, layout, groups_fastest_grid, device):
    """The other grid order changes which programs run together, never a byte: every layout, both views (word
    stores on the colwise one), and the grid really was the groups-fastest one."""
    x = _values(op.shape(ROWS, WORD_LENGTH), torch.bfloat16, seed=16)
    _check_against_reference(op, x, LAYOUTS[layout], E4, False, device)
    assert groups_fastest_grid
    assert all(groups_fastest_grid)


@ON_THE_SPAN_KERNEL
def test_groups_fastest_grid_matches_reference_bitwise_on_the_dual_op(groups_fastest_grid, device):
    """N1 = 12 and N2 = 20: the program index splits into row blocks of both tensors and a group."""
    _check_dual_word_stores(E4, (17, 18), device)
    assert groups_fastest_grid == [True]


#: The span kernel's boolean config flags, each with the value a candidate sets (fp8moe.kernels._span.
#: quantize_group_span) and the seeds of its tests' values:
#: - ONE_READ=False: every group goes through the two-pass loop, the ones that fit one tile (empty, shorter than 16,
#:   unaligned within one chunk) too;
#: - EDGES_IN_TILE: on transposing views the one-read tile covers the partial edge chunks;
#: - EDGE_LOOP: the partial edge chunks one at a time in a run-time loop;
#: - EXTRA_CHUNKS: the one-read path also takes interiors one 16-column chunk past its tile;
#: - L2_HINTS: L2 eviction priorities on the one-read tile, both passes and the stores (2: every kind it sets).
SPAN_FLAGS = {
    "ONE_READ": (False, 19, (20, 21)),
    "EDGES_IN_TILE": (True, 26, (27, 28)),
    "EDGE_LOOP": (True, 30, (32, 33)),
    "EXTRA_CHUNKS": (1, 34, (35, 36)),
    "L2_HINTS": (2, 38, (39, 40)),
}


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("flag", SPAN_FLAGS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_span_flag_matches_reference_bitwise(op, layout, flag, span_flags, device):
    """Each flag changes code, never a byte: every layout, both views, and the launch really had the flag."""
    value, seed, _ = SPAN_FLAGS[flag]
    span_flags(**{flag: value})
    configs.LAST_CONFIG.pop(configs.PER_GROUP.name, None)
    x = _values(op.shape(ROWS, WORD_LENGTH), torch.bfloat16, seed=seed)
    _check_against_reference(op, x, LAYOUTS[layout], E4, False, device)
    assert configs.LAST_CONFIG[configs.PER_GROUP.name].kwargs[flag] is value


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("flag", SPAN_FLAGS)
@pytest.mark.parametrize("fp8_dtype", [E4, torch.float8_e5m2], ids=str)
def test_span_flag_matches_reference_bitwise_on_the_dual_op(flag, fp8_dtype, span_flags, device):
    value, _, seeds = SPAN_FLAGS[flag]
    span_flags(**{flag: value})
    configs.LAST_CONFIG.pop(configs.PER_GROUP_DUAL.name, None)
    _check_dual_word_stores(fp8_dtype, seeds, device)
    assert configs.LAST_CONFIG[configs.PER_GROUP_DUAL.name].kwargs[flag] is value


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_wide_one_read_tile_matches_reference_bitwise(op, layout, span_flags, device):
    """Groups whose interior fits 2 * BLOCK_K read once in the wide tile, longer ones loop in BLOCK_K tiles: every
    layout, both views, and the launch really had the wide tile."""
    span_flags(ONE_READ_K=lambda kwargs: 2 * kwargs["BLOCK_K"])
    configs.LAST_CONFIG.pop(configs.PER_GROUP.name, None)
    x = _values(op.shape(ROWS, WORD_LENGTH), torch.bfloat16, seed=22)
    _check_against_reference(op, x, LAYOUTS[layout], E4, False, device)
    launched = configs.LAST_CONFIG[configs.PER_GROUP.name].kwargs
    assert launched["ONE_READ_K"] == 2 * launched["BLOCK_K"], launched


#: Group lengths whose aligned interiors sit on both sides of a 32-column one-read tile beside a 16-column loop:
#: interiors of 32 (one read) and 48 (the loop) at aligned and unaligned starts, 16, 0 and 64.
ONE_READ_BOUNDARY_LENGTHS = (32, 48, 32, 16, 48, 5, 43, 59, 37, 64)


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_wide_one_read_tile_at_its_width_and_one_chunk_past_it(op, span_flags, device):
    """BLOCK_K = 16, ONE_READ_K = 32: a group whose interior is exactly 32 columns must be read once in the wide
    tile, one of 48 must loop (a tile of the loop's width, or a threshold one chunk too wide, loses columns)."""
    span_flags(BLOCK_K=16, ONE_READ_K=32)
    ends = list(itertools.accumulate(ONE_READ_BOUNDARY_LENGTHS))
    x = _values(op.shape(ROWS, ends[-1]), torch.bfloat16, seed=25)
    _check_against_reference(op, x, ends, E4, False, device)


@ON_THE_SPAN_KERNEL
def test_wide_one_read_tile_matches_reference_bitwise_on_the_dual_op(span_flags, device):
    span_flags(ONE_READ_K=lambda kwargs: 2 * kwargs["BLOCK_K"])
    configs.LAST_CONFIG.pop(configs.PER_GROUP_DUAL.name, None)
    _check_dual_word_stores(E4, (23, 24), device)
    launched = configs.LAST_CONFIG[configs.PER_GROUP_DUAL.name].kwargs
    assert launched["ONE_READ_K"] == 2 * launched["BLOCK_K"], launched


#: Group lengths whose aligned interiors sit on both sides of a 32-column one-read tile that takes two chunks more,
#: beside a 16-column loop: interiors of 32 (the tile alone), 48 and 64 (one and two chunks past it) and 80 (the
#: loop), at aligned starts and after a 5-column group (unaligned starts, partial edges), and 16, 0.
EXTRA_CHUNK_LENGTHS = (32, 48, 64, 80, 5, 43, 59, 75, 91, 37, 16, 0, 70)


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("edge_loop", [False, True], ids=["edges_unrolled", "edge_loop"])
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_extra_chunks_at_the_tile_one_and_two_chunks_past_it_and_one_more(op, edge_loop, span_flags, device):
    """BLOCK_K = 16, ONE_READ_K = 32, EXTRA_CHUNKS = 2: interiors of 32, 48 and 64 columns take the one-read path
    (the tile plus none, one or two chunks read twice), one of 80 loops; each chunk must be folded into the amax
    and stored (a chunk loop that stops one chunk early, or leaves a chunk out of the amax, fails it). The
    threshold itself picks a path, not bytes: the chunk loop is exact at any length."""
    span_flags(BLOCK_K=16, ONE_READ_K=32, EXTRA_CHUNKS=2, EDGE_LOOP=edge_loop)
    ends = list(itertools.accumulate(EXTRA_CHUNK_LENGTHS))
    x = _values(op.shape(ROWS, ends[-1]), torch.bfloat16, seed=37)
    _check_against_reference(op, x, ends, E4, False, device)


#: Group ends whose 16-column covers sit on both sides of a 32-column tile: covers of 32 with a partial tail
#: ([0, 27)), both edges partial and no interior ([118, 140)), a partial head ([140, 160)), aligned ([160, 192));
#: covers of 48 ([27, 59), [59, 85), [90, 118)) and 64 ([200, 256)) that must loop; one within one chunk, one empty.
COVER_BOUNDARY_ENDS = [27, 59, 85, 90, 118, 140, 160, 160, 192, 200, 256]


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_edges_in_tile_at_its_width_and_one_chunk_past_it(op, span_flags, device):
    """BLOCK_K = 16 with a 32-column one-read tile that holds the edges: a span whose cover is 32 columns is read
    once, edges stored from the tile; one whose cover is 48 loops."""
    span_flags(BLOCK_K=16, ONE_READ_K=32, EDGES_IN_TILE=True)
    x = _values(op.shape(ROWS, COVER_BOUNDARY_ENDS[-1]), torch.bfloat16, seed=29)
    _check_against_reference(op, x, COVER_BOUNDARY_ENDS, E4, False, device)


@ON_THE_SPAN_KERNEL
@pytest.mark.parametrize("paths", [{}, {"ONE_READ": False}], ids=["one_read_and_loop", "loop_only"])
@pytest.mark.parametrize("op", OPS[:2], ids=lambda op: op.name)
def test_edge_loop_at_every_kind_of_edge(op, paths, span_flags, device):
    """BLOCK_K = 16 over COVER_BOUNDARY_ENDS: a partial tail alone, both edges with no interior, a partial head
    alone, aligned groups, groups within one chunk and an empty one, in the one-read path (interiors of at most 16)
    and the two-pass loop (every group with ``ONE_READ=False``): each chunk must be folded into the amax and
    stored, head and tail."""
    span_flags(BLOCK_K=16, EDGE_LOOP=True, **paths)
    x = _values(op.shape(ROWS, COVER_BOUNDARY_ENDS[-1]), torch.bfloat16, seed=31)
    _check_against_reference(op, x, COVER_BOUNDARY_ENDS, E4, False, device)


@ON_THE_SPAN_KERNEL
def test_jagged_grid_has_one_program_per_cell_in_either_order():
    from fp8moe.kernels._per_group import jagged_grid

    assert jagged_grid(5, 3, False) == (5, 3)
    assert jagged_grid(5, 3, True) == (15,)
    assert jagged_grid(2**20, 2**11 - 1, True) == ((2**20) * (2**11 - 1),)
    with pytest.raises(ValueError, match="exceeds 2147483647 programs"):
        jagged_grid(2**20, 2**11, True)


@pytest.mark.parametrize("op_name", [OPS[0].name, "per_group_colwise_scales_dual"])
def test_two_runs_give_identical_bytes(op_name, device):
    run, jagged_dims = _launch_case(op_name, device)
    first, second = run(), run()
    end = LAYOUTS["tail"][-1]
    for a, b, dim in zip(first, second, jagged_dims):
        if dim is None:
            assert torch.equal(a.cpu().view(torch.int32), b.cpu().view(torch.int32))
        else:
            assert torch.equal(_jagged_bytes(a, dim, end), _jagged_bytes(b, dim, end))
