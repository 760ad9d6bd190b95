"""fp8ref.ops against slow per-slice oracles built directly from fp8ref.scaling, plus layout, NaN and no-sync claims."""

from __future__ import annotations

import itertools

import pytest
import torch

from fp8ref import ops
from fp8ref.contracts import QUANTIZE_OPS, contract
from fp8ref.formats import FP8_DTYPES, fmt
from fp8ref.scaling import EPS, amax_to_scale, tensor_to_amax, to_fp8_saturated

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
FP8 = {fmt(d).name: d for d in FP8_DTYPES}
JAGGED_OPS = tuple(op for op in QUANTIZE_OPS if contract(op).jagged)
# Group sizes along the jagged dim and that dim's length; sum(sizes) < length leaves a tail past offs[-1].
LAYOUTS = {
    "uniform": ((4, 4, 4), 12),
    "uneven": ((1, 7, 3, 5), 16),
    "empty_first": ((0, 5, 3), 8),
    "empty_middle": ((4, 0, 6), 10),
    "empty_last": ((5, 3, 0), 8),
    "size_1": ((1, 1, 1, 1), 4),
    "dominant": ((1, 97, 2), 100),
    "tail": ((3, 60), 100),
    "uneven_130": ((7, 0, 100, 16, 1), 130),
}
DIMS = (1, 7, 100, 130)


# ------------------------------------------------------------------------------------------------------------------
# Oracles: one Python iteration per slice, nothing but fp8ref.scaling.
# ------------------------------------------------------------------------------------------------------------------


def _quantize_slice(v: torch.Tensor, fp8_dtype: torch.dtype, pow2: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 codes, 0-d f32 scale) of one 1-D slice; an empty slice has amax 0."""
    amax = tensor_to_amax(v) if v.numel() else torch.zeros((), dtype=v.dtype)
    scale = amax_to_scale(amax, fp8_dtype, pow2)
    return to_fp8_saturated(v.to(torch.float32) * scale, fp8_dtype).view(torch.uint8), scale


def oracle_rowwise_2d(x, fp8_dtype, pow2):
    m, k = x.shape
    q, s = torch.zeros(m, k, dtype=torch.uint8), torch.zeros(m, 1)
    for i in range(m):
        q[i], s[i, 0] = _quantize_slice(x[i], fp8_dtype, pow2)
    return q, s


def oracle_colwise_3d(x, fp8_dtype, pow2):
    e, k, n = x.shape
    q, s = torch.zeros(e, k, n, dtype=torch.uint8), torch.zeros(e, 1, n)
    for a, j in itertools.product(range(e), range(n)):
        q[a, :, j], s[a, 0, j] = _quantize_slice(x[a, :, j], fp8_dtype, pow2)
    return q, s


def oracle_rowwise_3d_transpose_rhs(x, fp8_dtype, pow2):
    e, k, n = x.shape
    q, s = torch.zeros(e, n, k, dtype=torch.uint8), torch.zeros(e, k)
    for a, i in itertools.product(range(e), range(k)):
        q[a, :, i], s[a, i] = _quantize_slice(x[a, i, :], fp8_dtype, pow2)
    return q, s


def oracle_per_group_colwise(x, offs, fp8_dtype, pow2):
    """Jagged along rows; rows past offs[-1] stay 0x00."""
    k, n = x.shape
    q, scales = torch.zeros(k, n, dtype=torch.uint8), []
    starts = [0, *offs.tolist()[:-1]]
    for start, end in zip(starts, offs.tolist()):
        for j in range(n):
            q[start:end, j], scale = _quantize_slice(x[start:end, j], fp8_dtype, pow2)
            scales.append(scale)
    return q, torch.stack(scales) if scales else torch.zeros(0)


def oracle_per_group_rowwise(x, offs, fp8_dtype, pow2):
    q_t, s = oracle_per_group_colwise(x.t(), offs, fp8_dtype, pow2)
    return q_t.t(), s


def oracle_dual(x1, x2, offs, fp8_dtype, pow2):
    return (*oracle_per_group_colwise(x1, offs, fp8_dtype, pow2), *oracle_per_group_colwise(x2, offs, fp8_dtype, pow2))


ORACLES = {
    "rowwise_2d_scale_and_cast": oracle_rowwise_2d,
    "colwise_3d_scale_and_cast": oracle_colwise_3d,
    "rowwise_3d_transpose_rhs": oracle_rowwise_3d_transpose_rhs,
    "per_group_rowwise_scales": oracle_per_group_rowwise,
    "per_group_colwise_scales": oracle_per_group_colwise,
    "per_group_colwise_scales_dual": oracle_dual,
}


# ------------------------------------------------------------------------------------------------------------------
# Inputs and comparison
# ------------------------------------------------------------------------------------------------------------------


def make_x(shape, dtype, seed, col_major=False):
    """Normal values times a per-element magnitude 2^U(-20, 20), so slices get scales across a wide range."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 21, shape, generator=g).float())
    x = x.to(dtype)
    if col_major:  # transpose the last two dims in memory: column-major 2-D, column-major per expert in 3-D
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x


def make_offs(sizes):
    return torch.tensor(list(itertools.accumulate(sizes)), dtype=torch.int32)


def op_args(op, dims, dtype, seed, col_major=False, sizes=None):
    """Positional arguments for ``op``: dims are (M, K), (E, K, N), or (non-jagged dim,) with ``sizes`` for jagged.

    Jagged ops take (group sizes, jagged length) in ``sizes``; their other dims are dims[0], dims[0] + 3, ... (the
    dual op's two inputs differ in width).
    """
    c = contract(op)
    if not c.jagged:
        return (make_x(dims, dtype, seed, col_major),)
    (other,), (group_sizes, total) = dims, sizes
    jagged_name = c.dims[c.jagged_dim]
    widths = iter(range(other, other + 3 * len(c.dims), 3))
    shape = tuple(total if name == jagged_name else next(widths) for name in c.dims)
    xs = [make_x(s, dtype, seed + i, col_major and i == 0) for i, s in enumerate(c.input_shapes(shape))]
    return (*xs, make_offs(group_sizes))


def canonical_bytes(codes: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """uint8 codes with every NaN code replaced by the format's canonical NaN (NaN compares as a class, SPEC §4)."""
    f = fmt(fp8_dtype)
    is_nan = torch.isin(codes, torch.tensor(sorted(f.nan_codes), dtype=torch.uint8))
    return torch.where(is_nan, f.canonical_nan, codes)


def canonical_bits(scales: torch.Tensor) -> torch.Tensor:
    """int32 bit patterns of f32 scales, every NaN as 0x7FC00000."""
    return torch.where(torch.isnan(scales), torch.tensor(float("nan")), scales).view(torch.int32)


def assert_outputs_equal(got, want):
    """fp8 outputs compared as bytes, f32 scales as bit patterns; NaN as a class (the vectorized and the per-slice
    products give NaNs of different sign: 7 of 1400 bytes 0x7F vs 0xFF, colwise_3d bf16, torch 2.13 CPU)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if g.dtype in FP8_DTYPES:
            w = w.view(torch.uint8) if w.dtype in FP8_DTYPES else w
            torch.testing.assert_close(
                canonical_bytes(g.view(torch.uint8), g.dtype), canonical_bytes(w, g.dtype), rtol=0, atol=0
            )
        else:
            assert g.dtype == torch.float32
            torch.testing.assert_close(canonical_bits(g), canonical_bits(w.reshape(g.shape)), rtol=0, atol=0)


def run_both(op, args, fp8_dtype, pow2):
    got = getattr(ops, op)(*args, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=pow2)
    want = ORACLES[op](*args, fp8_dtype, pow2)
    return got, want


# ------------------------------------------------------------------------------------------------------------------
# Differential tests against the oracles
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", JAGGED_OPS)
def test_jagged_op_matches_loop_oracle_over_layouts(op, layout, dim):
    args = op_args(op, (dim,), torch.bfloat16, seed=dim, sizes=LAYOUTS[layout])
    assert_outputs_equal(*run_both(op, args, torch.float8_e4m3fn, pow2=False))


@pytest.mark.parametrize("col_major", [False, True], ids=["row_major", "col_major"])
@pytest.mark.parametrize("pow2", [False, True], ids=["exact", "pow2"])
@pytest.mark.parametrize("fp8_name", FP8)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("op", JAGGED_OPS)
def test_jagged_op_matches_loop_oracle_over_dtypes(op, dtype_name, fp8_name, pow2, col_major):
    args = op_args(op, (7,), DTYPES[dtype_name], seed=3, col_major=col_major, sizes=LAYOUTS["uneven_130"])
    assert_outputs_equal(*run_both(op, args, FP8[fp8_name], pow2))


DENSE_SHAPES = {
    "rowwise_2d_scale_and_cast": [(1, 1), (7, 100), (130, 7), (100, 130)],
    "colwise_3d_scale_and_cast": [(1, 1, 1), (2, 7, 100), (3, 130, 7), (1, 100, 1)],
    "rowwise_3d_transpose_rhs": [(1, 1, 1), (2, 7, 100), (3, 130, 7), (1, 1, 100)],
}
DENSE_CASES = [(op, shape) for op, shapes in DENSE_SHAPES.items() for shape in shapes]


@pytest.mark.parametrize("col_major", [False, True], ids=["row_major", "col_major"])
@pytest.mark.parametrize("pow2", [False, True], ids=["exact", "pow2"])
@pytest.mark.parametrize("fp8_name", FP8)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize(("op", "shape"), DENSE_CASES, ids=[f"{o}-{'x'.join(map(str, s))}" for o, s in DENSE_CASES])
def test_dense_op_matches_loop_oracle(op, shape, dtype_name, fp8_name, pow2, col_major):
    args = op_args(op, shape, DTYPES[dtype_name], seed=sum(shape), col_major=col_major)
    assert_outputs_equal(*run_both(op, args, FP8[fp8_name], pow2))


def _smallest_subnormal(dtype):
    return torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps  # 2^-133 bf16, 2^-24 f16, 2^-149 f32


def inject_specials(x, seed):
    """Plant NaN, +-inf, -0, the dtype's smallest subnormal, a tiny negative, and all-zero slices."""
    g = torch.Generator().manual_seed(seed)
    flat = x.reshape(-1).clone()
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, _smallest_subnormal(x.dtype), -1.0e-30]
    positions = torch.randperm(flat.numel(), generator=g)[: len(specials)].tolist()
    for pos, value in zip(positions, specials):
        flat[pos] = value
    out = flat.reshape(x.shape)
    out[..., 0, :] = 0.0  # an all-zero row and column of every 2-D block: an all-zero slice for every op
    out[..., 0] = 0.0
    return out


@pytest.mark.parametrize("fp8_name", FP8)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("op", list(ORACLES))
def test_special_values_match_loop_oracle(op, dtype_name, fp8_name):
    dims = (7,) if op in JAGGED_OPS else DENSE_SHAPES[op][1]
    args = op_args(op, dims, DTYPES[dtype_name], seed=11, sizes=((2, 0, 5, 1), 9))
    args = tuple(inject_specials(a, seed=i) if a.is_floating_point() else a for i, a in enumerate(args))
    assert_outputs_equal(*run_both(op, args, FP8[fp8_name], pow2=False))


# ------------------------------------------------------------------------------------------------------------------
# Output layouts, asserted literally
# ------------------------------------------------------------------------------------------------------------------

OFFS_3 = torch.tensor([2, 2, 5], dtype=torch.int32)  # G = 3 (one empty), tail of 1 when the jagged dim is 6
LAYOUT_CASES = [
    ("rowwise_2d_scale_and_cast", ((5, 6),), [((5, 6), (6, 1)), ((5, 1), (1, 1))]),
    ("rowwise_2d_scale_and_cast", ((5, 1),), [((5, 1), (1, 1)), ((5, 1), (1, 1))]),
    ("colwise_3d_scale_and_cast", ((2, 3, 5),), [((2, 3, 5), (15, 1, 3)), ((2, 1, 5), (5, 5, 1))]),
    ("colwise_3d_scale_and_cast", ((2, 1, 5),), [((2, 1, 5), (5, 1, 1)), ((2, 1, 5), (5, 5, 1))]),
    ("rowwise_3d_transpose_rhs", ((2, 3, 5),), [((2, 5, 3), (15, 1, 5)), ((2, 3), (3, 1))]),
    ("rowwise_3d_transpose_rhs", ((2, 3, 1),), [((2, 1, 3), (3, 1, 1)), ((2, 3), (3, 1))]),
    ("per_group_rowwise_scales", ((4, 6),), [((4, 6), (6, 1)), ((12,), (1,))]),
    ("per_group_colwise_scales", ((6, 4),), [((6, 4), (1, 6)), ((12,), (1,))]),
    ("per_group_colwise_scales", ((6, 1),), [((6, 1), (1, 6)), ((3,), (1,))]),
    (
        "per_group_colwise_scales_dual",
        ((6, 4), (6, 2)),
        [((6, 4), (1, 6)), ((12,), (1,)), ((6, 2), (1, 6)), ((6,), (1,))],
    ),
]


@pytest.mark.parametrize(("op", "shapes", "expected"), LAYOUT_CASES, ids=[f"{c[0]}-{c[1]}" for c in LAYOUT_CASES])
@pytest.mark.parametrize("col_major", [False, True], ids=["row_major_in", "col_major_in"])
def test_output_shapes_and_strides_are_literal(op, shapes, expected, col_major):
    args = [make_x(s, torch.bfloat16, seed=0, col_major=col_major) for s in shapes]
    if op in JAGGED_OPS:
        args.append(OFFS_3)
    outs = getattr(ops, op)(*args)
    assert [(tuple(o.shape), o.stride()) for o in outs] == expected
    assert [o.dtype for o in outs] == [torch.float8_e4m3fn, torch.float32] * (len(outs) // 2)


# ------------------------------------------------------------------------------------------------------------------
# Jagged-op claims
# ------------------------------------------------------------------------------------------------------------------


def _colwise(op, x, offs, **kw):
    """Run a jagged op on x laid out as (jagged, other); returns q as (jagged, other) and scales as (G, other)."""
    if op == "per_group_rowwise_scales":
        q, s = ops.per_group_rowwise_scales(x.t(), offs, **kw)
        return q.t(), s.reshape(offs.numel(), -1)
    if op == "per_group_colwise_scales":
        q, s = ops.per_group_colwise_scales(x, offs, **kw)
        return q, s.reshape(offs.numel(), -1)
    q, s, _, _ = ops.per_group_colwise_scales_dual(x, torch.ones(x.shape[0], 2, dtype=x.dtype), offs, **kw)
    return q, s.reshape(offs.numel(), -1)


@pytest.mark.parametrize("op", JAGGED_OPS)
def test_nan_in_one_group_makes_exactly_that_groups_scale_nan(op):
    x = make_x((10, 3), torch.float32, seed=5)
    x[6, 1] = float("nan")  # group 2 = rows [4, 8), column 1
    offs = make_offs((2, 2, 4, 2))
    q, s = _colwise(op, x, offs)
    expected_nan = torch.zeros(4, 3, dtype=torch.bool)
    expected_nan[2, 1] = True
    assert torch.equal(torch.isnan(s), expected_nan)
    code_is_nan = torch.isin(q.view(torch.uint8), torch.tensor(sorted(fmt(torch.float8_e4m3fn).nan_codes)))
    expected_q_nan = torch.zeros(10, 3, dtype=torch.bool)
    expected_q_nan[4:8, 1] = True
    assert torch.equal(code_is_nan, expected_q_nan)


@pytest.mark.parametrize("inf", [float("inf"), float("-inf")], ids=["pos_inf", "neg_inf"])
@pytest.mark.parametrize("op", JAGGED_OPS)
def test_inf_in_group_gives_zero_scale(op, inf):
    x = make_x((10, 3), torch.float32, seed=6)
    x[0, 2] = inf
    _, s = _colwise(op, x, make_offs((2, 8)))
    assert s.view(torch.int32)[0, 2].item() == 0  # +0.0 bits: fp8_max / inf
    assert int((s == 0).sum()) == 1


@pytest.mark.parametrize("op", JAGGED_OPS)
def test_empty_group_gets_eps_scale_and_no_data(op):
    x = make_x((9, 4), torch.bfloat16, seed=7)
    q, s = _colwise(op, x, make_offs((3, 0, 6)))
    q_without, s_without = _colwise(op, x, make_offs((3, 6)))
    eps_scale = torch.tensor(448.0 / EPS, dtype=torch.float64).to(torch.float32)
    assert torch.equal(s[1].view(torch.int32), eps_scale.expand(4).view(torch.int32))
    assert torch.equal(q.view(torch.uint8), q_without.view(torch.uint8))
    assert torch.equal(s[[0, 2]].view(torch.int32), s_without.view(torch.int32))


@pytest.mark.parametrize("op", JAGGED_OPS)
def test_elements_past_last_offset_are_zero_and_reach_no_scale(op):
    x = make_x((9, 4), torch.float32, seed=8)
    x[7:] = torch.tensor([float("nan"), float("inf"), 3.0e38, -0.0])
    q, s = _colwise(op, x, make_offs((3, 4)))
    q_head, s_head = _colwise(op, x[:7].contiguous(), make_offs((3, 4)))
    assert torch.equal(q.view(torch.uint8)[7:], torch.zeros(2, 4, dtype=torch.uint8))
    assert torch.equal(q.view(torch.uint8)[:7], q_head.view(torch.uint8))
    assert torch.equal(s.view(torch.int32), s_head.view(torch.int32))


def test_dual_operands_do_not_share_amax():
    x1, x2 = make_x((8, 3), torch.float32, seed=9), make_x((8, 5), torch.float32, seed=10)
    x2[0, 0] = float("nan")
    offs = make_offs((4, 4))
    q1, s1, _, s2 = ops.per_group_colwise_scales_dual(x1, x2, offs)
    q1_alone, s1_alone = ops.per_group_colwise_scales(x1, offs)
    assert not torch.isnan(s1).any()
    assert torch.equal(q1.view(torch.uint8), q1_alone.view(torch.uint8))
    assert torch.equal(s1.view(torch.int32), s1_alone.view(torch.int32))
    assert int(torch.isnan(s2).sum()) == 1


# ------------------------------------------------------------------------------------------------------------------
# No host read of offs
# ------------------------------------------------------------------------------------------------------------------


def _jagged_args(op, device):
    return tuple(t.to(device) for t in op_args(op, (4,), torch.bfloat16, seed=1, sizes=((2, 0, 3), 6)))


@pytest.mark.parametrize(
    "host_read",
    [lambda o: o[-1].item(), lambda o: o.tolist(), lambda o: bool(o[-1]), lambda o: o.nonzero()],
    ids=["item", "tolist", "bool", "nonzero"],
)
def test_meta_device_rejects_every_host_read_of_offs(host_read):
    """The negative control for the next test: each way of reading offs on the host fails on meta tensors."""
    with pytest.raises((RuntimeError, NotImplementedError)):
        host_read(make_offs((2, 3)).to("meta"))


@pytest.mark.parametrize("op", JAGGED_OPS)
def test_jagged_op_runs_on_meta_tensors_so_never_reads_offs_on_host(op):
    outs = getattr(ops, op)(*_jagged_args(op, "meta"), round_scales_to_power_of_2=True)
    eager = getattr(ops, op)(*_jagged_args(op, "cpu"), round_scales_to_power_of_2=True)
    assert [(o.shape, o.stride(), o.dtype) for o in outs] == [(o.shape, o.stride(), o.dtype) for o in eager]


@pytest.mark.parametrize("op", JAGGED_OPS)
def test_jagged_op_compiles_to_one_graph_equal_to_eager(op):
    """fullgraph=True: no graph break. aot_eager traces through AOTAutograd without codegen (~1 s, not ~20 s)."""
    torch._dynamo.reset()
    compiled = torch.compile(getattr(ops, op), fullgraph=True, backend="aot_eager")
    args = _jagged_args(op, "cpu")
    assert_outputs_equal(compiled(*args), getattr(ops, op)(*args))


# ------------------------------------------------------------------------------------------------------------------
# Argument validation
# ------------------------------------------------------------------------------------------------------------------

X2 = torch.zeros(4, 6)
OFFS = torch.tensor([2, 6], dtype=torch.int32)
BAD_CALLS = [
    ("x_not_tensor", TypeError, "must be a torch.Tensor", lambda: ops.rowwise_2d_scale_and_cast([[1.0]])),
    ("x_int", TypeError, "dtype bfloat16", lambda: ops.rowwise_2d_scale_and_cast(X2.to(torch.int32))),
    ("x_f64", TypeError, "dtype bfloat16", lambda: ops.per_group_colwise_scales(X2.double(), OFFS)),
    ("x_3d_for_2d_op", ValueError, "2-D", lambda: ops.rowwise_2d_scale_and_cast(torch.zeros(2, 2, 2))),
    ("x_2d_for_3d_op", ValueError, "3-D", lambda: ops.colwise_3d_scale_and_cast(X2)),
    ("x_2d_for_rhs_op", ValueError, "3-D", lambda: ops.rowwise_3d_transpose_rhs(X2)),
    ("fp8_dtype_bf16", TypeError, "fp8_dtype", lambda: ops.rowwise_2d_scale_and_cast(X2, torch.bfloat16)),
    ("fp8_dtype_str", TypeError, "fp8_dtype", lambda: ops.rowwise_3d_transpose_rhs(X2[None], "e4m3fn")),
    ("offs_int64", TypeError, "int32", lambda: ops.per_group_rowwise_scales(X2, OFFS.long())),
    ("offs_2d", ValueError, "1-D", lambda: ops.per_group_colwise_scales(X2, OFFS[None])),
    ("offs_list", TypeError, "offs must be a torch.Tensor", lambda: ops.per_group_rowwise_scales(X2, [2, 6])),
    ("offs_on_meta", ValueError, "device", lambda: ops.per_group_rowwise_scales(X2, OFFS.to("meta"))),
    (
        "dual_rows_differ",
        ValueError,
        "share their rows",
        lambda: ops.per_group_colwise_scales_dual(X2, torch.zeros(5, 2), OFFS),
    ),
    (
        "dual_dtypes_differ",
        TypeError,
        "same dtype",
        lambda: ops.per_group_colwise_scales_dual(X2, torch.zeros(4, 2, dtype=torch.bfloat16), OFFS),
    ),
    ("dual_x2_1d", ValueError, "x2 must be 2-D", lambda: ops.per_group_colwise_scales_dual(X2, torch.zeros(4), OFFS)),
]


@pytest.mark.parametrize(("error", "match", "call"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_invalid_arguments_raise_naming_the_problem(error, match, call):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("offs", "total", "match"),
    [
        ([3, 2], 5, "non-decreasing"),
        ([-1, 2], 5, "non-negative"),
        ([2, 6], 5, "exceeds"),
    ],
    ids=["decreasing", "negative", "past_total"],
)
def test_validate_offs_rejects_bad_values(offs, total, match):
    with pytest.raises(ValueError, match=match):
        ops.validate_offs(torch.tensor(offs, dtype=torch.int32), total)


def test_validate_offs_rejects_bad_dtype_and_rank():
    with pytest.raises(TypeError, match="int32"):
        ops.validate_offs(torch.tensor([1, 2]), 5)
    with pytest.raises(ValueError, match="1-D"):
        ops.validate_offs(torch.tensor([[1, 2]], dtype=torch.int32), 5)


@pytest.mark.parametrize("offs", [[], [0, 0], [0, 2, 2, 5], [3, 4]], ids=["no_groups", "all_empty", "mixed", "tail"])
def test_validate_offs_accepts_legal_offsets(offs):
    ops.validate_offs(torch.tensor(offs, dtype=torch.int32), 5)
