"""The chunked per-group kernel (fp8moe.kernels._group_chunks): every path a slice can take, against fp8ref, bitwise.

A forced small config (16 x 16 tiles, two tiles per chunk: chunks of 32 positions) and a hand-made layout put every
kind of group in front of the kernel at once: single-chunk groups on the one-read and the two-pass path, a group of
five chunks and one of two (their chunks fold their amax through the workspace; on a GPU they really wait for each
other, the interpreter runs the two-launch form), an empty group, unaligned group edges (exact-mask head and tail
chunks) and positions past offs[-1]. Runs on the interpreter and on a GPU.
"""

from __future__ import annotations

import pytest
import torch
import triton

import fp8moe
from fp8moe import configs
from fp8moe.backend import backend_for
from fp8moe.kernels import (
    _coop,
    _coop_slices,
    _group_chunks,
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
)
from fp8ref import ops as ref
from fp8ref.testing import assert_same_bits

E4 = torch.float8_e4m3fn
BLOCK_R, BLOCK_K, CHUNK_TILES = 16, 16, 2
CHUNK = BLOCK_K * CHUNK_TILES
ROWS, LENGTH = 20, 300  # a row tail (20 = 16 + 4)
#: Group ends: [0,5) [5,9) [9,40) [40,50) one chunk each ([9,40) with an unaligned head and tail around one tile);
#: [50,200) five chunks ([50,96) then four from 96 on, the last [192,200)); [200,229) one chunk, two passes; an
#: empty group at 229; [229,290) two chunks; positions 290..299 belong to no group.
ENDS = [5, 9, 40, 50, 200, 229, 229, 290]
CONFIG = triton.Config(
    {"BLOCK_R": BLOCK_R, "BLOCK_K": BLOCK_K, "CHUNK_TILES": CHUNK_TILES, "PROGRAMS_PER_SM": 2}, num_warps=4
)


def _chunks(start: int, end: int, chunk: int = CHUNK) -> int:
    """The kernel's chunk count of group [start, end): chunk 0 runs to the first 16-aligned position past start plus
    ``chunk``, the others are ``chunk`` long; at least one."""
    inner = -(-start // 16) * 16
    return max(-(-(end - inner) // chunk), 1)


@pytest.fixture(
    params=[
        {"PROGRAMS_PER_SM": 2},
        {"PROGRAMS_PER_SM": 0},
        {"L2_HINTS": True},
        {"CHUNK_TILES": 8, "L2_HINTS": True},
    ],
    ids=["tickets", "one-item-per-program", "l2-hints", "long-chunks"],
)
def fixed_chunks(request, force_jagged_kernel):
    """The jagged ops launch the chunked kernel with CONFIG (CUDA, ROCm and the interpreter alike), its programs
    taking items from a ticket or one item each, with or without L2 eviction priorities; the long chunks (8 tiles:
    the five-chunk group's first chunk has an 8-tile interior, so both passes' loops run many turns) change the
    layout, not what is compared."""
    config = triton.Config({**CONFIG.kwargs, **request.param}, num_warps=4)
    force_jagged_kernel("chunks", configs.GROUP_CHUNKS, config)


def _x(shape, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * torch.logspace(-3, 3, shape[-1]).view(1, -1)).to(torch.bfloat16)
    return x.to(device)


def test_the_layout_reaches_every_path():
    """The layout is what the docstring says (a test of the test)."""
    assert [_chunks(s, e) for s, e in zip([0, *ENDS], ENDS)] == [1, 1, 1, 1, 5, 1, 1, 2]
    assert ENDS[-1] < LENGTH
    assert any(e % 16 for e in ENDS)


def _assert_op_matches_reference(op: str, x: torch.Tensor, round_pow2: bool) -> None:
    """``op`` (a single-tensor jagged op) on x over the groups of ENDS, bitwise against fp8ref: every scale and the
    codes of the positions before ENDS[-1] (those past it belong to no group)."""
    rowwise = op == "per_group_rowwise_scales"
    offs = torch.tensor(ENDS, dtype=torch.int32, device=x.device)
    launch = per_group_rowwise_scales.launch if rowwise else per_group_colwise_scales.launch
    q, s = launch(x, offs, E4, round_pow2, backend_for(x.device))
    rq, rs = getattr(ref, op)(x.cpu(), offs.cpu(), E4, round_scales_to_power_of_2=round_pow2)
    jagged_dim = 1 if rowwise else 0
    assert_same_bits(s.cpu(), rs)
    assert_same_bits(q.cpu().narrow(jagged_dim, 0, ENDS[-1]), rq.narrow(jagged_dim, 0, ENDS[-1]))


@pytest.mark.parametrize("op", ["per_group_rowwise_scales", "per_group_colwise_scales"])
def test_every_slice_kind_matches_reference(op, fixed_chunks, device):
    rowwise = op == "per_group_rowwise_scales"
    x = _x((ROWS, LENGTH), device)
    if not rowwise:
        x = x.t().contiguous()  # (LENGTH, ROWS) row-major: the transposing view, word stores (PACK_K = 4)
    x[3 if rowwise else 60, 60 if rowwise else 3] = float("nan")  # a NaN in chunk 0 of the five-chunk group
    x[5 if rowwise else 270, 270 if rowwise else 5] = float("inf")  # an inf in the two-chunk group's first chunk
    x[7 if rowwise else 150, 150 if rowwise else 7] = 1e4  # the five-chunk group's amax, in a middle chunk
    _assert_op_matches_reference(op, x, round_pow2=True)


@pytest.mark.parametrize("op", ["per_group_rowwise_scales", "per_group_colwise_scales"])
def test_each_rows_amax_may_sit_in_any_tile(op, fixed_chunks, device):
    """Each row's amax is a spike at its own position, the rows' positions walking through every tile of the long
    groups ([50, 200) and [229, 290)), with exact scales (no power-of-2 rounding to hide a smaller amax): a loop that
    skips, repeats or reorders a tile in either pass gets some row's scale or codes wrong."""
    rowwise = op == "per_group_rowwise_scales"
    x = _x((ROWS, LENGTH), device, 5).clamp(-1, 1)
    for r in range(ROWS):
        x[r, 52 + 7 * r] = (-1) ** r * (10 + r)
        x[r, 230 + 3 * r] = (-1) ** r * (40 - r)
    if not rowwise:
        x = x.t().contiguous()  # the transposing view (PACK_K = 4)
    _assert_op_matches_reference(op, x, round_pow2=False)


def test_dual_items_of_both_tensors_share_one_ticket_order(fixed_chunks, device):
    x1, x2 = _x((ROWS, LENGTH), device, 1).t(), _x((LENGTH, 40), device, 2)  # a column-major and a row-major input
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    q1, s1, q2, s2 = per_group_colwise_scales_dual.launch(x1, x2, offs, E4, False, backend_for(x1.device))
    for q, s, x in ((q1, s1, x1), (q2, s2, x2)):
        rq, rs = ref.per_group_colwise_scales(x.cpu(), offs.cpu(), E4)
        assert_same_bits(s.cpu(), rs)
        assert_same_bits(q.cpu()[: ENDS[-1]], rq[: ENDS[-1]])


def test_decreasing_offsets_end_and_act_as_their_running_maximum(fixed_chunks, device):
    """fp8ref leaves decreasing offsets unspecified; the kernel takes running maxima of them (SPEC §4.7), so its
    groups stay a partition and no chunk waits for one that never arrives (on a GPU a wrong count would hang)."""
    x = _x((ROWS, LENGTH), device, 3)
    offs = torch.tensor([200, 50, 290, 100, 120], dtype=torch.int32, device=device)
    as_if = torch.tensor([200, 200, 290, 290, 290], dtype=torch.int32)
    q, s = per_group_rowwise_scales.launch(x, offs, E4, False, backend_for(x.device))
    rq, rs = ref.per_group_rowwise_scales(x.cpu(), as_if, E4)
    assert_same_bits(s.cpu(), rs)
    assert_same_bits(q.cpu()[:, :290], rq[:, :290])


@pytest.mark.parametrize("programs_per_sm", [0, 2])
def test_every_chunk_of_a_multi_chunk_slice_arrives_once(programs_per_sm, device):
    """The GPU's waits end when a slice's count reaches its chunk count: run the fused launch's folds and arrivals
    alone (PHASE_ARRIVE, no wait, so the interpreter can run it) and read the counts: each multi-chunk slice's equals
    its chunks in every row block, every other group's stays 0. With tickets, every item takes one and every program
    one more, the one that ends its loop."""
    config = triton.Config({**CONFIG.kwargs, "PROGRAMS_PER_SM": programs_per_sm}, num_warps=4)
    x = _x((ROWS, LENGTH), device)
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    _, (ws, layout) = _group_chunks.run_chunk_phases(
        [x], offs, E4, False, backend_for(x.device), phases=[_coop.PHASE_ARRIVE], config=config
    )
    row_blocks = -(-ROWS // BLOCK_R)
    counts = ws[layout.counts[0] : layout.counts[0] + len(ENDS) * row_blocks].view(len(ENDS), row_blocks).cpu()
    chunks = [_chunks(s, e) for s, e in zip([0, *ENDS], ENDS)]
    assert counts.tolist() == [[n if n > 1 else 0] * row_blocks for n in chunks]
    meta = {**config.kwargs, "R1": ROWS, "R2": 0, "K": LENGTH, "G": len(ENDS), "num_sms": _group_chunks._sm_count(
        backend_for(x.device), x.device), "min_chunk": _group_chunks.chunk_length(backend_for(x.device), x.device,
        LENGTH)}  # fmt: skip
    (programs,) = _group_chunks._grid(meta)
    assert int(ws[0]) == (row_blocks * sum(chunks) + programs if programs_per_sm else 0)


def test_the_cast_reads_the_folded_amax(device):
    """A test of the two-launch form: the cast launch alone (no fold before it: every folded amax reads 0) must get
    the multi-chunk groups wrong and every single-chunk group right, so the folded amax is what those chunks use."""
    x = _x((ROWS, LENGTH), device, 4)
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    backend = backend_for(x.device)
    [(_, s)], _ = _group_chunks.run_chunk_phases(
        [x], offs, E4, False, backend, phases=[_coop.PHASE_CAST], config=CONFIG
    )
    _, rs = ref.per_group_rowwise_scales(x.cpu(), offs.cpu(), E4)
    same = (s.cpu() == rs).view(len(ENDS), ROWS).all(dim=1).tolist()
    assert same == [_chunks(s, e) == 1 for s, e in zip([0, *ENDS], ENDS)]


@pytest.mark.parametrize("ktot", [1, 16, 1000, 16640, 65536, 131072, 10**6])
def test_chunks_per_slice_stay_within_the_coop_limit_on_a_gpu(ktot, monkeypatch):
    """On a GPU a slice never has more chunks than half the SMs (the progress bound of the module docstring)."""
    monkeypatch.setattr(_coop, "multiprocessors", lambda index: 132)
    gpu = fp8moe.backend.cuda_backend(9, 0)
    min_chunk = _group_chunks.chunk_length(gpu, torch.device("cuda", 0), ktot)
    assert min_chunk % 16 == 0
    for chunk in (min_chunk, max(min_chunk, 512)):
        # the worst group: all of Ktot, starting one past a 16-aligned position
        assert _chunks(1, ktot + 1, chunk) <= 66


def test_config_rule_picks_by_view_on_cuda_and_the_fixed_config_on_rocm():
    cuda, rocm = fp8moe.backend.cuda_backend(9, 0), fp8moe.backend.rocm_backend("gfx942")
    colwise = {"R1": 2048, "R2": 0, "K": 16640, "stride_xr": 1, "stride_xk": 2048}
    rowwise = {"R1": 2048, "R2": 0, "K": 16640, "stride_xr": 16640, "stride_xk": 1}
    assert configs.GROUP_CHUNKS.fixed(cuda, colwise) is configs.GROUP_CHUNKS.cuda[0]
    assert configs.GROUP_CHUNKS.fixed(cuda, rowwise) is configs.GROUP_CHUNKS.cuda[1]
    assert configs.GROUP_CHUNKS.fixed(rocm, colwise) is configs.GROUP_CHUNKS.rocm
    # L2 hints where they were measured faster (the transposing view on the H200), nowhere untimed
    assert configs.GROUP_CHUNKS.fixed(cuda, colwise).kwargs["L2_HINTS"] is True
    assert configs.GROUP_CHUNKS.fixed(cuda, rowwise).kwargs["L2_HINTS"] is False
    assert "L2_HINTS" not in configs.GROUP_CHUNKS.rocm.kwargs


def test_workspace_layout_packs_tickets_then_counts_and_amax_per_view():
    layout = _group_chunks.ChunkWorkspace((20, 40), groups=3, block_r=16)
    # 2 tickets; view 1: 3 groups x 2 row blocks of counts, 3 x 20 amax; view 2: 3 x 3 counts, 3 x 40 amax.
    assert layout.counts == [2, 2 + 6 + 60]
    assert layout.amax == [2 + 6, 2 + 6 + 60 + 9]
    assert layout.size == 2 + 6 + 60 + 9 + 120


def test_auto_takes_the_cooperative_kernels_for_transposing_views_of_long_groups_only():
    """fp8moe.configs.per_group_kernel's "auto": for a transposing (R, Ktot) view whose groups average a length of at
    least COOP_MEAN_GROUP = 2048 the cooperative slice kernel, in CHUNKS_MEAN_GROUP = [1024, 2048) the chunked
    kernel; the span kernel for K-contiguous views and shorter groups; ROCm keeps span."""
    cuda, rocm = fp8moe.backend.cuda_backend(9, 0), fp8moe.backend.rocm_backend("gfx942")
    assert (configs.CHUNKS_MEAN_GROUP, configs.COOP_MEAN_GROUP) == ((1024, 2048), 2048)
    colwise = torch.empty((8192, 64), device="meta").t()  # the colwise ops' view of a row-major input
    rowwise = torch.empty((64, 8192), device="meta")
    assert configs.PER_GROUP_KERNEL["cuda"] == "auto"
    assert configs.per_group_kernel(cuda, colwise, 8) == "chunks"  # 1024 per group
    assert configs.per_group_kernel(cuda, colwise, 5) == "chunks"  # 1638
    assert configs.per_group_kernel(cuda, colwise, 4) == "coop"  # 2048
    assert configs.per_group_kernel(cuda, colwise, 3) == "coop"  # 2731
    assert configs.per_group_kernel(cuda, colwise, 9) == "span"  # 910
    assert configs.per_group_kernel(cuda, colwise, 1) == "coop"  # 8192
    assert configs.per_group_kernel(cuda, rowwise, 8) == "span"
    assert configs.per_group_kernel(cuda, rowwise, 1) == "span"
    assert configs.per_group_kernel(rocm, colwise, 8) == "span"
    assert configs.per_group_kernel(cuda) == "auto"  # no view: left unresolved


@pytest.mark.parametrize("kind", ["chunks", "coop"])
def test_auto_launches_a_cooperative_kernel_for_the_dual_op_on_long_groups(kind, monkeypatch, device):
    """Through the op: a dual call whose groups average a length in ``kind``'s band (CHUNKS_MEAN_GROUP, or at least
    COOP_MEAN_GROUP) runs that kernel (and matches fp8ref), one with shorter groups the span kernel."""
    monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, "auto"))
    chunks_band, coop_from = {"chunks": ((64, 256), 256), "coop": ((48, 64), 64)}[kind]  # interpreter-sized groups
    monkeypatch.setattr(configs, "CHUNKS_MEAN_GROUP", chunks_band)
    monkeypatch.setattr(configs, "COOP_MEAN_GROUP", coop_from)
    launched = []
    launchers = {"chunks": _group_chunks.launch_group_chunks, "coop": _coop_slices.launch_coop_groups}

    def recording(*args, **kwargs):
        launched.append(args[0][0].shape)
        return launchers[kind](*args, **kwargs)

    monkeypatch.setattr("fp8moe.kernels._jagged._COOPERATIVE", {**launchers, kind: recording, "tiles": None})
    fp8moe.replay.forget()
    x1, x2 = _x((LENGTH, 24), device, 5), _x((LENGTH, 40), device, 6)
    for ends, cooperative in (([100, 170, 290], True), (ENDS, False)):  # Ktot / G = 100 and 37.5 per group
        offs = torch.tensor(ends, dtype=torch.int32, device=device)
        launched.clear()
        q1, s1, q2, s2 = fp8moe.per_group_colwise_scales_dual(x1, x2, offs)
        assert bool(launched) == cooperative
        for q, s, x in ((q1, s1, x1), (q2, s2, x2)):
            rq, rs = ref.per_group_colwise_scales(x.cpu(), offs.cpu(), E4)
            assert_same_bits(s.cpu(), rs)
            assert_same_bits(q.cpu()[: ends[-1]], rq[: ends[-1]])
    fp8moe.replay.forget()
