"""The cooperative column kernel (fp8moe.kernels._coop_columns) of colwise_3d_scale_and_cast: its bytes against
fp8ref where several chunks share a column, when colwise_3d_scale_and_cast takes it (fp8moe.configs.
colwise_3d_kernel), what it refuses, and a lost fold caught.

Every dense test of tests/test_kernels_dense.py runs it too (its ``colwise_3d-coop`` op), at shapes of one or two
chunks. Here K spans several chunks of the config the backend launches with (on a GPU, chunks of 256: the fused
launch, each chunk waiting for the others of its column block), and the chunks hold different special values.
"""

from __future__ import annotations

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU
from fp8moe import configs, replay
from fp8moe.backend import backend_for
from fp8moe.kernels import _coop_columns
from fp8moe.kernels._coop import coop_limit
from fp8ref import ops as ref
from fp8ref.formats import all_formats, fmt
from fp8ref.pytest_plugin import needs_interpreter
from fp8ref.testing import assert_same_bits

pytestmark = pytest.mark.interpreter

E4 = torch.float8_e4m3fn


def _chunks(backend, k: int) -> int:
    return -(-k // configs.COOP_COLUMNS.fixed(backend, {"E": 1, "K": k, "N": 1}).kwargs["CHUNK"])


def _special_columns(e: int, k: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Row-major (E, K, N) values over ~20 binades, with column specials placed in one chunk only: a NaN at the last
    position, an inf in the middle, a column of zeros, a column whose amax sits in its last element, -0.0 only."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn((e, k, n), generator=gen) * torch.exp2(torch.randint(-10, 11, (e, k, n), generator=gen).float())
    x[0, k - 1, 0] = float("nan")
    x[-1, k // 2, 1] = float("-inf")
    x[:, :, 2] = 0.0
    x[0, :, 3] = x[0, :, 3].clamp(-1, 1)
    x[0, k - 1, 3] = 3000.0
    x[-1, :, 4] = -0.0
    return x.to(dtype)


@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
@pytest.mark.parametrize("fp8_dtype", [f.dtype for f in all_formats()], ids=lambda d: fmt(d).name)
def test_columns_shared_by_several_chunks_match_the_reference(fp8_dtype, pow2, device):
    backend = backend_for(device)
    if fp8_dtype not in backend.fp8_dtypes:
        pytest.skip(f"{fmt(fp8_dtype).name} is not native on {backend.kind}/{backend.arch}")
    limit = coop_limit(backend, torch.device(device))
    k = 1000 if backend.kind != "interpreter" else 77  # several chunks: 4 of 256 on a GPU, 2 of 64 here
    assert 1 < _chunks(backend, k) <= limit
    x = _special_columns(2, k, 70, torch.bfloat16)
    with configs.forced_colwise_3d_kernel("coop"):
        q, s = fp8moe.colwise_3d_scale_and_cast(x.to(device), fp8_dtype, pow2)
    q_ref, s_ref = ref.colwise_3d_scale_and_cast(x, fp8_dtype, pow2)
    assert q.stride() == q_ref.stride()
    assert s.shape == s_ref.shape
    assert_same_bits(q, q_ref, what="q")
    assert_same_bits(s, s_ref, what="scales")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_other_input_dtypes_and_a_strided_view_match_the_reference(dtype, device):
    x = _special_columns(3, 77, 40, dtype)
    view = torch.stack([x, x], dim=3).flatten(2).to(device)[:, :, ::2]  # x itself, read along N with stride 2
    assert view.stride(2) == 2
    with configs.forced_colwise_3d_kernel("coop"):
        q, s = fp8moe.colwise_3d_scale_and_cast(view, E4, True)
    q_ref, s_ref = ref.colwise_3d_scale_and_cast(x, E4, True)
    assert_same_bits(q, q_ref, what="q")
    assert_same_bits(s, s_ref, what="scales")


@needs_interpreter  # the interpreter's config and limits
def test_the_kernel_is_chosen_by_the_setting_the_layout_and_k(monkeypatch):
    """ "rows" everywhere by default; "auto" takes the cooperative kernel for an input read along N with K of at
    least COOP_COLUMNS_MIN_K, the row kernel for the canonical layout (read along K) and shorter K; every setting
    falls back to rows for an empty K or one of more chunks than may wait for each other."""
    backend = backend_for("cpu")
    k = configs.COOP_COLUMNS_MIN_K
    row_major = torch.empty((2, k, 8))
    canonical = row_major.mT.contiguous().mT
    chunks = _chunks(backend, k)
    assert dict.fromkeys(configs.COLWISE_3D_KERNEL, "rows") == configs.COLWISE_3D_KERNEL
    assert configs.colwise_3d_kernel(backend, row_major, chunks) == "rows"
    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, "auto"))
    assert configs.colwise_3d_kernel(backend, row_major, chunks) == "coop"
    assert configs.colwise_3d_kernel(backend, canonical, chunks) == "rows"
    assert configs.colwise_3d_kernel(backend, torch.empty((2, k - 1, 8)), chunks) == "rows"
    assert configs.colwise_3d_kernel(backend, row_major, chunks - 1) == "rows"  # too many chunks to wait for
    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, "coop"))
    assert configs.colwise_3d_kernel(backend, canonical, chunks) == "coop"
    assert configs.colwise_3d_kernel(backend, torch.empty((2, 0, 8)), chunks) == "rows"


@needs_interpreter  # its config (chunks of 64) is the interpreter's
def test_the_launcher_refuses_more_chunks_than_may_wait(monkeypatch):
    """Called directly with K of two chunks where one may wait: a clear error before any launch."""
    monkeypatch.setattr(_coop_columns, "coop_limit", lambda backend, device: 1)
    x = torch.randn((1, 77, 8)).to(torch.bfloat16)
    q = torch.empty_strided((1, 77, 8), (77 * 8, 1, 77), dtype=E4)
    with pytest.raises(ValueError, match="2 chunks of 64: more than the 1"):
        _coop_columns.launch_coop_columns(x, q, torch.empty(8), E4, False, backend_for("cpu"))


@needs_interpreter  # the fold is a launch of its own there; a GPU fuses it with the cast
def test_a_cast_without_the_fold_of_the_other_chunks_is_caught(monkeypatch):
    """Test the tester: a launcher whose fold launch is lost (the interpreter's PHASE_AMAX) casts with amax 0, and
    the reference comparison fails; with the fold it passes."""
    x = _special_columns(2, 77, 40, torch.bfloat16)
    q_ref, _ = ref.colwise_3d_scale_and_cast(x, E4, False)
    real = configs.launch

    def without_fold(kernel, kernel_configs, backend, grid, config=None, **args):
        if args.get("PHASE") != _coop_columns.PHASE_AMAX:
            real(kernel, kernel_configs, backend, grid, config, **args)

    with configs.forced_colwise_3d_kernel("coop"):
        q, _ = fp8moe.colwise_3d_scale_and_cast(x, E4, False)
    assert_same_bits(q, q_ref, what="q")
    monkeypatch.setattr(configs, "launch", without_fold)
    with configs.forced_colwise_3d_kernel("coop"):
        q, _ = fp8moe.colwise_3d_scale_and_cast(x, E4, False)
    assert not torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


def test_forcing_a_kernel_restores_the_setting_and_forgets_plans_and_refuses_an_unknown_kind(monkeypatch):
    """fp8moe.configs.forced_colwise_3d_kernel: the kind on every backend inside, the setting as it was after, launch
    plans forgotten on the way in and out (a plan replays the kernel it recorded); an unknown kind is an error
    naming the choices, with nothing changed."""
    forgotten = []
    monkeypatch.setattr(replay, "forget", lambda: forgotten.append(dict(configs.COLWISE_3D_KERNEL)))
    before = configs.COLWISE_3D_KERNEL
    with configs.forced_colwise_3d_kernel("auto"):
        assert dict.fromkeys(before, "auto") == configs.COLWISE_3D_KERNEL
    assert configs.COLWISE_3D_KERNEL is before
    assert forgotten == [dict.fromkeys(before, "auto"), before]  # after the switch in, after the switch back
    forgotten.clear()
    with pytest.raises(ValueError, match=r"kind must be one of \('rows', 'auto', 'coop'\), got 'fast'"), \
            configs.forced_colwise_3d_kernel("fast"):  # fmt: skip
        pass
    assert configs.COLWISE_3D_KERNEL is before
    assert forgotten == []
