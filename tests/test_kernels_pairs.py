"""The two fused pairs (fp8moe.kernels._pair): one input quantized two ways from two reads, each output bitwise the
op it stands for.

Most of their coverage runs through the single-op suites: tests/test_kernels_dense.py runs each half of
colwise_3d_and_transpose_rhs as its op (formats, dtypes, shapes, layouts, special values, written elements), and
tests/test_kernels_per_group.py runs the per-group half of rowwise_and_per_group_colwise as per_group_colwise_scales
(every group layout). Here: the activation pair's rowwise half (every row, those past offs[-1] included), both
halves of one call on the layouts the grouped GEMM feeds, which launches ran (the fused ones, or the two ops for a
layout the pair does not fuse), that no element of either output is left unwritten, and in the interpreter both
cast loops with several tiles per chunk.
"""

from __future__ import annotations

import pytest
import torch

import fp8moe
from fp8moe import configs, replay
from fp8moe.backend import backend_for
from fp8moe.kernels import _pair
from fp8ref import ops as ref
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations, unwritten_mask
from fp8ref.testing import assert_same_bits

E4 = torch.float8_e4m3fn

#: End offsets over 96 rows: 16-aligned groups (the grouped GEMM's, word stores), unaligned ones (byte stores),
#: empty groups, rows past offs[-1], one group holding every row (several chunks in the interpreter).
LAYOUTS = {
    "aligned": [16, 48, 48, 96],
    "unaligned": [5, 40, 41, 90],
    "tail": [32, 32, 64],
    "one_group": [96],
    "empty_first_and_last": [0, 96, 96],
}


def _values(shape, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-8, 9, shape, generator=g).float())
    return x.to(dtype)


def _offs(ends, device):
    return torch.tensor(ends, dtype=torch.int32, device=device)


def _launched(run) -> set[str]:
    """Names of the kernel configs (fp8moe.configs) the call launched."""
    configs.LAST_CONFIG.clear()
    replay.forget()  # a replayed call reports no launch
    run()
    return set(configs.LAST_CONFIG)


def _assert_activation_pair_bits(x, offs, pow2=False, what=""):
    """Both halves of rowwise_and_per_group_colwise(x, offs) bitwise their references: the rowwise one on every row
    (those past offs[-1] too), the per-group one on the rows up to offs[-1], its strides included."""
    q_r, s_r, q_c, s_c = fp8moe.rowwise_and_per_group_colwise(x, offs, E4, pow2)
    r_q, r_s = ref.rowwise_2d_scale_and_cast(x.cpu(), E4, pow2)
    c_q, c_s = ref.per_group_colwise_scales(x.cpu(), offs.cpu(), E4, pow2)
    end = int(offs[-1])
    assert q_c.stride() == c_q.stride()
    pairs = ((q_r, r_q, "rowwise q"), (s_r, r_s, "rowwise scales"), (q_c[:end], c_q[:end], "per-group q"),
             (s_c, c_s, "per-group scales"))  # fmt: skip
    for got, want, name in pairs:
        assert_same_bits(got, want, what=f"{what}{name}")


def _assert_weight_pair_bits(x):
    """colwise_3d_and_transpose_rhs(x) bitwise colwise_3d_scale_and_cast's and rowwise_3d_transpose_rhs' references."""
    got = fp8moe.colwise_3d_and_transpose_rhs(x)
    want = (*ref.colwise_3d_scale_and_cast(x.cpu()), *ref.rowwise_3d_transpose_rhs(x.cpu()))
    for g, w, name in zip(got, want, ("colwise q", "colwise scales", "transpose q", "transpose scales"), strict=True):
        assert_same_bits(g, w, what=name)


def _sparse_bf16(tmp_path, device) -> tuple[torch.Tensor, int]:
    """A flat bf16 tensor over a sparse 4.3 GB file (unwritten pages cost no disk and read as zeros) and the stride
    2^30 + 64 that makes the third row's offset, 2^31 + 128, wrap negative in int32. CPU only."""
    if backend_for(device).kind != "interpreter":
        pytest.skip("CPU test (sparse file); the GPU runs the > 2^31-element shapes in the GPU integration script")
    stride = 2**30 + 64
    path = tmp_path / "sparse.bin"
    numel = 2 * stride + 40
    with open(path, "wb") as f:
        f.truncate(numel * 2)
    return torch.from_file(str(path), shared=False, size=numel, dtype=torch.bfloat16), stride


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_activation_pair_matches_both_references_bitwise(layout, dtype, device):
    x = _values((96, 40), dtype, seed=1)
    _assert_activation_pair_bits(x.to(device), _offs(LAYOUTS[layout], device), pow2=dtype == torch.float32)


def test_activation_pair_runs_fused_for_unit_stride_rows_and_the_two_ops_otherwise(device):
    x = _values((96, 40)).to(device)
    offs = _offs(LAYOUTS["aligned"], device)
    fused = {"rowwise_and_per_group_colwise_amax", "colwise_3d_and_transpose_rhs_scales"}
    assert fused <= _launched(lambda: fp8moe.rowwise_and_per_group_colwise(x, offs))
    column_major = x.t().contiguous().t()
    launched = _launched(lambda: fp8moe.rowwise_and_per_group_colwise(column_major, offs))
    assert not launched & fused
    assert "rowwise_scale_and_cast" in launched


@pytest.mark.parametrize("layout", ["row_major", "col_major_per_expert"])
def test_weight_pair_runs_fused_for_unit_stride_experts_and_the_two_ops_otherwise(layout, device):
    x = _values((2, 48, 40)).to(device)
    x = x if layout == "row_major" else x.mT.contiguous().mT
    fused = {"colwise_3d_and_transpose_rhs_amax", "colwise_3d_and_transpose_rhs_cast"}
    assert fused <= _launched(lambda: fp8moe.colwise_3d_and_transpose_rhs(x))
    expert_innermost = x.permute(1, 2, 0).contiguous().permute(2, 0, 1)
    assert not _launched(lambda: fp8moe.colwise_3d_and_transpose_rhs(expert_innermost)) & fused


def _assert_all_written(run, jagged_end: int | None = None):
    """Every element of every output written (the per-group q's rows past ``jagged_end`` excepted)."""
    with poisoned_allocations(POISON_BYTES[0]):
        first = [t.cpu() for t in run()]
    with poisoned_allocations(POISON_BYTES[1]):
        second = [t.cpu() for t in run()]
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        unwritten = unwritten_mask(a, b)
        if jagged_end is not None and i == 2:
            unwritten = unwritten[:jagged_end]
        assert not bool(unwritten.any()), f"output {i}: unwritten at {unwritten.nonzero()[:4].tolist()}"


def test_activation_pair_writes_every_element_of_both_outputs(device):
    x = _values((96, 40)).to(device)
    offs = _offs(LAYOUTS["tail"], device)
    _assert_all_written(lambda: fp8moe.rowwise_and_per_group_colwise(x, offs), jagged_end=LAYOUTS["tail"][-1])


@pytest.mark.parametrize("layout", ["row_major", "col_major_per_expert"])
def test_weight_pair_writes_every_element_of_both_outputs(layout, device):
    x = _values((3, 48, 40)).to(device)
    x = x if layout == "row_major" else x.mT.contiguous().mT
    _assert_all_written(lambda: fp8moe.colwise_3d_and_transpose_rhs(x))


@pytest.mark.parametrize("layout", ["row_major", "col_major_per_expert"])
def test_weight_pair_column_offsets_past_int32_are_computed_in_int64(layout, device, tmp_path):
    """One expert whose strided dim steps 2^30 + 64 elements (a sparse 4.3 GB file): the third position's offset,
    col * stride = 2^31 + 128, wraps negative in int32. Every column index of the pair's kernels derives from the
    chunk start, which is int64 when offsets need it (the amax kernel's did not, before)."""
    base, stride = _sparse_bf16(tmp_path, device)
    # row-major: (1, K=3, N=40), unit stride along N, K rows 2^30 + 64 apart; column-major: the transpose view.
    x = base.as_strided((1, 3, 40), (base.numel(), stride, 1))
    x.copy_(_values(x.shape, seed=7))
    if layout == "col_major_per_expert":
        x = x.mT  # (1, 40, 3): unit stride along K, N columns 2^30 + 64 apart
    assert configs.needs_int64_index(x)
    launched = _launched(lambda: fp8moe.colwise_3d_and_transpose_rhs(x))
    assert "colwise_3d_and_transpose_rhs_amax" in launched  # the fused path ran
    _assert_weight_pair_bits(x)


def test_activation_pair_row_offsets_past_int32_are_computed_in_int64(device, tmp_path):
    """Rows 2^30 + 64 elements apart (a sparse 4.3 GB file): the third row's offset wraps negative in int32."""
    base, stride = _sparse_bf16(tmp_path, device)
    x = base.as_strided((3, 40), (stride, 1))
    x.copy_(_values(x.shape, seed=8))
    offs = _offs([1, 3], "cpu")
    assert configs.needs_int64_index(x)
    assert "rowwise_and_per_group_colwise_amax" in _launched(lambda: fp8moe.rowwise_and_per_group_colwise(x, offs))
    _assert_activation_pair_bits(x, offs)


@pytest.fixture
def interpreter_pair_loop(device, monkeypatch):
    """Set the interpreter's chunk length (tiles) of both pairs (fp8moe.kernels._pair), with no launch plan recorded
    under another value surviving the test."""
    if backend_for(device).kind != "interpreter":
        pytest.skip("sets the interpreter's launch config; the GPU autotunes over every chunk length")

    def use(chunk_tiles: int) -> None:
        monkeypatch.setattr(_pair, "INTERPRETER_CHUNK_TILES", chunk_tiles)
        replay.forget()

    yield use
    replay.forget()


@pytest.mark.parametrize("chunk_tiles", [1, 3])
def test_both_pairs_with_one_or_several_tiles_per_chunk(chunk_tiles, interpreter_pair_loop):
    """Chunks of three 32-position tiles make the amax kernels' next-tile loads carry real data and the cast loops
    run several turns (with one tile per chunk those loads are all masked); bitwise both references, for both
    pairs."""
    interpreter_pair_loop(chunk_tiles)
    x = _values((2, 96, 40), seed=3)  # Q = K = 96: three tiles, 16-aligned (the word-store loop)
    for weight in (x, x.mT.contiguous().mT):
        _assert_weight_pair_bits(weight)
    a = _values((96, 40), seed=4)
    for layout in ("aligned", "unaligned", "one_group"):
        _assert_activation_pair_bits(a, _offs(LAYOUTS[layout], "cpu"), what=f"{layout}: ")
