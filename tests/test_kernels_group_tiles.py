"""The one-read per-group kernel (fp8moe.kernels._group_tiles): every path a tile can take, against fp8ref, bitwise.

A fixed 16 x 32 tile and a hand-made layout put every kind of group in front of the kernel at once: groups inside one
chunk (three of them in chunk 0, the cast's pass-per-group path), shared slices that meet through the workspace,
long slices that the span loop quantizes, an empty group, unaligned group edges (exact-mask head and tail stores)
and positions past offs[-1]. ``coop_limit`` (the most chunks a shared slice may span) moves slices between the
shared and the long path: 1 makes every multi-chunk slice long, 1000 makes every one shared (on a GPU its tiles
really wait for each other; the interpreter runs the two-launch form). Runs on the interpreter and on a GPU.
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
    _group_tiles,
    per_group_colwise_scales,
    per_group_colwise_scales_dual,
    per_group_rowwise_scales,
)
from fp8ref import ops as ref
from fp8ref.testing import assert_same_bits

E4 = torch.float8_e4m3fn
BLOCK_R, BLOCK_K = 16, 32
ROWS, LENGTH = 20, 300  # a row tail (20 = 16 + 4); 10 chunks of 32, the last partial
#: Group ends, chunk by chunk of 32: [0,5) [5,9) inside chunk 0 with the start of [9,40) (three groups in one tile);
#: [40,50) inside chunk 1; [50,200) spans chunks 1-6; [200,229) chunks 6-7; an empty group at 229; [229,290) chunks
#: 7-9; positions 290..299 belong to no group.
ENDS = [5, 9, 40, 50, 200, 229, 229, 290]


def _chunks(start: int, end: int) -> int:
    return (end - 1) // BLOCK_K - start // BLOCK_K + 1


def _kinds(ends: list[int], limit: int) -> dict[str, int]:
    """How many groups take each path of the kernel at this limit (the module docstring's kinds)."""
    kinds = {"empty": 0, "local": 0, "shared": 0, "long": 0}
    start = 0
    for end in ends:
        if end == start:
            kinds["empty"] += 1
        elif _chunks(start, end) == 1:
            kinds["local"] += 1
        else:
            kinds["shared" if _chunks(start, end) <= limit else "long"] += 1
        start = end
    return kinds


@pytest.fixture
def fixed_tile(force_jagged_kernel):
    """The jagged ops launch the tile kernel, with the 16 x 32 tile (CUDA, ROCm and the interpreter alike)."""
    tile = triton.Config({"BLOCK_R": BLOCK_R, "BLOCK_K": BLOCK_K}, num_warps=4)
    force_jagged_kernel("tiles", configs.GROUP_TILES, tile)


def _x(shape, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * torch.logspace(-3, 3, shape[-1]).view(1, -1)).to(torch.bfloat16)
    return x.to(device)


def test_the_layout_reaches_every_path():
    """The layout is what the docstring says at the limits the tests use (a test of the test)."""
    assert _kinds(ENDS, 2) == {"empty": 1, "local": 3, "shared": 2, "long": 2}
    assert _kinds(ENDS, 3) == {"empty": 1, "local": 3, "shared": 3, "long": 1}
    assert _kinds(ENDS, 1) == {"empty": 1, "local": 3, "shared": 0, "long": 4}
    assert _kinds(ENDS, 1000) == {"empty": 1, "local": 3, "shared": 4, "long": 0}
    assert sum(1 for s, e in zip([0, *ENDS], ENDS) if s < BLOCK_K and e > 0 and e > s) == 3  # three in chunk 0
    assert any(e % 16 for e in ENDS)
    assert ENDS[-1] < LENGTH


@pytest.mark.parametrize("limit", [1, 2, 3, 1000])
@pytest.mark.parametrize("op", ["per_group_rowwise_scales", "per_group_colwise_scales"])
def test_every_slice_kind_matches_reference(op, limit, fixed_tile, monkeypatch, device):
    monkeypatch.setattr(_group_tiles, "coop_limit", lambda backend, dev: limit)
    rowwise = op == "per_group_rowwise_scales"
    x = _x((ROWS, LENGTH) if rowwise else (LENGTH, ROWS), device)
    if not rowwise:
        x = _x((ROWS, LENGTH), device).t().contiguous()
    x[3 if rowwise else 60, 60 if rowwise else 3] = float("nan")  # a NaN in a long slice
    x[5 if rowwise else 210, 210 if rowwise else 5] = float("inf")  # an inf in a shared slice
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    launch = per_group_rowwise_scales.launch if rowwise else per_group_colwise_scales.launch
    q, s = launch(x, offs, E4, True, backend_for(x.device))
    rq, rs = getattr(ref, op)(x.cpu(), offs.cpu(), E4, round_scales_to_power_of_2=True)
    end = ENDS[-1]
    assert_same_bits(s.cpu(), rs)
    assert_same_bits(q.cpu().narrow(1 if rowwise else 0, 0, end), rq.narrow(1 if rowwise else 0, 0, end))


@pytest.mark.parametrize("limit", [2, 1000])
def test_dual_tiles_of_both_tensors_share_one_ticket_order(limit, fixed_tile, monkeypatch, device):
    monkeypatch.setattr(_group_tiles, "coop_limit", lambda backend, dev: limit)
    x1, x2 = _x((ROWS, LENGTH), device, 1).t(), _x((LENGTH, 40), device, 2)  # a column-major and a row-major input
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    q1, s1, q2, s2 = per_group_colwise_scales_dual.launch(x1, x2, offs, E4, False, backend_for(x1.device))
    for q, s, x in ((q1, s1, x1), (q2, s2, x2)):
        rq, rs = ref.per_group_colwise_scales(x.cpu(), offs.cpu(), E4)
        assert_same_bits(s.cpu(), rs)
        assert_same_bits(q.cpu()[: ENDS[-1]], rq[: ENDS[-1]])


def test_decreasing_offsets_end_and_act_as_their_running_maximum(fixed_tile, device):
    """fp8ref leaves decreasing offsets unspecified; the kernel takes running maxima of them, so its groups stay a
    partition and no tile can wait for a tile that never arrives (on a GPU a wrong count would hang this test)."""
    x = _x((ROWS, LENGTH), device, 3)
    offs = torch.tensor([200, 50, 290, 100, 120], dtype=torch.int32, device=device)
    as_if = torch.tensor([200, 200, 290, 290, 290], dtype=torch.int32)
    q, s = per_group_rowwise_scales.launch(x, offs, E4, False, backend_for(x.device))
    rq, rs = ref.per_group_rowwise_scales(x.cpu(), as_if, E4)
    assert_same_bits(s.cpu(), rs)
    assert_same_bits(q.cpu()[:, :290], rq[:, :290])


@pytest.mark.parametrize("limit", [2, 3, 1000])
def test_every_tile_of_a_shared_slice_arrives_once(limit, fixed_tile, monkeypatch, device):
    """The GPU's waits end when a slice's count reaches its chunk count: run the fused launch's folds and arrivals
    alone (PHASE_ARRIVE, no wait, so the interpreter can run it) and read the counts: each shared slice's equals its
    chunks in every row block, every other group's stays 0."""
    monkeypatch.setattr(_group_tiles, "coop_limit", lambda backend, dev: limit)
    x = _x((ROWS, LENGTH), device)
    offs = torch.tensor(ENDS, dtype=torch.int32, device=device)
    _, (ws, layout) = _group_tiles.run_phases([x], offs, E4, False, backend_for(x.device), phases=[_coop.PHASE_ARRIVE])
    row_blocks = -(-ROWS // BLOCK_R)
    counts = ws[layout.counts[0] : layout.counts[0] + len(ENDS) * row_blocks].view(len(ENDS), row_blocks).cpu()
    expected = [
        _chunks(start, end) if start < end and 1 < _chunks(start, end) <= limit else 0
        for start, end in zip([0, *ENDS], ENDS)
    ]
    assert counts.tolist() == [[n] * row_blocks for n in expected]
    assert int(ws[0]) == row_blocks * -(-LENGTH // BLOCK_K)  # every tile took one ticket
    assert _group_tiles.tile_count((ROWS,), LENGTH, BLOCK_R, BLOCK_K) == int(ws[0])


def test_workspace_layout_packs_tickets_the_long_list_counts_and_amax_per_view():
    layout = _group_tiles.WorkspaceLayout((20, 40), groups=3, block_r=16, tiles=10)
    # 2 tickets, the long-tile count and a pad, a list of 10 tiles; view 1: 3 groups x 2 row blocks of counts, 3 x 20
    # amax; view 2: 3 x 3 counts, 3 x 40 amax.
    assert (layout.LONG_COUNT, layout.LONG_LIST) == (2, 4)
    assert layout.counts == [14, 14 + 6 + 60]
    assert layout.amax == [14 + 6, 14 + 6 + 60 + 9]
    assert layout.size == 14 + 6 + 60 + 9 + 120


def test_coop_limit_is_half_the_multiprocessors_on_a_gpu(monkeypatch):
    monkeypatch.setattr(_coop, "multiprocessors", lambda index: 132)
    gpu = fp8moe.backend.cuda_backend(9, 0)
    assert _coop.coop_limit(gpu, torch.device("cuda", 0)) == 66
    interpreter = fp8moe.backend.Backend("interpreter", "cpu", (E4,), exact_encode=True, autotune=False)
    assert _coop.coop_limit(interpreter, torch.device("cpu")) == _coop.INTERPRETER_COOP_LIMIT


def test_tile_count_is_row_blocks_times_chunks_with_one_chunk_for_an_empty_jagged_dim():
    assert _group_tiles.tile_count((20, 40), 300, 16, 32) == (2 + 3) * 10
    assert _group_tiles.tile_count((20,), 0, 16, 32) == 2
