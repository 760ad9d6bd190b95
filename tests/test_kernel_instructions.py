"""The per-group kernel's two loops as the GPU runs them: SASS for sm_90, compiled on this machine (no GPU needed).

On the H200 the row kernels were issue-bound (Nsight Compute: warps ready but not selected) at 15.7 instructions per
element; the span loop now takes 7.1 (benchmarks/results/h200-bench-2026-12-01-s5-summary.md). These tests keep the
cuts that made the difference, through benchmarks/sass_counts.py in a subprocess (it needs Triton's compiler,
which the interpreter this process runs has replaced):

- with a saturating hardware cast (CAST_SATURATING_NATIVE) pass 2 has no clamp: no FMNMX at all, while the clamped
  cast mode has its NaN-keeping min/max per element (so the check can fail);
- pass 1 has no span select (no FSEL/SEL): it walks the 16-aligned interior only;
- pass 1 takes the max of |x| as an integer max of bit patterns (no float max, no bf16 -> f32 conversion);
- the colwise view's pass 2 moves its tile through shared memory as 4-byte words, not bytes, and keeps 16-byte
  global stores (fp8moe.kernels._span, PACK_K);
- the amax folds by atomic max are relaxed: reductions with no memory barrier before them;
- the chunked kernel's L2 hints, and the span kernel's (L2_HINTS 1 and 2), reach their loads and stores as cache
  policies;
- the groups-fastest grid order costs the per-group kernel no resident program;
- the two-pass-only candidates (ONE_READ=False) compile without the one-read branch;
- a loop tile half the one-read tile (ONE_READ_K) fits one more program per SM than the one-read tile's loop;
- the one-read tile that holds the edges (EDGES_IN_TILE) changes the transposing view only;
- a 256-token one-read tile beside the 64x128 loop costs the colwise view no program per SM
  (``sass_counts.py --candidates``, which reports any candidate named as tune_configs.py names it);
- the long-slice probe's pipelined loops (benchmarks/probe_long_slices.py, ``/s<S>`` with S > 1) load through
  cp.async into shared memory, and its unpipelined controls do not;
- EDGE_LOOP (the ``/l`` candidates) takes the partial edge chunks in run-time loops of their own;
- DEPENDENT_LAUNCH (fp8moe.backend.Backend.dependent_launch) waits for the kernel before it ahead of any global load or
  store, lets the next one start, and costs no register; without it the span kernels have no grid dependency control;
- the cooperative slice kernel compiles in every phase for each of its uses, folds relaxed and keeps two programs
  per SM or more;
- every cooperative kernel puts a barrier between its warps' folds and its one thread's arrival, and between the
  wait and the read of the folded amax (benchmarks/meeting_order.py);
- the slice kernel's "poll-acquire" form (benchmarks/arrival_forms.py) reads the amax after an acquiring poll at the
  registers, atomics and memory barriers of the kernel as it ships.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fp8moe.backend import CAST_CLAMPED_NATIVE, CAST_SATURATING_NATIVE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # meeting_order, read in this process
NVIDIA_BIN = None
try:
    import triton

    NVIDIA_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
except ImportError:  # pragma: no cover - triton is a dependency
    pass

pytestmark = pytest.mark.skipif(
    NVIDIA_BIN is None or not (NVIDIA_BIN / "cuobjdump").exists() or not (NVIDIA_BIN / "ptxas").exists(),
    reason="this Triton has no NVIDIA toolchain (ptxas, cuobjdump) to compile for sm_90",
)

#: Instructions per element of both loops together (64x64 tile, 4 warps: 32 elements per thread per tile): 7.1 with
#: triton 3.9 after the cuts, 15.7 before. The bound leaves room for other Triton versions' scheduling.
MAX_INSTRUCTIONS_PER_ELEMENT = 9.0


@functools.cache
def _sass_counts(*args: str) -> dict:
    """The JSON benchmarks/sass_counts.py prints with ``args``, run in a process without the interpreter; once per
    test process for the same ``args`` (each run compiles for sm_90, up to about 20 s). Callers only read it."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [sys.executable, "benchmarks/sass_counts.py", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _views(cast_mode: int, pack: int | None = None) -> dict:
    """benchmarks/sass_counts.py's counts of both views (rowwise, colwise) of the 64x64/w4 tile."""
    args = ["--json", "--tile", "64,64,4", "--cast-mode", str(cast_mode)]
    return _sass_counts(*args, *(["--pack", str(pack)] if pack is not None else []))


def _two_loops(view: dict) -> tuple[dict, dict, int]:
    assert len(view["loops"]) == 2, view["loops"]  # pass 1 (amax), pass 2 (quantize), in code order
    pass1, pass2 = view["loops"]
    return pass1, pass2, view["elements_per_thread"]


def _rowwise_loops(cast_mode: int) -> tuple[dict, dict, int]:
    return _two_loops(_views(cast_mode)["rowwise"])


@pytest.fixture(scope="module")
def saturating_views():
    return _views(CAST_SATURATING_NATIVE)


@pytest.fixture(scope="module")
def saturating(saturating_views):
    return _two_loops(saturating_views["rowwise"])


def _count(loop: dict, prefix: str) -> int:
    return sum(n for op, n in loop["opcodes"].items() if op.startswith(prefix))


def test_a_saturating_cast_leaves_no_clamp_in_pass_2(saturating):
    _, pass2, per_thread = saturating
    assert _count(pass2, "FMNMX") == 0, pass2["opcodes"]
    assert _count(pass2, "F2FP.SATFINITE") > 0, pass2["opcodes"]  # the cast itself saturates
    _, clamped_pass2, _ = _rowwise_loops(CAST_CLAMPED_NATIVE)
    assert _count(clamped_pass2, "FMNMX") >= per_thread, clamped_pass2["opcodes"]


def test_pass_1_has_no_span_select_and_the_loops_stay_cheap(saturating):
    pass1, pass2, per_thread = saturating
    assert _count(pass1, "FSEL") + _count(pass1, "SEL") == 0, pass1["opcodes"]
    assert _count(pass1, "FMNMX") == 0, pass1["opcodes"]
    assert _count(pass1, "VIMNMX") + _count(pass1, "IMNMX") > 0, pass1["opcodes"]
    per_element = (pass1["instructions"] + pass2["instructions"]) / per_thread
    assert per_element <= MAX_INSTRUCTIONS_PER_ELEMENT, (pass1["instructions"], pass2["instructions"], per_thread)


def test_colwise_tiles_cross_shared_memory_as_words_and_keep_16_byte_stores(saturating_views):
    # The colwise view loads along R and stores along K: its pass 2 exchanges the tile through shared memory. With
    # word stores (PACK_K = 4, the launcher's choice there) that is one 4-byte STS per four codes instead of one
    # STS.U8 per code, and the global stores stay 16-byte vectors.
    _, words, per_thread = _two_loops(saturating_views["colwise"])
    _, byte_stores, _ = _two_loops(_views(CAST_SATURATING_NATIVE, pack=1)["colwise"])
    assert _count(byte_stores, "STS.U8") >= per_thread, byte_stores["opcodes"]  # the check can fail
    assert _count(words, "STS.U8") == 0, words["opcodes"]
    assert 0 < _count(words, "STS") <= per_thread // 4, words["opcodes"]
    assert words["opcodes"].get("STG.E.128", 0) > 0, words["opcodes"]
    assert _count(words, "STG") == words["opcodes"]["STG.E.128"], words["opcodes"]  # no narrower global store


def test_amax_folds_are_relaxed_reductions_without_memory_barriers():
    """Every fold by atomic max (both fused pairs' amax kernels, the atomic transpose method's) compiles to a RED
    with no MEMBAR: Triton's default acquire-release order put a MEMBAR.ALL.GPU before each fold on sm_90, and the
    activation pair's amax loop stalled on it at 47% of DRAM bandwidth (benchmarks/results/h200-s14-summary.md).
    With the default order the same counts read MEMBAR 2 / 2 / 1 and ATOM instead of RED."""
    folds = _sass_counts("--folds")
    assert set(folds) == {"weight pair amax", "activation pair amax", "atomic transpose amax"}
    for kernel, counts in folds.items():
        assert counts["MEMBAR"] == 0, (kernel, counts)
        assert counts["RED"] > 0, (kernel, counts)
        assert counts["ATOM"] == 0, (kernel, counts)


def test_the_chunked_kernels_l2_hints_reach_its_loads_and_stores():
    """With L2_HINTS the chunked kernel's pass-1 loads carry an evict-last L2 policy and its pass-2 loads and stores
    an evict-first one (so a chunk stays in L2 for its second read: DRAM bytes 1.49x -> 1.27x the ideal on the H200,
    benchmarks/results/h200-s15-summary.md); without them no access carries a policy. PTX for sm_90."""
    hints = _sass_counts("--l2-hints")
    assert hints["off"] == {"loads_evict_last": 0, "loads_evict_first": 0, "stores_evict_first": 0, "l2_policies": 0}
    on = hints["on"]
    for access in ("loads_evict_last", "loads_evict_first", "stores_evict_first"):
        assert on[access] > 0, on
    assert on["l2_policies"] >= 2, on


def test_the_span_kernels_l2_hints_reach_its_loads_and_stores_by_level():
    """The span kernel's L2_HINTS (the ``/ev<n>`` candidates, fp8moe.kernels._span.quantize_span), both views of
    64x64/w4: 0 sets no cache policy; 1 puts evict-first on loads (the one-read tile's, pass 2's) and on stores and
    evict-last nowhere; 2 adds evict-last loads (pass 1's) and keeps 1's evict-first ones. PTX for sm_90."""
    hints = _sass_counts("--l2-hints")
    for view in ("rowwise", "colwise"):
        off, first, keep = (hints[f"span {view} {level}"] for level in (0, 1, 2))
        assert off == {"loads_evict_last": 0, "loads_evict_first": 0, "stores_evict_first": 0, "l2_policies": 0}
        assert first["loads_evict_first"] > 0, first
        assert first["stores_evict_first"] > 0, first
        assert first["loads_evict_last"] == 0, first
        assert keep["loads_evict_last"] > 0, keep
        assert keep["loads_evict_first"] == first["loads_evict_first"], (first, keep)
        assert keep["stores_evict_first"] == first["stores_evict_first"], (first, keep)


def test_the_groups_fastest_grid_costs_no_resident_program():
    """The grid-order candidate (GROUPS_FASTEST, fp8moe.kernels._per_group.jagged_grid) must change the order and
    nothing else an SM sees: the per-group kernel and the one-read probe kernel keep their register-limited programs
    per SM in both orders, so a timing difference between the orders is the order's (sm_90, 64x128/w4 colwise,
    probe_one_read_gap.py's kernels)."""
    gap = _sass_counts("--gap")
    for variant in ("op", "op_half_loop", "one_read", "one_read_fixed_bounds"):
        assert gap[variant + "/g"]["blocks_per_sm"] == gap[variant]["blocks_per_sm"], (variant, gap)
    assert gap["ceiling_columns_fastest"]["blocks_per_sm"] == gap["ceiling"]["blocks_per_sm"], gap


def test_the_cap_for_one_more_program_is_the_largest_that_fits_it():
    """benchmarks/sass_counts.py --caps: 166 registers x 128 threads hold 3 programs per SM (warps take registers
    in units of 256), 128 hold 4; 106 -> 4, 96 -> 5; a 4-warp program at 32 registers is at the 2048-thread limit."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); import sass_counts as s; print(json.dumps("
        "[[s.blocks_per_sm(r, 4), s.cap_for_one_more_program(r, 4)] for r in (166, 128, 106, 96, 32)]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[3, 128], [4, 96], [4, 96], [5, 80], [16, None]]


def test_two_pass_only_compiles_without_the_one_read_branch():
    """ONE_READ=False (the ``/t`` candidates, fp8moe.kernels._span.quantize_group_span) must drop the one-read
    branch from the binary, not just skip it at run time: fewer instructions in both views, and the same two loops
    (passes 1 and 2) left (sm_90, 32x128/w8; triton 3.9: colwise 1728 -> 824 instructions, 96 -> 56 registers)."""
    both = _sass_counts("--json", "--tile", "32,128,8")
    two_pass = _sass_counts("--json", "--tile", "32,128,8", "--two-pass-only")
    for view in ("rowwise", "colwise"):
        assert two_pass[view]["instructions"] < both[view]["instructions"], (view, two_pass[view], both[view])
        assert len(two_pass[view]["loops"]) == len(both[view]["loops"]) == 2, (view, two_pass[view], both[view])


def test_a_loop_tile_half_the_one_read_tile_fits_one_more_program_per_sm():
    """ONE_READ_K (the ``/o`` candidates): the same one-read tile as 64x128/w4 beside a loop of 64x64 tiles must hold
    fewer registers than 64x128/w4, enough for one more program per SM, and no more than the one-read path
    compiled alone (sm_90, probe_one_read_gap.py's kernels; triton 3.9: 120 against 166 and 124 registers)."""
    gap = _sass_counts("--gap")
    assert gap["op_half_loop"]["blocks_per_sm"] == gap["op"]["blocks_per_sm"] + 1, gap
    assert gap["op_half_loop"]["blocks_per_sm"] >= gap["one_read"]["blocks_per_sm"], gap


def test_edges_in_tile_changes_the_transposing_view_only():
    """EDGES_IN_TILE (the ``/e`` candidates) replaces the one-read path's edge loads, cross-warp folds and edge casts
    on transposing views (PACK_K = 4) by the exact-mask tile: fewer colwise instructions, the same two loops, and
    the rowwise binary, which keeps its separate edges, unchanged (sm_90, 64x64/w4; triton 3.9: colwise 2536 ->
    2232 instructions, 112 -> 96 registers; triton 3.6: 2664 -> 2328, 106 -> 110)."""
    base = _sass_counts("--json", "--tile", "64,64,4")
    edges = _sass_counts("--json", "--tile", "64,64,4", "--edges-in-tile")
    assert edges["colwise"]["instructions"] < base["colwise"]["instructions"], (edges["colwise"], base["colwise"])
    assert len(edges["colwise"]["loops"]) == len(base["colwise"]["loops"]) == 2, (edges["colwise"], base["colwise"])
    assert edges["rowwise"]["instructions"] == base["rowwise"]["instructions"], (edges["rowwise"], base["rowwise"])


def test_a_256_token_one_read_tile_beside_the_64x128_loop_costs_the_colwise_view_no_program_per_sm():
    """``/o256`` on 64x128/w4/g reads every group whose interior fits 256 tokens once (the bench's 128-144-token
    groups at G = 128, 256 of the 256-272 at G = 64) at the colwise residency of 64x128/w4/g, whose one-read tile
    holds 128: the loop sets the registers (sm_90; triton 3.6: 168 and 168, triton 3.9: 166 and 168). The report
    names both views of each candidate, and a register cap written into the name is compiled in."""
    report = _sass_counts(
        "--candidates", "per_group_scales=64x128/w4/g,64x128/w4/g/o256,64x64/w4/r96/g",
        "--candidates", "per_group_colwise_scales_dual=64x64/w4/g",
    )  # fmt: skip
    views = ("rowwise", "colwise")
    names = ("64x128/w4/g", "64x128/w4/g/o256", "64x64/w4/r96/g")
    expected = [f"per_group_scales {view} {name}" for name in names for view in views]
    assert sorted(report) == sorted([*expected, "per_group_colwise_scales_dual 64x64/w4/g"]), report
    wide, plain = report["per_group_scales colwise 64x128/w4/g/o256"], report["per_group_scales colwise 64x128/w4/g"]
    assert wide["blocks_per_sm"] == plain["blocks_per_sm"], report
    assert wide["instructions"] > plain["instructions"], report  # the wider tile's code is in the binary
    for view in views:
        assert report[f"per_group_scales {view} 64x64/w4/r96/g"]["registers"] <= 96, report


def test_colwise_3d_column_tiles_report_their_residency_and_compile_their_cap():
    """``--candidates coop_columns=...`` counts colwise 3D's fused launch on row-major input per tile (prepared call
    28's tiles, benchmarks/results/cpu-sm90-registers-s43.md): a cap named in the tile is compiled in, and a tile of
    64 elements per thread fits more 4-warp programs per SM than the listed 128-element one."""
    report = _sass_counts("--candidates", "coop_columns=256x64/w4/r128,256x64/w4,128x64/w4")
    assert sorted(report) == sorted(f"coop_columns {t}" for t in ("256x64/w4/r128", "256x64/w4", "128x64/w4"))
    capped, listed, half = (report[f"coop_columns {t}"] for t in ("256x64/w4/r128", "256x64/w4", "128x64/w4"))
    assert capped["registers"] <= 128 < listed["registers"], report
    assert capped["programs_per_sm"] == listed["programs_per_sm"] + 1, report
    assert half["programs_per_sm"] > capped["programs_per_sm"], report
    assert half["STL"] == listed["STL"] == 0, report


def test_one_extra_chunk_past_the_one_read_tile_costs_the_colwise_view_no_program_per_sm():
    """``/x1`` lets the one-read path take groups one chunk past its tile (the bench's 272- and 144-token groups),
    reading that chunk twice in a loop of its own: the colwise view keeps the residency of the listed tile it
    extends (sm_90, triton 3.6: 168 and 168 registers for 64x128/w4/g/o256/l and its /x1 twin,
    benchmarks/results/cpu-sm90-registers-s23.md), and the chunk loop is in the binary."""
    pairs = (("64x128/w4/g/o256/l", "64x128/w4/g/o256/x1/l"), ("64x64/w4/g/o128/e", "64x64/w4/g/o128/x1"))
    report = _sass_counts("--candidates", "per_group_scales=" + ",".join(name for pair in pairs for name in pair))
    for listed, extra in pairs:
        base, wider = report[f"per_group_scales colwise {listed}"], report[f"per_group_scales colwise {extra}"]
        assert wider["blocks_per_sm"] >= base["blocks_per_sm"], report
    plain = report["per_group_scales colwise 64x128/w4/g/o256/l"]["instructions"]
    assert report["per_group_scales colwise 64x128/w4/g/o256/x1/l"]["instructions"] > plain, report


def test_the_long_slice_probes_pipelined_loops_load_through_cp_async_and_its_controls_do_not():
    """What probe_long_slices.py times is the pipeline: with S > 1 stages both passes' loads must be cp.async copies
    (LDGSTS) with no plain global load left in either loop, and shared memory must grow with S; with S = 1 the loops
    load with LDG and nothing else (sm_90; triton 3.6 and 3.9: 4 LDGSTS per 16-column loop). Its descriptor
    variants (``/d``) must load through the bulk tensor copy engine (UTMALDG) and in no other way (triton 3.9:
    48-80 registers against 118-128 for the same tiles' plain loads)."""
    report = _sass_counts("--long-slices")  # one entry per variant the probe times: BLOCK_KxBLOCK_N/wW/sS/pP
    stages = {name: int(name.split("/")[2].removeprefix("s")) for name in report}
    assert 1 in stages.values(), report  # the unpipelined controls
    assert max(stages.values()) > 1, report  # and the pipelines
    for name, counts in report.items():
        assert counts["blocks_per_sm"] >= 1, (name, counts)  # its shared memory and registers fit an SM: it launches
        if name.endswith("/d"):  # descriptor loads: bulk tensor copies only (their loops include mbarrier waits)
            assert sum(counts["bulk_tensor_per_loop"]) >= 2, (name, counts)
            assert sum(counts["cp_async_per_loop"]) == sum(counts["global_loads_per_loop"]) == 0, (name, counts)
            continue
        assert sum(counts["bulk_tensor_per_loop"]) == 0, (name, counts)
        passes = list(zip(counts["cp_async_per_loop"], counts["global_loads_per_loop"]))[:2]  # pass 1, pass 2
        assert len(passes) == 2, (name, counts)
        if stages[name] > 1:
            assert all(cp_async > 0 and plain == 0 for cp_async, plain in passes), (name, counts)
        else:
            assert all(cp_async == 0 and plain > 0 for cp_async, plain in passes), (name, counts)
    assert report["512x16/w8/s4/p1"]["shared_bytes"] > report["512x16/w8/s3/p1"]["shared_bytes"], report


def test_edge_loop_takes_the_edge_chunks_in_loops_of_their_own():
    """EDGE_LOOP (fp8moe.kernels._span._edges_amax) must compile to a run-time loop over the two edge chunks, not be
    unrolled back into the default code: more loops (backward branches) than the default binary on both views,
    the two passes' loops still there (sm_90, 64x64/w4; triton 3.9: 2 -> 4 loops on both views; triton 3.6, dual
    64x64/w4/g: 158 -> 128 registers, benchmarks/results/cpu-sm90-registers-s22.md)."""
    base = _sass_counts("--json", "--tile", "64,64,4")
    looped = _sass_counts("--json", "--tile", "64,64,4", "--edge-loop")
    for view in ("rowwise", "colwise"):
        assert len(base[view]["loops"]) == 2, (view, base[view]["loops"])
        assert len(looped[view]["loops"]) > len(base[view]["loops"]), (view, looped[view]["loops"])


def test_a_dependent_launch_waits_before_touching_memory_and_costs_no_register():
    counts = _sass_counts("--dependent-launch")
    for kernel in ("rowwise", "colwise", "dual"):
        off, on = counts[f"{kernel} off"], counts[f"{kernel} on"]
        assert (off["waits"], off["launch_dependents"]) == (0, 0), off
        assert (on["waits"], on["launch_dependents"]) == (1, 1), on
        assert on["wait_before_loads"], on
        assert on["wait_before_stores"], on
        assert on["registers"] <= off["registers"], (kernel, off, on)


def test_the_cooperative_slice_kernel_compiles_in_every_phase_for_each_use_and_folds_relaxed():
    """fp8moe.kernels._coop_slices under each use's first CUDA candidate and input layout (colwise 3D, the atomic
    transpose, the jagged kernel), compiled for sm_90 (the interpreter accepts code Triton's compiler refuses: a plain
    global inside the kernel failed only on the GPU, session 35). Every phase compiles; the fold is a relaxed
    reduction (RED), so the fold launch's one barrier is its ticket's and the fused launch's two are the ticket's and
    the arrival's release; the fused kernel keeps at least two programs per SM (three with triton 3.9 here, session
    39: colwise 3D 138 registers and 32 KB of shared memory, the jagged kernel 147, the atomic transpose 128 and
    eight). Colwise 3D runs the jagged kernel (its experts uniform groups, "columns") since session 39;
    "columns-dense" is its dense launch before (153), and "columns fused r128" the fused launch capped at 128
    registers: four programs per SM, few spills; so is "groups fused r128" (fp8moe.configs.GROUP_COOP_CAP)."""
    phases = _sass_counts("--coop-slices")
    uses = ("columns", "columns-dense", "transpose", "groups")
    jagged = {"columns long", "groups long", "columns fused r128", "groups fused r128", "transpose-uniform fused"}
    assert set(phases) == {f"{use} {phase}" for use in uses for phase in ("fused", "fold", "cast")} | jagged
    for use in ("columns", "groups"):
        assert phases[f"{use} long"]["RED"] == 0  # the long pass folds nothing: the fused launch before it did
    # spilled stores: colwise 3D's 3 under triton 3.6 and 3.9; the jagged kernel's on the colwise ops 1 under 3.6
    # (the GPU's, 142 registers uncapped) and 12 under 3.9 (147 uncapped; session 43)
    for use, most_spills in (("columns", 8), ("groups", 16)):
        capped = phases[f"{use} fused r128"]
        assert capped["registers"] <= 128, capped
        assert capped["programs_per_sm"] >= 4, capped
        assert capped["STL"] <= most_spills, capped
    for use in uses:
        assert phases[f"{use} fold"]["RED"] == 1, use
        assert phases[f"{use} fold"]["MEMBAR"] == 1, use
        assert phases[f"{use} fused"]["MEMBAR"] == 2, use
        assert phases[f"{use} cast"]["RED"] == 0, use  # the cast folds nothing
        assert phases[f"{use} fused"]["programs_per_sm"] >= 2, phases[f"{use} fused"]


#: The cooperative kernels :func:`test_every_cooperative_kernel_arrives_after_a_barrier_and_reads_after_one` reads:
#: the slice kernel's uses (benchmarks/sass_counts.py, _coop_uses), the tile kernel and the chunked kernel.
COOPERATIVE_KERNELS = ("columns", "columns-dense", "transpose", "groups", "transpose-uniform", "tiles", "chunks")


def test_every_cooperative_kernel_arrives_after_a_barrier_and_reads_after_one():
    """Every cooperative kernel's fused launch, compiled for sm_90: a barrier of the program's threads lies between
    the last fold of its partial amax and each arrival, in the TTGIR (a barrier the kernel asks for, so that it does
    not rest on what a Triton version adds: 3.9 adds one there, 3.6, the GPU's, does not) and in the PTX; and a
    barrier between the last poll of the count and each read of the folded amax. One thread arrives for the program,
    and its release covers only what it and the threads it has synchronized with did: without the barrier another
    warp's fold may land after the arrival, and a program of the slice cast with too small an amax (the slice
    kernel of colwise 3D, the atomic transpose and the jagged per-group launch, until session 48;
    fp8moe.kernels._coop.arrive)."""
    meetings = _sass_counts("--meetings")
    assert set(meetings) == {f"{kernel} {level}" for kernel in COOPERATIVE_KERNELS for level in ("ttgir", "ptx")}
    for name, counts in meetings.items():
        assert counts["arrivals"] >= 1, (name, counts)
        assert counts["arrivals_after_barrier"] == counts["arrivals"], (name, counts)
        assert counts["reads_after_poll"] >= 1, (name, counts)
        assert counts["reads_after_poll_barrier"] == counts["reads_after_poll"], (name, counts)


def test_the_poll_acquire_form_orders_every_read_after_an_acquire_at_no_register_or_atomic():
    """benchmarks/arrival_forms.py's "poll-acquire" form (session 50, raced and timed by prepared call 48): every
    poll of the count an acquire load, so that the poll that sees the count complete acquires what the arrivals
    released, the order the PTX memory model makes formal. Compiled for sm_90, each use of the slice kernel reads
    the folded amax after an acquiring poll only in that form (the kernel as it ships polls with volatile loads, so
    the count can tell them apart), keeps its barriers, and takes the registers, atomics and memory barriers of the
    kernel as it ships in every phase: its cost, if any, is the loads' own (each acquire load also invalidates the
    L1, which the kernel does not read x through: x is held in registers across the wait)."""
    slice_uses = ("columns", "columns-dense", "transpose", "groups", "transpose-uniform")
    shipped, acquiring = _sass_counts("--meetings"), _sass_counts("--meetings", "--wait-form", "poll-acquire")
    for use in slice_uses:
        for level in ("ttgir", "ptx"):
            name = f"{use} {level}"
            assert shipped[name]["reads_after_acquire"] == 0, (name, shipped[name])
            counts = acquiring[name]
            assert counts["reads_after_acquire"] == counts["reads_after_poll"] >= 1, (name, counts)
            assert counts["reads_after_poll_barrier"] == counts["reads_after_poll"], (name, counts)
            assert counts["arrivals_after_barrier"] == counts["arrivals"] >= 1, (name, counts)
    plain, polled = _sass_counts("--coop-slices"), _sass_counts("--coop-slices", "--wait-form", "poll-acquire")
    assert set(polled) == set(plain)
    for phase, counts in plain.items():
        for key in ("registers", "programs_per_sm", "ATOM", "RED", "MEMBAR", "STL"):
            assert polled[phase][key] == counts[key], (phase, key, counts, polled[phase])


def test_the_meeting_reader_finds_an_arrival_or_a_read_without_its_barrier():
    """benchmarks/meeting_order.py on text of its own: the slice kernel's fold and arrival as Triton 3.6 compiled them
    before session 48 (no barrier between) count as an arrival without one, a barrier between makes it count, and a
    read of the folded amax straight after the poll counts as a read without one; in TTGIR and PTX alike."""
    from meeting_order import meeting_order

    ptx_fold = "@%p257 atom.global.gpu.relaxed.max.s32 %r334, [ %rd48 + 0 ], %r335;"
    ptx_arrive = "@%p22 atom.global.gpu.release.add.u32 %r507, [ %rd47 + 0 ], %r508;"
    ptx_poll = "ld.volatile.global.b32 { %r509 }, [ %rd47 + 0 ];"
    ptx_read = "@%p257 atom.global.gpu.acquire.max.s32 %r511, [ %rd48 + 0 ], %r512;"
    tt_fold = "%27 = tt.atomic_rmw max, relaxed, gpu, %words, %bits, %20 : (tensor<64x!tt.ptr<i32>>)"
    tt_arrive = "%28 = tt.atomic_rmw add, release, gpu, %count, %c1_i32, %true : (!tt.ptr<i32>, i32, i1) -> i32"
    tt_poll = "%seen = tt.load %count {isVolatile = true} : !tt.ptr<i32>"
    tt_read = "%folded = tt.atomic_rmw max, acquire, gpu, %words, %cst, %20 : (tensor<64x!tt.ptr<i32>>)"
    ptx_acquiring = "ld.acquire.gpu.global.b32 %r6, [%rd2];"
    tt_acquiring = (
        '%seen = tt.elementwise_inline_asm "ld.acquire.gpu.global.b32 $0, [$1];" {constraints = "=r,l", '
        "packed_element = 1 : i32, pure = false} %count_ptr : !tt.ptr<i32> -> i32"
    )
    for level, (fold, arrive, poll, acquiring, read, barrier) in enumerate(
        (
            (tt_fold, tt_arrive, tt_poll, tt_acquiring, tt_read, "ttg.barrier all"),
            (ptx_fold, ptx_arrive, ptx_poll, ptx_acquiring, ptx_read, "bar.sync 0;"),
        )
    ):
        racy = meeting_order("\n".join((fold, arrive, poll, poll, read)), level)
        assert racy == {
            "arrivals": 1,
            "arrivals_after_barrier": 0,
            "reads_after_poll": 1,
            "reads_after_poll_barrier": 0,
            "reads_after_acquire": 0,
        }
        ordered = meeting_order("\n".join((fold, barrier, arrive, poll, poll, barrier, read)), level)
        assert ordered == {
            "arrivals": 1,
            "arrivals_after_barrier": 1,
            "reads_after_poll": 1,
            "reads_after_poll_barrier": 1,
            "reads_after_acquire": 0,
        }
        # a barrier before the fold orders nothing after it
        late = meeting_order("\n".join((barrier, fold, arrive)), level)
        assert late["arrivals_after_barrier"] == 0, late
        # the poll-acquire form: the read counts as ordered by an acquire only where the last poll before it acquires
        acquired = meeting_order("\n".join((fold, barrier, arrive, acquiring, acquiring, barrier, read)), level)
        assert acquired["reads_after_acquire"] == acquired["reads_after_poll_barrier"] == 1, acquired
        volatile_last = meeting_order("\n".join((arrive, acquiring, poll, barrier, read)), level)
        assert volatile_last["reads_after_acquire"] == 0, volatile_last
