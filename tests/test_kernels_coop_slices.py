"""The cooperative slice kernel (fp8moe.kernels._coop_slices) in both ops that run it, colwise_3d_scale_and_cast
(the columns of an input read along N) and rowwise_3d_transpose_rhs's method "atomic" (the rows): its bytes against
fp8ref where several chunks share a slice, when each op takes it (fp8moe.configs.colwise_3d_kernel,
transpose_atomic_kernel), what the launcher refuses, and a lost fold caught.

Every dense test of tests/test_kernels_dense.py runs it too (its ``colwise_3d-coop`` and
``transpose_rhs-atomic-coop`` ops), at shapes of one or two chunks. Here the reduced dim spans several chunks of
the config the backend launches with (on a GPU: the fused launch, each chunk waiting for the others of its slice
block), and the chunks hold different special values.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU
from fp8moe import configs, replay
from fp8moe.backend import Backend, backend_for
from fp8moe.kernels import _coop_slices
from fp8moe.kernels._coop import coop_limit
from fp8ref import ops as ref
from fp8ref.formats import all_formats, fmt
from fp8ref.pytest_plugin import needs_interpreter
from fp8ref.testing import assert_same_bits

pytestmark = pytest.mark.interpreter

E4 = torch.float8_e4m3fn


@dataclass(frozen=True)
class CoopOp:
    """One op that runs the cooperative slice kernel: its fp8moe callable and fp8ref twin (each ``(x, fp8_dtype,
    pow2)``), the kernel setting that forces the kernel, its config table, and how a slice lies in the op's (E, K, N)
    input (``slices_axis``: the axis a slice runs along, 1 for columns, 2 for rows)."""

    name: str
    run: object
    reference: object
    setting: str
    table: configs.KernelConfigs
    slices_axis: int

    def input_of(self, slices: torch.Tensor) -> torch.Tensor:
        """The op's contiguous (E, K, N) input whose slices are those of ``slices`` (E, M, L)."""
        return slices.mT.contiguous() if self.slices_axis == 1 else slices.contiguous()

    def chunks(self, backend, length: int) -> int:
        """Chunks per slice of ``length`` under the config ``backend`` launches with."""
        return configs.coop_chunks(self.table, backend, (1, 1, length))


COLUMNS = CoopOp(
    "colwise_3d",
    fp8moe.colwise_3d_scale_and_cast,
    ref.colwise_3d_scale_and_cast,
    "COLWISE_3D_KERNEL",
    configs.COOP_COLUMNS,
    1,
)
ROWS = CoopOp(
    "transpose_rhs-atomic",
    functools.partial(fp8moe.rowwise_3d_transpose_rhs, method="atomic"),
    ref.rowwise_3d_transpose_rhs,
    "TRANSPOSE_ATOMIC_KERNEL",
    configs.COOP_TRANSPOSE,
    2,
)
OPS = [COLUMNS, ROWS]


def _special_slices(e: int, m: int, length: int, dtype: torch.dtype) -> torch.Tensor:
    """(E, M, L) values over ~20 binades, with slice specials placed in one chunk only: a NaN at the last position, an
    inf in the middle, a slice of zeros, a slice whose amax sits in its last element, -0.0 only."""
    gen = torch.Generator().manual_seed(11)
    shape = (e, m, length)
    x = torch.randn(shape, generator=gen) * torch.exp2(torch.randint(-10, 11, shape, generator=gen).float())
    x[0, 0, length - 1] = float("nan")
    x[-1, 1, length // 2] = float("-inf")
    x[:, 2, :] = 0.0
    x[0, 3, :] = x[0, 3, :].clamp(-1, 1)
    x[0, 3, length - 1] = 3000.0
    x[-1, 4, :] = -0.0
    return x.to(dtype)


def _assert_matches_reference(op: CoopOp, x: torch.Tensor, view: torch.Tensor, fp8_dtype, pow2) -> None:
    """The op on ``view`` (x, on the device, in any layout) under the cooperative kernel: fp8ref's bytes for x."""
    with configs.forced_kernel(op.setting, "coop"):
        q, s = op.run(view, fp8_dtype, pow2)
    q_ref, s_ref = op.reference(x, fp8_dtype, pow2)
    assert q.stride() == q_ref.stride()
    assert s.shape == s_ref.shape
    assert_same_bits(q, q_ref, what="q")
    assert_same_bits(s, s_ref, what="scales")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
@pytest.mark.parametrize("fp8_dtype", [f.dtype for f in all_formats()], ids=lambda d: fmt(d).name)
def test_slices_shared_by_several_chunks_match_the_reference(fp8_dtype, pow2, op, device):
    backend = backend_for(device)
    if fp8_dtype not in backend.fp8_dtypes:
        pytest.skip(f"{fmt(fp8_dtype).name} is not native on {backend.kind}/{backend.arch}")
    # several chunks, the last partial: on a GPU 2.x times the BLOCK_L of a one-element slice's tile (256 columns:
    # 4 chunks; 2048 rows, whose longer rows then take 1024: 5 chunks), here 2 of 64 (the interpreter sizes its
    # tiles from L)
    first_block = configs.coop_config(op.table, backend, (1, 1, 1)).kwargs["BLOCK_L"]
    length = 2 * first_block + 276 if backend.kind != "interpreter" else 77
    assert 1 < op.chunks(backend, length) <= coop_limit(backend, torch.device(device))
    x = op.input_of(_special_slices(2, 70, length, torch.bfloat16))
    _assert_matches_reference(op, x, x.to(device), fp8_dtype, pow2)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_run_matches_the_reference_where_each_slices_amax_sits_in_its_last_chunk(op, device):
    """Run after run on one input whose every slice has its amax, a spike of 1000 over N(0, 1), among its last 128
    positions: in its last chunk, whose program takes the block's last ticket and most often arrives last, while the
    others wait to read its fold. A fold that can land after the arrival announcing it (no barrier before a
    one-thread arrival: the slice kernel compiled by Triton 3.6 until session 48, fp8moe.kernels._coop.arrive) makes
    the chunks that read the amax without it cast every code about 250x too large. 40 runs of 8 x 512 slices of
    16 chunks (columns) or 2-4 (rows) on a GPU; one in the interpreter, where the fold and the cast are two launches
    (benchmarks/probe_coop_race.py runs thousands on larger shapes, with and without the barrier)."""
    backend = backend_for(device)
    gpu = backend.kind != "interpreter"
    e, m, length = (8, 512, 4096) if gpu else (1, 8, 128)
    assert 1 < op.chunks(backend, length) <= coop_limit(backend, torch.device(device))
    gen = torch.Generator().manual_seed(5)
    slices = torch.randn(e, m, length, generator=gen)
    last = length - 1 - torch.randint(0, min(128, length), (e, m), generator=gen)
    slices[torch.arange(e)[:, None], torch.arange(m)[None, :], last] = 1000.0
    x = op.input_of(slices.to(torch.bfloat16))
    q_ref, s_ref = (t.to(device) for t in op.reference(x, E4, False))
    view = x.to(device)
    with configs.forced_kernel(op.setting, "coop"):
        for _ in range(40 if gpu else 1):
            q, s = op.run(view, E4, False)
            same_bytes = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
            if not (same_bytes and torch.equal(s.view(torch.int32), s_ref.view(torch.int32))):
                assert_same_bits(q, q_ref, what="q")  # says where
                assert_same_bits(s, s_ref, what="scales")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_other_input_dtypes_and_a_strided_view_match_the_reference(dtype, op, device):
    x = op.input_of(_special_slices(3, 40, 77, dtype))
    view = torch.stack([x, x], dim=3).flatten(2).to(device)[:, :, ::2]  # x itself, read along N with stride 2
    assert view.stride(2) == 2
    _assert_matches_reference(op, x, view, E4, True)


@needs_interpreter  # the interpreter's config and limits
def test_colwise_3d_takes_the_kernel_by_the_setting_the_layout_and_k(monkeypatch):
    """ "auto" on CUDA and the interpreter by default, "rows" on ROCm; "auto" takes the cooperative kernel for an
    input read along N with K of at least COOP_COLUMNS_MIN_K, the row kernel for the canonical layout (read along K)
    and shorter K; every setting falls back to rows for an empty K or one of more chunks than may wait for each
    other."""
    backend = backend_for("cpu")
    k = configs.COOP_COLUMNS_MIN_K
    row_major = torch.empty((2, k, 8))
    canonical = row_major.mT.contiguous().mT
    chunks = COLUMNS.chunks(backend, k)
    assert configs.COLWISE_3D_KERNEL == {"cuda": "auto", "rocm": "rows", "interpreter": "auto"}
    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, "rows"))
    assert configs.colwise_3d_kernel(backend, row_major, chunks) == "rows"
    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, "auto"))
    assert configs.colwise_3d_kernel(backend, row_major, chunks) == "coop"
    assert configs.colwise_3d_kernel(backend, canonical, chunks) == "rows"
    assert configs.colwise_3d_kernel(backend, torch.empty((2, k - 1, 8)), chunks) == "rows"
    assert configs.colwise_3d_kernel(backend, row_major, chunks - 1) == "rows"  # too many chunks to wait for
    monkeypatch.setattr(configs, "COLWISE_3D_KERNEL", dict.fromkeys(configs.COLWISE_3D_KERNEL, "coop"))
    assert configs.colwise_3d_kernel(backend, canonical, chunks) == "coop"
    assert configs.colwise_3d_kernel(backend, torch.empty((2, 0, 8)), chunks) == "rows"


def _expert_layouts(e: int, k: int, n: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """(E, K, N) inputs of the colwise ops on ``device`` that the jagged launch reads with per-expert offsets
    (UNIFORM): experts padded apart (x.stride(0) > K * x.stride(1)), experts interleaved with the rows
    (x.stride(0) < K * x.stride(1), a negative offset per expert), and the canonical layout (read along K)."""
    base = torch.randn((e, k + 3, n), generator=torch.Generator().manual_seed(5)).to(torch.bfloat16).to(device)
    return {
        "padded": base[:, :k, :],
        "interleaved": base[:, :k, :].permute(1, 0, 2).contiguous().permute(1, 0, 2),
        "canonical": base[:, :k, :].mT.contiguous().mT,
    }


@pytest.mark.parametrize("layout", ["padded", "interleaved", "canonical"])
def test_colwise_3d_reads_each_expert_from_its_own_block_in_any_layout(layout, device):
    """The jagged launch of colwise 3D (fp8moe.kernels._coop_slices.launch_coop_experts) moves x and q to each
    expert's block: with the experts apart or interleaved (K a multiple of 16, several chunks, E = 3) its bytes are
    fp8ref's; a launch that read every expert from the first block would not be."""
    backend = backend_for(device)
    k = 544 if backend.kind != "interpreter" else 160
    assert COLUMNS.chunks(backend, k) > 1
    x = _expert_layouts(3, k, 40, device)[layout]
    assert configs.coop_columns_fit(x)
    assert x.stride(0) != k * x.stride(1)
    _assert_matches_reference(COLUMNS, x.cpu(), x, E4, False)


def _expert_chunks(e: int, k: int, block_l: int) -> list[int]:
    """Chunks per expert of colwise 3D's jagged launch: expert g's positions g*K to (g+1)*K, its chunks from the
    16-aligned position at or before g*K."""
    return [-(-((g + 1) * k - g * k // 16 * 16) // block_l) for g in range(e)]


@pytest.mark.parametrize("limit", [1, 2, 0])
def test_experts_longer_than_may_wait_fold_then_are_cast_by_the_long_pass(limit, device):
    """Colwise 3D's jagged launch with K not a multiple of 16 (the experts' blocks following each other), so that
    the last expert, starting 15 past a multiple of 16, takes one chunk more than the others; the wait bound at
    ``limit``: experts of more chunks fold without waiting and PHASE_LONG casts them, fp8ref's bytes either way; with
    every expert long (limit 0) a fused launch alone writes no code (the poisoned output stays). The interpreter
    runs limit 0 only (a wait would never end there)."""
    backend = backend_for(device)
    if backend.kind == "interpreter" and limit > 0:
        pytest.skip("an expert within the limit waits in the fused launch, which the interpreter cannot run")
    k = 245 if backend.kind != "interpreter" else 117  # 4 experts: 1,1,1,2 chunks of 256; 2,2,2,3 of 64
    block_l = configs.coop_config(configs.COOP_COLUMNS, backend, (4, 24, k)).kwargs["BLOCK_L"]
    chunks = _expert_chunks(4, k, block_l)
    assert chunks[:3] == [chunks[0]] * 3
    assert chunks[3] == chunks[0] + 1
    x = torch.randn((4, k, 24), generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    q_ref, s_ref = ref.colwise_3d_scale_and_cast(x, E4, False)
    fused, long_pass = _coop_slices.PHASE_FUSED, _coop_slices.PHASE_LONG
    outputs = []
    for phases in ([fused], [fused, long_pass]):
        poisoned = torch.full((4 * k * 24,), 0x55, dtype=torch.uint8, device=device).view(E4)
        q = poisoned.as_strided((4, k, 24), (k * 24, 1, k))
        s = torch.empty(4 * 24, device=device)
        _coop_slices.launch_coop_experts(x.to(device), q, s, E4, False, backend, phases=phases, limit=limit)
        outputs.append((q.cpu(), s.cpu()))
    assert_same_bits(outputs[1][0], q_ref, what="q, fused then long")
    assert_same_bits(outputs[1][1], s_ref.view(-1), what="scales, fused then long")
    if limit == 0:
        assert bool((outputs[0][0].view(torch.uint8) == 0x55).all())


@needs_interpreter  # a sparse file on the CPU; the GPU integration script runs > 2^31-element shapes
def test_experts_whose_offsets_pass_int32_index_in_int64(tmp_path, monkeypatch):
    """Colwise 3D's jagged launch with a gap of 2^30 + 64 elements between the experts' blocks in a sparse 4.3 GB
    file (K a multiple of 16, so the launch takes them apart): expert 2's offset, 2 * stride_xg, passes int32, so the
    launch must index in int64 (INT64_INDEX), and its bytes are fp8ref's. Computed in int32 the offset wraps and the
    interpreter reads unmapped memory or another expert's bytes."""
    k, n = 32, 40
    stride = 2**30 + 64 + k * n  # stride_xg = stride - K * N = 2^30 + 64
    path = tmp_path / "sparse.bin"
    numel = 2 * stride + k * n
    with open(path, "wb") as f:
        f.truncate(numel * 2)  # bf16; unwritten pages of a sparse file cost no disk and read as zeros
    base = torch.from_file(str(path), shared=False, size=numel, dtype=torch.bfloat16)
    x = base.as_strided((3, k, n), (stride, n, 1))
    x.copy_(torch.randn((3, k, n), generator=torch.Generator().manual_seed(9)).to(torch.bfloat16))
    assert configs.needs_int64_index(x)
    assert configs.coop_columns_fit(x)
    indexing = []
    real = configs.launch

    def spy(kernel, kernel_configs, backend, grid, config=None, **args):
        indexing.append(args.get("INT64_INDEX"))
        real(kernel, kernel_configs, backend, grid, config, **args)

    monkeypatch.setattr(configs, "launch", spy)
    with configs.forced_kernel("COLWISE_3D_KERNEL", "coop"):
        q, scales = fp8moe.colwise_3d_scale_and_cast(x, E4, False)
    assert indexing == [True, True]  # the fold and the cast
    q_ref, scales_ref = ref.colwise_3d_scale_and_cast(x, E4, False)
    assert_same_bits(q, q_ref, what="q")
    assert_same_bits(scales, scales_ref, what="scales")


@needs_interpreter  # INT64_INDEX forced: the interpreter runs the int64 code on small tensors
def test_every_cooperative_launch_sizes_its_index_by_its_workspace_too(monkeypatch):
    """The workspace's counters lie _LINE words apart, so its offsets can pass int32 where x's do not (the atomic
    transpose's 8-row blocks: 4 words per row of x): every cooperative launch asks needs_int64_index about its
    workspace as well as x, q and the scales, and with INT64_INDEX on (forced here) each writes fp8ref's bytes,
    the counter and amax offsets computed in int64."""
    seen = []

    def always(*tensors):
        seen.append(tensors)
        return True

    monkeypatch.setattr(configs, "needs_int64_index", always)
    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, "coop"))
    gen = torch.Generator().manual_seed(11)
    x3 = torch.randn((2, 48, 40), generator=gen).to(torch.bfloat16)
    x2 = torch.randn((96, 24), generator=gen).to(torch.bfloat16)
    offs = torch.tensor([30, 30, 96], dtype=torch.int32)
    calls = {
        "atomic transpose": (
            lambda: fp8moe.rowwise_3d_transpose_rhs(x3, E4, False, method="atomic"),
            lambda: ref.rowwise_3d_transpose_rhs(x3, E4, False),
        ),
        "colwise 3D": (
            lambda: fp8moe.colwise_3d_scale_and_cast(x3, E4, False),
            lambda: ref.colwise_3d_scale_and_cast(x3, E4, False),
        ),
        "per-group colwise": (
            lambda: fp8moe.per_group_colwise_scales(x2, offs, E4, False),
            lambda: ref.per_group_colwise_scales(x2, offs, E4, False),
        ),
    }
    with configs.forced_kernel("COLWISE_3D_KERNEL", "coop"), configs.forced_kernel("TRANSPOSE_ATOMIC_KERNEL", "coop"):
        for name, (kernel, reference) in calls.items():
            seen.clear()
            replay.forget()
            got, want = kernel(), reference()
            for g, w, what in zip(got, want, ("q", "scales"), strict=True):
                assert_same_bits(g, w, what=f"{name} {what}")
            workspaces = [t for tensors in seen for t in tensors if t.dtype == torch.int32 and t.ndim == 1]
            assert workspaces, f"{name}: no launch asked about its workspace"
    replay.forget()


@needs_interpreter  # the interpreter's config
def test_colwise_3d_leaves_unaligned_experts_apart_to_the_row_kernel():
    """With K not a multiple of 16 an expert's chunks load whole runs of 16 reaching into its neighbours' positions,
    which for experts apart are not x's: colwise_3d_kernel takes the row kernel there under every setting, and the
    launcher refuses such an x; experts that follow each other, or one expert, take the cooperative kernel."""
    backend = backend_for("cpu")
    layouts = _expert_layouts(3, 77, 8)
    with configs.forced_kernel("COLWISE_3D_KERNEL", "coop"):
        for name in ("padded", "interleaved", "canonical"):
            assert not configs.coop_columns_fit(layouts[name]), name
            assert configs.colwise_3d_kernel(backend, layouts[name], 64) == "rows", name
        assert configs.colwise_3d_kernel(backend, layouts["padded"].contiguous(), 64) == "coop"
        assert configs.colwise_3d_kernel(backend, layouts["padded"][:1], 64) == "coop"
        q = torch.empty_strided((3, 77, 8), (77 * 8, 1, 77), dtype=E4)
        with pytest.raises(ValueError, match="K = 77 is empty, or not a multiple of 16 with the experts' blocks apart"):
            _coop_slices.launch_coop_experts(layouts["padded"], q, torch.empty(24), E4, False, backend)
        (q, scales), (q_ref, scales_ref) = (
            fp8moe.colwise_3d_scale_and_cast(layouts["padded"], E4, False),
            ref.colwise_3d_scale_and_cast(layouts["padded"], E4, False),
        )
    assert_same_bits(q, q_ref, what="q")
    assert_same_bits(scales, scales_ref, what="scales")


@needs_interpreter  # the interpreter's config and limits
def test_the_atomic_transpose_takes_the_kernel_by_the_setting_and_n(monkeypatch):
    """ "coop" on CUDA and the interpreter by default, "two_launch" on ROCm; "coop" takes the cooperative kernel in
    any layout, and falls back to the two launches for an empty N (no chunk would write the scales) or one of more
    chunks than may wait."""
    backend = backend_for("cpu")
    x = torch.empty((2, 8, 100))
    chunks = ROWS.chunks(backend, 100)
    assert configs.TRANSPOSE_ATOMIC_KERNEL == {"cuda": "coop", "rocm": "two_launch", "interpreter": "coop"}
    two_launch = dict.fromkeys(configs.TRANSPOSE_ATOMIC_KERNEL, "two_launch")
    monkeypatch.setattr(configs, "TRANSPOSE_ATOMIC_KERNEL", two_launch)
    assert configs.transpose_atomic_kernel(backend, x, chunks) == "two_launch"
    monkeypatch.setattr(configs, "TRANSPOSE_ATOMIC_KERNEL", dict.fromkeys(configs.TRANSPOSE_ATOMIC_KERNEL, "coop"))
    assert configs.transpose_atomic_kernel(backend, x, chunks) == "coop"
    assert configs.transpose_atomic_kernel(backend, x.mT.contiguous().mT, chunks) == "coop"
    assert configs.transpose_atomic_kernel(backend, x, chunks - 1) == "two_launch"  # too many chunks to wait for
    assert configs.transpose_atomic_kernel(backend, torch.empty((2, 8, 0)), chunks) == "two_launch"


def test_the_atomic_transpose_of_an_empty_n_writes_its_scales_under_either_kernel(device):
    """N = 0: no element, yet K scales per expert, each the scale of amax 0 (fp8ref's rule); the cooperative setting
    leaves it to the two launches, whose cast kernel writes them."""
    x = torch.empty((2, 3, 0), dtype=torch.bfloat16)
    q_ref, s_ref = ROWS.reference(x, E4, False)
    for kind in configs.TRANSPOSE_ATOMIC_KERNELS:
        with configs.forced_kernel("TRANSPOSE_ATOMIC_KERNEL", kind):
            q, s = ROWS.run(x.to(device), E4, False)
        assert q.shape == q_ref.shape, kind
        assert_same_bits(s, s_ref, what=f"scales under {kind}")


@needs_interpreter  # its configs (chunks of 64) are the interpreter's
def test_the_launcher_refuses_more_chunks_than_may_wait_an_empty_l_and_a_strided_q(monkeypatch):
    """Called directly: L of two chunks where one may wait, L = 0 with slices to write scales for, and a q not
    contiguous along L are each a clear error before any launch."""
    monkeypatch.setattr(_coop_slices, "coop_limit", lambda backend, device: 1)
    backend = backend_for("cpu")
    x = torch.randn((1, 8, 77)).to(torch.bfloat16)
    q = torch.empty((1, 8, 77), dtype=E4)
    with pytest.raises(ValueError, match="L = 77 is 2 chunks of 64: more than the 1"):
        _coop_slices.launch_coop_slices(x, q, torch.empty(8), configs.COOP_TRANSPOSE, E4, False, backend)
    with pytest.raises(ValueError, match="L = 0: the slices have no chunk"):
        _coop_slices.launch_coop_slices(x[:, :, :0], q[:, :, :0], torch.empty(8), configs.COOP_TRANSPOSE, E4, False,
                                        backend)  # fmt: skip
    strided = torch.empty((1, 77, 8), dtype=E4).mT
    with pytest.raises(ValueError, match="q must be contiguous along L"):
        _coop_slices.launch_coop_slices(x, strided, torch.empty(8), configs.COOP_TRANSPOSE, E4, False, backend)


@needs_interpreter  # the fold is a launch of its own there; a GPU fuses it with the cast
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_a_cast_without_the_fold_of_the_other_chunks_is_caught(op, monkeypatch):
    """Test the tester: a launcher whose fold launch is lost (the interpreter's PHASE_AMAX) casts with amax 0, and
    the reference comparison fails; with the fold it passes."""
    x = op.input_of(_special_slices(2, 40, 77, torch.bfloat16))
    q_ref, _ = op.reference(x, E4, False)
    real = configs.launch

    def without_fold(kernel, kernel_configs, backend, grid, config=None, **args):
        if args.get("PHASE") != _coop_slices.PHASE_AMAX:
            real(kernel, kernel_configs, backend, grid, config, **args)

    with configs.forced_kernel(op.setting, "coop"):
        q, _ = op.run(x, E4, False)
    assert_same_bits(q, q_ref, what="q")
    monkeypatch.setattr(configs, "launch", without_fold)
    with configs.forced_kernel(op.setting, "coop"):
        q, _ = op.run(x, E4, False)
    assert not torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


@pytest.mark.parametrize(("setting", "kind"), [("COLWISE_3D_KERNEL", "auto"), ("TRANSPOSE_ATOMIC_KERNEL", "coop")])
def test_forcing_a_kernel_restores_the_setting_and_forgets_plans_and_refuses_unknown_names(setting, kind, monkeypatch):
    """fp8moe.configs.forced_kernel: the kind on every backend inside, the setting as it was after, launch plans
    forgotten on the way in and out (a plan replays the kernel it recorded); an unknown kind or setting is an error
    naming the choices, with nothing changed."""
    forgotten = []
    monkeypatch.setattr(replay, "forget", lambda: forgotten.append(dict(getattr(configs, setting))))
    before = getattr(configs, setting)
    with configs.forced_kernel(setting, kind):
        assert dict.fromkeys(before, kind) == getattr(configs, setting)
    assert getattr(configs, setting) is before
    assert forgotten == [dict.fromkeys(before, kind), before]  # after the switch in, after the switch back
    forgotten.clear()
    choices = getattr(configs, f"{setting}S")
    refusal = re.escape(f"{setting} must be one of {choices}, got 'fast'")
    with pytest.raises(ValueError, match=refusal), configs.forced_kernel(setting, "fast"):
        pass
    with pytest.raises(ValueError, match="setting must be one of"), configs.forced_kernel("PER_GROUP_KERNEL", kind):
        pass
    assert getattr(configs, setting) is before
    assert forgotten == []


# ---------------------------------------------------------------------------------------------------------------
# The jagged form (fp8moe.kernels._coop_slices.launch_coop_groups, PER_GROUP_KERNEL = "coop"). Every test of
# tests/test_kernels_per_group.py runs it too; here: slices of several chunks with specials in one, the counts the
# GPU's waits rely on, the hand-over to the chunked kernel, and a lost fold caught.
# ---------------------------------------------------------------------------------------------------------------


def _group_view(rows: int, ends: list[int], transposing: bool, dtype=torch.bfloat16) -> torch.Tensor:
    """An (R, Ktot) view, Ktot = ends[-1] + 5 (positions past the last group), with the specials of
    :func:`_special_slices` in group 1, and group 1's amax in the last position of its last chunk: the view of
    x.t() for a transposing view (the colwise ops' (Ktot, R) input), the row-major input itself otherwise."""
    ktot = ends[-1] + 5
    slices = _special_slices(1, rows, ktot, torch.float32)[0]  # (R, Ktot)
    start, end = ends[0], ends[1]
    slices[3, start:end] = slices[3, start:end].clamp(-1, 1)
    slices[3, end - 1] = 3000.0
    slices[0, end - 1] = float("nan")
    slices = slices.to(dtype)
    return slices.t().contiguous().t() if transposing else slices.contiguous()


def _coop_groups_config(backend, view: torch.Tensor):
    return configs.GROUP_COOP.fixed(backend, _coop_slices._group_shape_args(view))


def _chunk_counts(ends: list[int], block_l: int, ktot: int) -> list[int]:
    """Chunks per group, as the kernel derives them: bounds are running maxima of the clamped offsets, a group's
    chunks start at the 16-aligned position at or before it, and an empty group is one chunk."""
    bounds, last = [], 0
    for e in ends:
        last = max(last, min(max(e, 0), ktot))
        bounds.append(last)
    return [max(-(-(e - s // 16 * 16) // block_l), 1) for s, e in zip([0, *bounds], bounds)]


def _group_ends(backend) -> list[int]:
    """Groups of 1-3 chunks, an empty one and short ones at unaligned starts, under the config ``backend`` runs."""
    block_l = 256 if backend.kind != "interpreter" else 64
    return [13, 13 + 2 * block_l + 7, 13 + 2 * block_l + 7, 13 + 3 * block_l, 13 + 3 * block_l + 40]


@pytest.mark.parametrize("transposing", [True, False], ids=["colwise", "rowwise"])
@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
def test_jagged_slices_of_several_chunks_match_the_reference(pow2, transposing, device):
    """Per-group rowwise on the (R, Ktot) view (both layouts) through the cooperative slice kernel against fp8ref's
    per_group_rowwise_scales; positions past the last group are compared nowhere (left unwritten, SPEC §4)."""
    backend = backend_for(device)
    ends = _group_ends(backend)
    view = _group_view(70, ends, transposing)
    x = view.to(device) if not transposing else view.t().contiguous().to(device).t()
    assert (x.stride(0) == 1) == transposing
    block_l = _coop_groups_config(backend, x).kwargs["BLOCK_L"]
    assert max(_chunk_counts(ends, block_l, x.shape[1])) > 1
    offs = torch.tensor(ends, dtype=torch.int32, device=device)
    [(q, s)] = _coop_slices.launch_coop_groups([x], offs, E4, pow2, backend)
    q_ref, s_ref = ref.per_group_rowwise_scales(view, offs.cpu(), E4, pow2)
    assert_same_bits(s, s_ref, what="scales")
    assert_same_bits(q[:, : ends[-1]], q_ref[:, : ends[-1]], what="q")


@needs_interpreter  # PHASE_ARRIVE alone: no wait, so the interpreter runs it
@pytest.mark.parametrize("lines", [False, True], ids=["packed", "lines"])
def test_every_chunk_of_every_slice_arrives_once_and_past_the_last_item_nothing_does(lines, monkeypatch):
    """The GPU's waits end when a slice block's count reaches its chunk count: run the folds and arrivals alone and
    read the counts. Each (group, row block) count equals the chunks the kernel waits for, including an empty group's
    one chunk and decreasing offsets (taken as running maxima); the ticket counts every program of the grid, the
    ones past the last item included. Packed (the default) and a line apart (GROUP_COOP_COUNT_LINES), where no
    other word of a counter's line is written."""
    monkeypatch.setattr(configs, "GROUP_COOP_COUNT_LINES", lines)
    backend = backend_for("cpu")
    ends = [140, 60, 150, 150, 175]  # 60 < 140: acts as 140, so group 1 is empty
    x = torch.randn(12, 180).to(torch.bfloat16)
    q, s = torch.empty((12, 180), dtype=E4), torch.empty(len(ends) * 12)
    config = _coop_groups_config(backend, x)
    ws, amax_at = _coop_slices.run_coop_group_phases(
        x, q, s, torch.tensor(ends, dtype=torch.int32), E4, False, backend, phases=[_coop_slices.PHASE_ARRIVE]
    )
    row_blocks = -(-12 // config.kwargs["BLOCK_M"])
    chunks = _chunk_counts(ends, config.kwargs["BLOCK_L"], 180)
    assert {1, 2} <= set(chunks)
    assert row_blocks > 1  # so that the counts' order is checked
    words = _coop_slices.count_words(uniform=False)
    counts = [
        [_coop_slices.arrival_count(ws, g * row_blocks + rb, words) for rb in range(row_blocks)]
        for g in range(len(ends))
    ]
    assert counts == [[n] * row_blocks for n in chunks]
    assert amax_at == words * (2 + len(ends) * row_blocks)
    assert words == (32 if lines else 1)
    assert ws[:amax_at].view(-1, words)[:, 1:].count_nonzero() == 0
    assert int(ws[0]) == row_blocks * _coop_slices.group_programs(180, len(ends), config.kwargs["BLOCK_L"])


@needs_interpreter  # PHASE_ARRIVE alone: no wait, so the interpreter runs it
def test_colwise_3d_experts_arrive_on_counters_a_line_apart():
    """colwise 3D's jagged launch (uniform groups) keeps each ticket and arrival count on a 128-byte line of its own
    (fp8moe.kernels._coop_slices._LINE): every (expert, row block) count equals the expert's chunks, and no other
    word of a counter's line is written. The per-group launch above keeps them packed."""
    backend = backend_for("cpu")
    e, k, n = 3, 64, 40
    x = torch.randn(e, k, n).to(torch.bfloat16)
    q = torch.empty_strided((e, k, n), (k * n, 1, k), dtype=E4)
    config = configs.coop_config(configs.COOP_COLUMNS, backend, (e, n, k))
    ws, amax_at = _coop_slices.launch_coop_experts(
        x, q, torch.empty(e * n), E4, False, backend, phases=[_coop_slices.PHASE_ARRIVE]
    )
    words = _coop_slices.count_words(uniform=True)
    assert words * 4 == 128
    row_blocks = -(-n // config.kwargs["BLOCK_M"])
    chunks = -(-k // config.kwargs["BLOCK_L"])
    assert row_blocks > 1
    assert chunks > 1
    counts = [
        [_coop_slices.arrival_count(ws, g * row_blocks + rb, words) for rb in range(row_blocks)] for g in range(e)
    ]
    assert counts == [[chunks] * row_blocks] * e
    assert amax_at == words * (2 + e * row_blocks)
    lines = ws[:amax_at].view(-1, words)
    assert lines[:, 1:].count_nonzero() == 0
    assert int(lines[0, 0]) >= e * row_blocks * chunks  # the ticket, on its own line


@pytest.mark.parametrize("block_l", [16, 64, 256, 1024])
def test_the_jagged_grid_has_a_program_for_every_item_whatever_the_offsets(block_l):
    """group_programs bounds the items of a row block (the chunks the kernel derives, _chunk_counts) from above for
    offsets drawn at random, unaligned, empty, decreasing and past Ktot included, and where the groups cover Ktot it
    exceeds them by at most G + 15 G / BLOCK_L + 1 (programs past the last item only take a ticket)."""
    gen = torch.Generator().manual_seed(5)
    for _ in range(300):
        ktot = int(torch.randint(0, 5000, (1,), generator=gen))
        groups = int(torch.randint(1, 40, (1,), generator=gen))
        ends = torch.randint(-20, ktot + 40, (groups,), generator=gen).tolist()
        if torch.rand(1, generator=gen) < 0.5:
            ends = sorted(ends)
        items = sum(_chunk_counts(ends, block_l, ktot))
        programs = _coop_slices.group_programs(ktot, groups, block_l)
        assert items <= programs, (ktot, ends)
        if max(ends) >= ktot:  # the groups cover Ktot: the bound is within G + 15 G / BLOCK_L + 1 of the items
            assert programs <= items + groups + -(-15 * groups // block_l) + 1, (ktot, ends)


@needs_interpreter  # the fold is a launch of its own there; a GPU fuses it with the cast
def test_a_jagged_cast_without_the_fold_is_caught():
    """Test the tester: the cast launch alone (every folded amax reads 0) gets each multi-chunk slice's scales wrong,
    so the folded amax is what they use; with the fold they match fp8ref."""
    backend = backend_for("cpu")
    ends = _group_ends(backend)
    x = _group_view(12, ends, transposing=False)
    offs = torch.tensor(ends, dtype=torch.int32)
    _, s_ref = ref.per_group_rowwise_scales(x, offs, E4)
    outputs = [(torch.empty(x.shape, dtype=E4), torch.empty(len(ends) * 12)) for _ in range(2)]
    for (q, s), phases in zip(outputs, ([_coop_slices.PHASE_CAST], None), strict=True):
        _coop_slices.run_coop_group_phases(x, q, s, offs, E4, False, backend, phases=phases)
    assert_same_bits(outputs[1][1], s_ref, what="scales with the fold")
    assert not torch.equal(outputs[0][1].view(torch.int32), s_ref.view(torch.int32))


@pytest.mark.parametrize("limit", [None, 0], ids=["fused", "long-pass"])
@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
def test_the_jagged_tile_capped_at_128_registers_matches_the_reference(pow2, limit, device, monkeypatch):
    """fp8moe.configs.GROUP_COOP_CAP (prepared call 28 times it): the colwise views' tile compiled with maxnreg 128
    (one register spilled on sm_90, triton 3.6) gives fp8ref's bytes, cast in the fused launch (waiting) and by the
    long pass. CUDA only: maxnreg is an NVIDIA compile option, which the interpreter and ROCm never get."""
    backend = backend_for(device)
    if backend.kind != "cuda":
        pytest.skip("GROUP_COOP_CAP caps a CUDA compile only")
    monkeypatch.setattr(configs, "GROUP_COOP_CAP", 128)
    ends = _group_ends(backend)
    view = _group_view(70, ends, transposing=True)
    x = view.t().contiguous().to(device).t()
    assert _coop_groups_config(backend, x).maxnreg == 128
    offs = torch.tensor(ends, dtype=torch.int32, device=device)
    q, s = torch.empty(x.shape, dtype=E4, device=device), torch.empty(len(ends) * 70, device=device)
    phases = [_coop_slices.PHASE_FUSED, _coop_slices.PHASE_LONG]
    _coop_slices.run_coop_group_phases(x, q, s, offs, E4, pow2, backend, phases=phases, limit=limit)
    q_ref, s_ref = ref.per_group_rowwise_scales(view, offs.cpu(), E4, pow2)
    assert_same_bits(s, s_ref, what="scales")
    assert_same_bits(q[:, : ends[-1]], q_ref[:, : ends[-1]], what="q")


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_groups_longer_than_may_wait_fold_then_are_cast_by_the_long_pass(limit, device):
    """Groups of more than ``limit`` chunks (every group at 0, the two-chunk ones at 1, none at 2) fold without
    waiting in the fused launch and are cast by PHASE_LONG; the others cast in the fused launch, waiting when
    several chunks. Fused then long, the same bytes as fp8ref. In the interpreter only limit 0 can run (a wait would
    never end there); on a GPU all three do."""
    backend = backend_for(device)
    if backend.kind == "interpreter" and limit > 0:
        pytest.skip("a group within the limit waits in the fused launch, which the interpreter cannot run")
    ends = _group_ends(backend)
    x = _group_view(20, ends, transposing=True)
    offs = torch.tensor(ends, dtype=torch.int32)
    q_ref, s_ref = ref.per_group_rowwise_scales(x, offs, E4)
    x, offs = x.to(device), offs.to(device)
    q, s = torch.empty(x.shape, dtype=E4, device=device), torch.empty(len(ends) * 20, device=device)
    _coop_slices.run_coop_group_phases(
        x, q, s, offs, E4, False, backend, phases=[_coop_slices.PHASE_FUSED, _coop_slices.PHASE_LONG], limit=limit
    )
    assert_same_bits(s, s_ref, what="scales")
    assert_same_bits(q[:, : ends[-1]], q_ref[:, : ends[-1]], what="q")


@needs_interpreter  # PHASE_FUSED with every group long: no wait, so the interpreter runs it
def test_a_long_group_cast_without_the_long_pass_is_caught():
    """Test the tester: with every group long (limit 0) the fused launch only folds, so without PHASE_LONG after it
    no code is written (the poisoned output stays); the fold and the long pass together give fp8ref's bytes."""
    backend = backend_for("cpu")
    ends = _group_ends(backend)
    x = _group_view(20, ends, transposing=True)
    offs = torch.tensor(ends, dtype=torch.int32)
    q_ref, _ = ref.per_group_rowwise_scales(x, offs, E4)
    outputs = []
    for phases in ([_coop_slices.PHASE_FUSED], [_coop_slices.PHASE_FUSED, _coop_slices.PHASE_LONG]):
        q = torch.full(x.shape, 0x55, dtype=torch.uint8).view(E4)
        _coop_slices.run_coop_group_phases(x, q, torch.empty(len(ends) * 20), offs, E4, False, backend,
                                           phases=phases, limit=0)  # fmt: skip
        outputs.append(q[:, : ends[-1]])
    assert bool((outputs[0].view(torch.uint8) == 0x55).all())
    assert_same_bits(outputs[1], q_ref[:, : ends[-1]], what="q")


@pytest.mark.parametrize(("ktot", "long_pass"), [(16, False), (16640, False), (66 * 256 - 15, False),
                                                 (66 * 256 - 14, True), (65536, True)])  # fmt: skip
def test_a_gpu_adds_the_long_pass_only_where_a_group_may_outnumber_the_waiting_programs(ktot, long_pass):
    """The progress bound (the module docstring): a group may hold all of Ktot, its chunks starting up to 15
    positions before it, so where 66 chunks may wait (coop_limit on 132 SMs) a Ktot + 15 past 66 chunks of 256 (the
    transposing view's tile) needs the long pass; the interpreter, where nothing waits, never does."""
    view = torch.empty((2048, ktot)).t().contiguous().t()  # transposing: contiguous along R
    gpu = fp8moe.backend.cuda_backend(9, 0)
    assert _coop_slices.group_config(gpu, view).kwargs["BLOCK_L"] == 256
    assert _coop_slices.may_have_long_groups(gpu, ktot, 256, 66) is long_pass
    interpreter = Backend("interpreter", "cpu", (), exact_encode=True, autotune=False)
    assert not _coop_slices.may_have_long_groups(interpreter, ktot, 16, 1)


def test_the_jagged_tile_is_the_stripped_probes_best_on_the_transposing_view():
    """GROUP_COOP's first CUDA candidate, which transposing views take (the pick by view itself: tests/test_configs.py,
    test_the_jagged_rule_lists_pick_by_view_on_cuda_and_take_the_fixed_tile_on_rocm)."""
    assert configs.GROUP_COOP.cuda[0].kwargs == {"BLOCK_L": 256, "BLOCK_M": 64}
