"""The dense ops (rowwise 2D, colwise 3D, 3D transpose rhs in both methods) against fp8ref.ops, bit for bit.

Calls the public fp8moe ops (validation, the torch.library op, the launcher, the kernel). Runs wherever Triton runs:
the interpreter on the CPU, with blocks sized from the problem (fp8moe.configs.interpreter_block: a reduced dim of at
most 32 is one block, a longer one and every row dim split into two or more), so the default shapes below take the
one-pass path (reduced dim 24) or the two-pass loop with a ragged tail (reduced dim 40 = 32 + 8), and have row tails
(20 = 16 + 4, 40 = 32 + 8); and natively on a GPU (fnuz formats skipped where the backend lacks them). Shapes stay
small because the interpreter runs every program instance in Python.

fp8 codes are compared as bytes and f32 scales as int32 bits, NaN as a class (any NaN code equals any NaN code:
the GPU's satfinite cast drops the NaN sign, SPEC §3), except where a test says "strict".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU
from fp8moe import configs
from fp8moe.backend import backend_for
from fp8moe.kernels import colwise_3d_scale_and_cast as colwise_3d_launcher
from fp8moe.kernels import rowwise_3d_transpose_rhs as transpose_launcher
from fp8ref import ops as ref
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations, unwritten_mask
from fp8ref.formats import all_formats, fmt
from fp8ref.testing import assert_same_bits

pytestmark = pytest.mark.interpreter

E4 = torch.float8_e4m3fn
FP8_DTYPES = [f.dtype for f in all_formats()]
INPUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@dataclass(frozen=True)
class DenseOp:
    """One dense op: the fp8moe callable, its fp8ref twin, the default test shape and the reduced dim."""

    name: str
    run: Callable
    reference: Callable
    shape: tuple[int, ...]
    reduce_dim: int

    @property
    def ndim(self) -> int:
        return len(self.shape)


OPS = [
    DenseOp("rowwise_2d", fp8moe.rowwise_2d_scale_and_cast, ref.rowwise_2d_scale_and_cast, (20, 40), 1),
    DenseOp("colwise_3d", fp8moe.colwise_3d_scale_and_cast, ref.colwise_3d_scale_and_cast, (2, 24, 40), 1),
    DenseOp(
        "transpose_rhs-atomic",
        functools.partial(fp8moe.rowwise_3d_transpose_rhs, method="atomic"),
        ref.rowwise_3d_transpose_rhs,
        (2, 24, 40),
        2,
    ),
    DenseOp(
        "transpose_rhs-reduction",
        functools.partial(fp8moe.rowwise_3d_transpose_rhs, method="reduction"),
        ref.rowwise_3d_transpose_rhs,
        (2, 24, 40),
        2,
    ),
]


def _pair_half(half: int) -> Callable:
    """One op's half of fp8moe.colwise_3d_and_transpose_rhs (0: colwise-3D, 1: the transpose): the fused kernel runs
    every dense test of the op it stands for."""

    def run(x, fp8_dtype=E4, round_scales_to_power_of_2=False):
        outs = fp8moe.colwise_3d_and_transpose_rhs(x, fp8_dtype, round_scales_to_power_of_2)
        return outs[2 * half : 2 * half + 2]

    return run


def _cooperative(run: Callable, setting: str, launcher, function: str, takes: Callable = lambda x: True) -> Callable:
    """``run`` with the cooperative slice kernel forced (fp8moe.configs.forced_kernel(``setting``, "coop")), so every
    dense test runs it: the reduced dims of 33-130 are two chunks in the interpreter, 32 or less one (its fold and
    cast are two launches there; a GPU runs them fused, the chunks waiting for each other). Fails where the
    cooperative launcher ``function``, as the op's ``launcher`` module calls it, did not run (only an empty input or
    one the kernel does not take, ``takes`` false, may skip it)."""

    def forced(x, fp8_dtype=E4, round_scales_to_power_of_2=False):
        launched = []
        real = getattr(launcher, function)

        def spy(*args):
            launched.append(args[0].shape)
            return real(*args)

        with configs.forced_kernel(setting, "coop"), mock.patch.object(launcher, function, spy):
            outs = run(x, fp8_dtype, round_scales_to_power_of_2)
        skips = 0 in x.shape or not takes(x)
        assert launched or skips, f"the cooperative kernel did not run for {tuple(x.shape)}, strides {x.stride()}"
        return outs

    return forced


OPS += [
    DenseOp("pair-colwise_3d", _pair_half(0), ref.colwise_3d_scale_and_cast, (2, 24, 40), 1),
    DenseOp("pair-transpose_rhs", _pair_half(1), ref.rowwise_3d_transpose_rhs, (2, 24, 40), 2),
    DenseOp(
        "colwise_3d-coop",
        _cooperative(
            fp8moe.colwise_3d_scale_and_cast,
            "COLWISE_3D_KERNEL",
            colwise_3d_launcher,
            "launch_coop_experts",
            configs.coop_columns_fit,
        ),
        ref.colwise_3d_scale_and_cast,
        (2, 40, 24),
        1,
    ),
    DenseOp(
        "transpose_rhs-atomic-coop",
        _cooperative(OPS[2].run, "TRANSPOSE_ATOMIC_KERNEL", transpose_launcher, "launch_coop_slices"),
        ref.rowwise_3d_transpose_rhs,
        (2, 24, 40),
        2,
    ),
]
OPS_2D = [op for op in OPS if op.ndim == 2]
OPS_3D = [op for op in OPS if op.ndim == 3]
TRANSPOSE_ATOMIC, TRANSPOSE_REDUCTION = OPS[2], OPS[3]
#: The atomic transpose's two kernels (fp8moe.configs.TRANSPOSE_ATOMIC_KERNEL).
TRANSPOSE_ATOMIC_KERNELS = [TRANSPOSE_ATOMIC, OPS[-1]]


def _op_id(op: DenseOp) -> str:
    return op.name


def _fmt_id(fp8_dtype: torch.dtype) -> str:
    return fmt(fp8_dtype).name


def _dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _skip_unless_native(fp8_dtype: torch.dtype, device: str) -> None:
    backend = backend_for(device)
    if fp8_dtype not in backend.fp8_dtypes:
        pytest.skip(f"{fmt(fp8_dtype).name} is not native on {backend.kind}/{backend.arch}")


def _values(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Normal values times 2^[-10, 10] per element: each slice spans ~20 binades, so scaled values reach fp8
    subnormals and round at every exponent. Within every input dtype's range (|x| < 2^14)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen) * torch.exp2(torch.randint(-10, 11, shape, generator=gen).float())
    return x.to(dtype)


def _assert_q_equal(q: torch.Tensor, expected: torch.Tensor, strict: bool = False) -> None:
    assert_same_bits(q, expected, strict_nan=strict, what="q")


def _assert_scales_equal(s: torch.Tensor, expected: torch.Tensor, strict: bool = False) -> None:
    assert_same_bits(s, expected, strict_nan=strict, what="scales")


def _check_against_reference(op: DenseOp, x: torch.Tensor, fp8_dtype, pow2: bool, device: str, x_dev=None):
    """Run ``op`` on ``x_dev`` (default: ``x`` moved to ``device``); compare with the reference of ``x``."""
    q, s = op.run(x.to(device) if x_dev is None else x_dev, fp8_dtype, pow2)
    q_ref, s_ref = op.reference(x, fp8_dtype, pow2)
    _assert_q_equal(q, q_ref)
    _assert_scales_equal(s, s_ref)


# ---------------------------------------------------------------------------------------------------------------
# Bitwise equality with the reference: formats, input dtypes, shapes, layouts
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES, ids=_fmt_id)
@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_every_fp8_format_with_and_without_pow2_matches_reference(op, fp8_dtype, pow2, device):
    _skip_unless_native(fp8_dtype, device)
    _check_against_reference(op, _values(op.shape, torch.bfloat16, seed=1), fp8_dtype, pow2, device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=_dtype_id)
@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_fp16_and_fp32_inputs_match_reference(op, dtype, device):
    # bf16 runs in every case of the format grid above; pow2 on here crosses the other input dtypes with it.
    _check_against_reference(op, _values(op.shape, dtype, seed=2), E4, True, device)


SHAPES_2D = [(1, 1), (1, 7), (7, 1), (33, 100), (100, 33), (5, 130), (130, 5), (16, 64), (17, 65)]
#: (2, 100, 12) and (1, 32, 64): K a multiple of 4, so colwise_3d stores words (fp8moe.kernels._span.pack_k), in two
#: passes with an edge chunk and in one; the others store bytes.
SHAPES_3D = [
    (1, 1, 1), (2, 7, 33), (1, 33, 7), (2, 100, 1), (1, 1, 130), (2, 130, 5), (1, 32, 64), (1, 33, 65), (2, 100, 12),
]  # fmt: skip
EMPTY_2D = [(0, 5), (5, 0), (0, 0)]
EMPTY_3D = [(0, 4, 5), (2, 0, 5), (2, 4, 0)]


def _shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@pytest.mark.parametrize(
    ("op", "shape"),
    [(op, s) for op in OPS for s in (SHAPES_2D if op.ndim == 2 else SHAPES_3D)],
    ids=lambda v: v.name if isinstance(v, DenseOp) else _shape_id(v),
)
def test_dims_off_block_multiples_and_smaller_than_a_block_match_reference(op, shape, device):
    _check_against_reference(op, _values(shape, torch.bfloat16, seed=3), E4, False, device)


@pytest.mark.parametrize(
    ("op", "shape"),
    [(op, s) for op in OPS for s in (EMPTY_2D if op.ndim == 2 else EMPTY_3D)],
    ids=lambda v: v.name if isinstance(v, DenseOp) else _shape_id(v),
)
def test_zero_size_dims_give_reference_shapes_and_eps_scales(op, shape, device):
    # A zero-length reduced dim leaves every slice empty: amax 0, the EPS-derived scale (fp8ref).
    _check_against_reference(op, _values(shape, torch.bfloat16, seed=3), E4, False, device)


def _layouts(op: DenseOp) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Named input memory layouts of the same logical tensor (all keep its values)."""
    if op.ndim == 2:
        return {
            "row_major": lambda x: x,
            "col_major": lambda x: x.t().contiguous().t(),
            "strided_slice": lambda x: torch.cat([x, x], dim=1)[:, ::2],
            "broadcast_row": lambda x: x[:1].expand(x.shape),
        }
    return {
        "contiguous": lambda x: x,
        "col_major_per_expert": lambda x: x.mT.contiguous().mT,
        "expert_innermost": lambda x: x.permute(1, 2, 0).contiguous().permute(2, 0, 1),
        "strided_slice": lambda x: torch.cat([x, x], dim=2)[:, :, ::2],
    }


@pytest.mark.parametrize(
    ("op", "layout"),
    [(op, name) for op in OPS for name in _layouts(op)],
    ids=lambda v: v.name if isinstance(v, DenseOp) else v,
)
def test_input_memory_layout_is_read_in_place_and_matches_reference(op, layout, device):
    make = _layouts(op)[layout]
    x = _values(op.shape, torch.bfloat16, seed=4)
    x_dev = make(x.to(device))
    assert x_dev.stride() == make(x).stride()
    _check_against_reference(op, make(x), E4, False, device, x_dev=x_dev)


# ---------------------------------------------------------------------------------------------------------------
# Special values
# ---------------------------------------------------------------------------------------------------------------

#: Slices of the special-value input, one per row of the (ROWS, 70) block, each a named case.
SPECIAL_ROWS = (
    "random",
    "nan_one",
    "nan_negative",
    "pos_inf",
    "neg_inf",
    "inf_and_nan",
    "all_zero",
    "neg_zero_only",
    "input_subnormals",
    "amax_near_pow2_scale",
    "amax_tiny",
    "amax_huge",
)


def _special_slices(dtype: torch.dtype) -> torch.Tensor:
    """(len(SPECIAL_ROWS), 70) rows, one special case per row; values chosen to exist in every input dtype."""
    length = 70
    x = _values((len(SPECIAL_ROWS), length), torch.float32, seed=5)
    row = dict(zip(SPECIAL_ROWS, range(len(SPECIAL_ROWS))))
    x[row["nan_one"], 66] = math.nan  # in the last block of a two-pass row, past the first tile
    x[row["nan_negative"], 3] = -math.nan
    x[row["pos_inf"], 40] = math.inf
    x[row["neg_inf"], 0] = -math.inf
    x[row["inf_and_nan"], 1] = math.inf
    x[row["inf_and_nan"], 69] = math.nan
    x[row["all_zero"]] = 0.0
    x[row["neg_zero_only"]] = -0.0
    smallest = {torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24, torch.float32: 2.0**-149}[dtype]
    x[row["input_subnormals"]] = smallest * torch.arange(-35, 35).float()
    # amax 1.75 (1 + 2^-23) in f32: e4m3fn/e5m2 scale ~1.1 ulp below 256 / 2^15, where the "log2" pow2 rule rounds
    # up (SPEC §4). bf16/f16 round it to 1.75: the scale is then exactly a power of two.
    x[row["amax_near_pow2_scale"]] = x[row["amax_near_pow2_scale"]].clamp(-1.0, 1.0)
    x[row["amax_near_pow2_scale"], 5] = -(1.75 + 2.0**-23)
    x[row["amax_tiny"]] *= 2.0**-24
    x[row["amax_huge"]] = x[row["amax_huge"]].clamp(-1.0, 1.0) * 60000.0
    return x.to(dtype)


def _special_input(op: DenseOp, dtype: torch.dtype) -> torch.Tensor:
    """The special rows as slices of ``op``'s reduced dim: (12, 70) for 2D, (2, 70, 6)/(2, 6, 70) for 3D."""
    slices = _special_slices(dtype)
    if op.ndim == 2:
        return slices
    experts = slices.view(2, 6, 70)
    return experts if op.reduce_dim == 2 else experts.mT.contiguous()


@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES, ids=_fmt_id)
@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_nan_inf_zero_and_subnormal_slices_match_reference(op, fp8_dtype, device):
    _skip_unless_native(fp8_dtype, device)
    for dtype in INPUT_DTYPES:
        _check_against_reference(op, _special_input(op, dtype), fp8_dtype, fp8_dtype == E4, device)


def _special_codes(op: DenseOp, q: torch.Tensor) -> torch.Tensor:
    """q's bytes as (12, 70): one row per special slice, in SPECIAL_ROWS order (3D q keeps slices along dim 1)."""
    codes = q.cpu().view(torch.uint8)
    return codes if op.ndim == 2 else codes.mT.reshape(len(SPECIAL_ROWS), -1)


@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_nan_slices_get_nan_scale_and_only_nan_codes(op, device):
    x = _special_input(op, torch.bfloat16).to(device)
    q, s = op.run(x, E4, False)
    scales = s.cpu().reshape(-1)  # every op's scales are in slice order
    codes = _special_codes(op, q)
    for name in ("nan_one", "nan_negative", "inf_and_nan"):
        i = SPECIAL_ROWS.index(name)
        assert math.isnan(scales[i].item()), f"{name}: scale {scales[i].item()} (NaN dropped)"
        assert set(codes[i].tolist()) <= set(fmt(E4).nan_codes), f"{name}: non-NaN codes {codes[i].unique()}"
    finite = [i for i, name in enumerate(SPECIAL_ROWS) if "nan" not in name]
    assert not bool(torch.isnan(scales[finite]).any())


@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_all_zero_slice_gets_eps_scale_and_inf_slice_zero_scale(op, device):
    x = _special_input(op, torch.bfloat16).to(device)
    scales = op.run(x, E4, False)[1].cpu().reshape(-1)
    for name in ("all_zero", "neg_zero_only"):
        assert scales[SPECIAL_ROWS.index(name)].item() == 447999985582080.0, name  # 448 / 1e-12 in f32
    for name in ("pos_inf", "neg_inf"):
        assert scales[SPECIAL_ROWS.index(name)].view(torch.int32).item() == 0, name  # +0.0


# ---------------------------------------------------------------------------------------------------------------
# The two transpose methods, NaN through the atomic max, int64 offsets
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomic", TRANSPOSE_ATOMIC_KERNELS, ids=_op_id)
@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
@pytest.mark.parametrize("shape", [(2, 24, 40), (2, 7, 33), (1, 33, 65)], ids=_shape_id)
def test_atomic_and_reduction_transpose_give_identical_bytes_strict(shape, pow2, atomic, device):
    special = _special_input(TRANSPOSE_REDUCTION, torch.bfloat16)
    for x in (_values(shape, torch.bfloat16, seed=6), special):
        x = x.to(device)
        q_a, s_a = atomic.run(x, E4, pow2)
        q_r, s_r = TRANSPOSE_REDUCTION.run(x, E4, pow2)
        _assert_q_equal(q_a, q_r, strict=True)
        _assert_scales_equal(s_a, s_r, strict=True)


@pytest.mark.parametrize("atomic", TRANSPOSE_ATOMIC_KERNELS, ids=_op_id)
def test_atomic_max_keeps_nan_over_inf_from_another_tile(atomic, device):
    # Each row spans several N-tiles of the amax kernel whatever config runs it (twice the widest CUDA tile plus 6:
    # >= 3 tiles on CUDA and ROCm, 3 chunks of the cooperative kernel's first candidate; the interpreter's block for
    # 1030 is 1024, tiles of 1024 and 6). Row 0: +inf in the
    # first tile, NaN in the last: an int32 max of the f32 bits must end at the NaN (0x7FC00000 > 0x7F800000); a float
    # max that drops NaN would end at inf (scale 0). Row 1: a NaN with its sign bit set (0xFFC0 in bf16), which
    # survives only because the kernel clears the sign bit before the int32 max.
    n = 2 * max(c.kwargs["BLOCK_N"] for c in (*configs.TRANSPOSE_AMAX.cuda, configs.TRANSPOSE_AMAX.rocm)) + 6
    x = torch.ones(1, 2, n, dtype=torch.bfloat16)
    x[0, 0, 0] = math.inf
    x[0, 0, n - 1] = math.nan
    x[0, 1, n - 1] = torch.tensor(-64, dtype=torch.int16).view(torch.bfloat16)  # 0xFFC0: -NaN
    x[0, 1, 0] = 3.0
    q, s = atomic.run(x.to(device), E4, False)
    assert torch.isnan(s.cpu()).tolist() == [[True, True]], f"scales {s.cpu().tolist()}"
    assert set(q.cpu().view(torch.uint8).unique().tolist()) <= set(fmt(E4).nan_codes)


@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_element_offsets_past_int32_are_computed_in_int64(op, device, tmp_path):
    """x's slices lie 2^30 + 64 elements apart in a sparse 4.3 GB file: a stride that fits int32 but whose multiples
    (2 * stride = 2^31 + 128) do not. Computed in int32, the third slice's offset wraps negative: the interpreter
    then reads unmapped memory (segfault) or another slice's bytes (mismatch)."""
    if backend_for(device).kind != "interpreter":
        pytest.skip("CPU test (sparse file); the GPU runs the > 2^31-element shapes in the GPU integration script")
    stride = 2**30 + 64
    inner = (3, 40) if op.ndim == 3 else (40,)
    path = tmp_path / "sparse.bin"
    numel = 2 * stride + math.prod(inner)
    with open(path, "wb") as f:
        f.truncate(numel * 2)  # bf16; unwritten pages of a sparse file cost no disk and read as zeros
    base = torch.from_file(str(path), shared=False, size=numel, dtype=torch.bfloat16)
    inner_strides = (40, 1) if op.ndim == 3 else (1,)
    x = base.as_strided((3, *inner), (stride, *inner_strides))
    x.copy_(_values(x.shape, torch.bfloat16, seed=7))
    if op.name == "colwise_3d":
        x = x.mT  # (E, N, K) with K contiguous: the canonical col-major layout, still 2^30 + 64 apart
    assert configs.needs_int64_index(x)
    _check_against_reference(op, x, E4, False, "cpu")


# ---------------------------------------------------------------------------------------------------------------
# Written elements and determinism
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_every_output_element_is_written(op, device):
    x = _values(op.shape, torch.bfloat16, seed=8).to(device)
    with poisoned_allocations(POISON_BYTES[0]):
        first = [t.cpu() for t in op.run(x, E4, False)]
    with poisoned_allocations(POISON_BYTES[1]):
        second = [t.cpu() for t in op.run(x, E4, False)]
    for name, a, b in zip(("q", "scales"), first, second):
        unwritten = unwritten_mask(a, b)
        assert not bool(unwritten.any()), f"unwritten {name} elements at {unwritten.nonzero()[:4].tolist()}"


@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_two_runs_give_identical_bytes(op, device):
    x = _special_input(op, torch.bfloat16).to(device)
    q1, s1 = op.run(x, E4, True)
    q2, s2 = op.run(x, E4, True)
    _assert_q_equal(q1, q2, strict=True)
    _assert_scales_equal(s1, s2, strict=True)
