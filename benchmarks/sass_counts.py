"""Instruction counts of the per-group kernel's loops, compiled for sm_90 on any machine (no GPU needed).

    python benchmarks/sass_counts.py                       # the 64x64/w4 tile, rowwise and colwise views
    python benchmarks/sass_counts.py --tile 128,32,4 --cast-mode 1
    python benchmarks/sass_counts.py --folds                # the amax fold kernels' barriers and atomics
    python benchmarks/sass_counts.py --gap                  # registers of probe_one_read_gap.py's kernels
    python benchmarks/sass_counts.py --caps                 # each per-group tile at one more program per SM
    python benchmarks/sass_counts.py --gap --gap-group 256  # the same ladder at 256-token groups
    python benchmarks/sass_counts.py --candidates per_group_scales=64x128/w4/g/o256  # registers of any candidate
    python benchmarks/sass_counts.py --long-slices          # probe_long_slices.py's kernels: cp.async, shared memory
    python benchmarks/sass_counts.py --coop-slices          # the cooperative slice kernel: registers, barriers
    python benchmarks/sass_counts.py --meetings             # every cooperative kernel's arrivals and waits
    python benchmarks/sass_counts.py --meetings --wait-form poll-acquire  # under a form of arrival_forms.py

Compiles fp8moe's per-group kernel (fp8moe/kernels/_per_group.py) with the installed Triton for an NVIDIA sm_90
target, disassembles it with the cuobjdump Triton ships, and prints per loop (a backward branch) its instruction
count and most frequent opcodes, plus registers per thread. Divide a loop's count by the elements one thread holds
per tile (BLOCK_R * BLOCK_K / (32 * warps)) for instructions per element: the budget of a memory-bound kernel on
an H200 is about 23 per element of a bf16 -> fp8 cast at full issue rate (benchmarks/results/
h200-bench-2026-12-01-s5-summary.md). The counts come from the installed Triton (3.9 on the CPU machines), not the
GPU's 3.6: use them to compare code variants, and time on the GPU.

The rowwise view has unit stride along K (the jagged dim), the colwise view unit stride along R (x.t() of a
row-major (Ktot, N) input); strides and pointers are declared 16-divisible, as Triton specialises them at launch.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import types

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU: the kernels must be JIT functions, not interpreted
# Load fp8moe's modules without its __init__, which turns the interpreter on when there is no GPU.
_package = types.ModuleType("fp8moe")
_package.__path__ = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fp8moe")]
sys.modules.setdefault("fp8moe", _package)

import arrival_forms  # noqa: E402  (benchmarks/ too)
import torch  # noqa: E402
import triton  # noqa: E402
from meeting_order import meeting_order  # noqa: E402  (benchmarks/ too)
from residency import SM_REGISTERS, SM_THREADS, blocks_per_sm  # noqa: E402  (benchmarks/, this script's folder)
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from fp8moe.backend import CAST_SATURATING_NATIVE  # noqa: E402
from fp8moe.kernels._common import fp8_constexprs  # noqa: E402
from fp8moe.kernels._per_group import _per_group_rows_kernel  # noqa: E402
from fp8moe.kernels._span import pack_k as span_pack_k  # noqa: E402

_POINTERS = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "scales_ptr": "*fp32", "offs_ptr": "*i32"}
#: The chunked per-group kernel's pointer arguments (fp8moe.kernels._group_chunks: two views of one offs).
_CHUNKS_POINTERS = {
    **dict.fromkeys(("x1_ptr", "x2_ptr"), "*bf16"),
    **dict.fromkeys(("q1_ptr", "q2_ptr"), "*fp8e4nv"),
    **dict.fromkeys(("scales1_ptr", "scales2_ptr"), "*fp32"),
    "offs_ptr": "*i32",
    "ws_ptr": "*i32",
}


#: The span kernel's config flags (fp8moe.kernels._span.quantize_group_span, _per_group.jagged_program) at their
#: launch defaults. Compiles pass every one: a constexpr left out would compile as a run-time argument.
SPAN_FLAGS = {
    "GROUPS_FASTEST": False,
    "ONE_READ": True,
    "ONE_READ_K": 0,
    "EDGES_IN_TILE": False,
    "EDGE_LOOP": False,
    "EXTRA_CHUNKS": 0,
    "L2_HINTS": 0,
    "DEPENDENT_LAUNCH": False,
}


def compile_per_group(
    block_r: int,
    block_k: int,
    warps: int,
    colwise: bool,
    cast_mode: int,
    x_type: str = "bf16",
    pack_k: int | None = None,
    maxnreg: int | None = None,
    flags: dict | None = None,
):
    """The per-group kernel compiled for sm_90 with this tile, view and input type ("bf16", "fp16", "fp32").

    ``pack_k``: the PACK_K constexpr; None takes the launchers' rule (fp8moe.kernels._span.pack_k) for the view and
    a row-major output whose rows are 16-byte aligned, as the strides declared below are. ``maxnreg``: a register
    cap per thread (a config's ``maxnreg``), None for none. ``flags``: span flags set apart from SPAN_FLAGS.
    """
    kernel = _per_group_rows_kernel
    constants = dict(fp8_constexprs(torch.float8_e4m3fn, False, cast_mode))
    if pack_k is None:
        q_meta = torch.empty((block_r, 1024), dtype=torch.float8_e4m3fn, device="meta")
        pack_k = span_pack_k((16 if colwise else 1,), q_meta)
    constants.update(BLOCK_R=block_r, BLOCK_K=block_k, PACK_K=pack_k, INT64_INDEX=False)
    constants.update({**SPAN_FLAGS, **(flags or {})})
    constants["stride_xr" if colwise else "stride_xk"] = 1
    pointers = {**_POINTERS, "x_ptr": f"*{x_type}"}
    divisible = [*_POINTERS, "R", "K", "stride_qr", "stride_xk" if colwise else "stride_xr"]
    return compile_sm90(kernel, constants, pointers, divisible, warps, maxnreg)


def compile_dual(
    block_r: int,
    block_k: int,
    warps: int,
    maxnreg: int | None = None,
    flags: dict | None = None,
):
    """The dual op's span kernel (fp8moe.kernels.per_group_colwise_scales_dual) compiled for sm_90: both inputs
    row-major (Ktot, N) bf16, so both views transpose and store words. ``maxnreg``, ``flags``: as
    :func:`compile_per_group`'s."""
    from fp8moe.kernels.per_group_colwise_scales_dual import _per_group_colwise_scales_dual_kernel

    pointers = {
        **{f"{name}{i}_ptr": kind for i in (1, 2) for name, kind in (("x", "*bf16"), ("q", "*fp8e4nv"))},
        **{f"scales{i}_ptr": "*fp32" for i in (1, 2)},
        "offs_ptr": "*i32",
    }
    constants = {
        **fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE), "BLOCK_R": block_r, "BLOCK_K": block_k,
        "PACK_K": 4, "INT64_INDEX": False, **SPAN_FLAGS, **(flags or {}), "stride_x1n": 1, "stride_x2n": 1,
    }  # fmt: skip
    divisible = [*pointers, "K", "stride_x1k", "stride_x2k"]
    return compile_sm90(_per_group_colwise_scales_dual_kernel, constants, pointers, divisible, warps, maxnreg)


def compile_sm90(
    kernel, constants: dict, pointers: dict, divisible: list, warps: int, maxnreg: int | None = None
):  # fmt: skip
    """``kernel`` compiled for sm_90: ``constants`` its constexprs, ``pointers`` its pointer arguments' types (every
    other argument i32), the arguments in ``divisible`` declared 16-divisible, as Triton specialises them at launch.
    Every constexpr parameter must be in ``constants``, defaulted ones too (else it would compile as an i32).
    ``maxnreg``: a register cap per thread, None for none."""
    missing = [p.name for p in kernel.params if p.is_constexpr and p.name not in constants]
    if missing:
        raise ValueError(f"{kernel.__name__}: no value for the constexpr parameters {missing}")
    signature = {name: "constexpr" if name in constants else pointers.get(name, "i32") for name in kernel.arg_names}
    names = list(signature)
    source = ASTSource(
        fn=kernel,
        signature=signature,
        constexprs={(names.index(k),): v for k, v in constants.items()},
        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in divisible},
    )
    options = {"num_warps": warps, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def fold_barriers() -> dict:
    """Per amax kernel that folds by atomic max (both fused pairs', the atomic transpose method's): its memory
    barriers (MEMBAR), reductions without a return (RED) and atomics with one (ATOM) in SASS. Relaxed folds
    (fp8moe.kernels._common.fold_amax) compile to RED with no MEMBAR; Triton's default order put a MEMBAR.ALL.GPU
    before every fold, which drains the loads in flight (benchmarks/results/h200-s14-summary.md)."""
    from fp8moe.kernels import colwise_3d_and_transpose_rhs, rowwise_3d_transpose_rhs, rowwise_and_per_group_colwise

    tiles = {"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 8, "INT64_INDEX": False}
    kernels = {
        "weight pair amax": (
            colwise_3d_and_transpose_rhs._pair_amax_kernel, tiles, {"x_ptr": "*bf16", "amax_ptr": "*i32"},
            ["x_ptr", "amax_ptr", "P", "Q", "stride_xe", "stride_xq"],
        ),
        "activation pair amax": (
            rowwise_and_per_group_colwise._jagged_amax_kernel, {**tiles, "BLOCK_G": 16},
            {"x_ptr": "*bf16", "offs_ptr": "*i32", "amax_ptr": "*i32"},
            ["x_ptr", "offs_ptr", "amax_ptr", "M", "P", "stride_xq"],
        ),
        "atomic transpose amax": (
            rowwise_3d_transpose_rhs._transpose_rhs_amax_kernel,
            {"BLOCK_K": 64, "BLOCK_N": 64, "INT64_INDEX": False},
            {"x_ptr": "*bf16", "amax_bits_ptr": "*i32"},
            ["x_ptr", "amax_bits_ptr", "K", "N", "stride_xe", "stride_xk"],
        ),
    }  # fmt: skip
    result = {}
    for name, (kernel, constants, pointers, divisible) in kernels.items():
        result[name] = _barrier_counts(compile_sm90(kernel, constants, pointers, divisible, 4))
    return result


def _barrier_counts(compiled, kinds: tuple[str, ...] = ("MEMBAR", "RED", "ATOM")) -> dict:
    """A compiled kernel's memory barriers (MEMBAR), reductions without a return (RED) and atomics with one (ATOM)
    in SASS (or the opcodes ``kinds``, each with its G form)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        sass = _cuobjdump("-sass", f.name)
    opcodes = [m.group(1) for m in re.finditer(r"\s([A-Z][A-Z0-9]*)[.\s]", sass)]
    return {kind: sum(op == kind or op == kind + "G" for op in opcodes) for kind in kinds}


def coop_slices() -> dict:
    """The cooperative slice kernel (fp8moe.kernels._coop_slices) under each use's first CUDA candidate, compiled for
    sm_90 with the unit stride of that use's input (colwise 3D on row-major input: across the slices; the atomic
    transpose: along them; the jagged kernel on the colwise ops' transposing view, 64 groups) in each of its phases
    (fused; the interpreter's fold and cast; the jagged kernel's long-group pass): registers per thread, programs
    per SM, its memory barriers and atomics (:func:`_barrier_counts`) and its spills (STL, LDL), keyed
    "<use> <phase>"; colwise 3D's fused launch also capped at 128 registers ("columns fused r128", its tile past one
    expert since session 40: 4 programs per SM at 4 warps), so is the jagged kernel's on the colwise ops ("groups
    fused r128", fp8moe.configs.GROUP_COOP_CAP), and the atomic transpose's first tile on the jagged kernel's
    uniform form ("transpose-uniform fused")."""
    from fp8moe.kernels import _coop, _coop_slices

    result = {}
    for op, kernel, config, unit, other, divisible, extra in _coop_uses():
        phases = [("fused", _coop.PHASE_FUSED), ("fold", _coop.PHASE_AMAX), ("cast", _coop.PHASE_CAST)]
        if kernel is _coop_slices._coop_groups_kernel:  # the launch that casts groups too long to wait for
            phases.append(("long", _coop.PHASE_LONG))
        for phase_name, phase in phases:
            if op == "transpose-uniform" and phase_name != "fused":
                continue
            for cap in (None, 128) if op in ("columns", "groups") and phase_name == "fused" else (None,):
                counts = _coop_counts(kernel, config, phase, (unit, other, divisible, extra), cap)
                result[f"{op} {phase_name}" + (f" r{cap}" if cap else "")] = counts
    return result


def _coop_uses() -> tuple:
    """The cooperative slice kernel's uses (:func:`coop_slices`): per use its name, the kernel, its first CUDA
    config, the unit stride, the other stride, the 16-divisible arguments and the use's extra constexprs."""
    from fp8moe import configs
    from fp8moe.kernels import _coop_slices

    dense = ["x_ptr", "q_ptr", "scales_ptr", "ws_ptr", "M", "L", "stride_xe", "stride_qe", "stride_qm"]
    jagged = _COOP_JAGGED_DIVISIBLE
    return (
        ("columns", _coop_slices._coop_groups_kernel, configs.COOP_COLUMNS.cuda[0], *_COOP_COLUMNS_LAYOUT),
        ("columns-dense", _coop_slices._coop_slices_kernel, configs.COOP_COLUMNS.cuda[0], "stride_xm", "stride_xl",
         dense, {}),
        ("transpose", _coop_slices._coop_slices_kernel, configs.COOP_TRANSPOSE.cuda[0], "stride_xl", "stride_xm",
         dense, {}),
        ("groups", _coop_slices._coop_groups_kernel, configs.GROUP_COOP.cuda[0], "stride_xr", "stride_xk", jagged,
         {"BLOCK_G": 64, "UNIFORM": False, "COUNT_WORDS": _coop_slices.count_words(False)}),
        # what the transpose would take on the jagged kernel (its rows the view's, the experts uniform groups along
        # the stacked N axis), its fused launch only: session 39 kept it on the dense kernel
        ("transpose-uniform", _coop_slices._coop_groups_kernel, configs.COOP_TRANSPOSE.cuda[0], "stride_xk",
         "stride_xr", [k for k in jagged if k != "offs_ptr"],
         {"BLOCK_G": 16, "UNIFORM": True, "COUNT_WORDS": _coop_slices.count_words(True)}),
    )  # fmt: skip


# The jagged kernel's arguments compiled 16-divisible. L and K 16-divisible too: Triton specializes them so at every
# issue #11 point, and the masks along them then stay constant over runs of 16 (16-byte loads and stores); compiled
# without it the transpose's first tile took 168 registers where the launch takes 128 (triton 3.6). The per-group
# strides of the jagged kernel are 0 on jagged views and on row-major colwise 3D input, and K * N - K for its q:
# 16-divisible too.
_COOP_JAGGED_DIVISIBLE = [
    "x_ptr", "q_ptr", "scales_ptr", "ws_ptr", "offs_ptr", "R", "K", "stride_qr", "stride_xg", "stride_qg",
]  # fmt: skip
#: colwise 3D's use of the jagged kernel on row-major input: (unit stride, the other, 16-divisible, constexprs).
_COOP_COLUMNS_LAYOUT = (
    "stride_xr", "stride_xk", [k for k in _COOP_JAGGED_DIVISIBLE if k != "offs_ptr"],
    {"BLOCK_G": 16, "UNIFORM": True, "COUNT_WORDS": 32},  # a line per counter: _coop_slices.count_words(True)
)  # fmt: skip


def _compile_coop(kernel, config, phase: int, layout: tuple, cap: int | None):
    """One phase of the cooperative slice kernel under ``config``, capped at ``cap`` registers, compiled for sm_90
    with ``layout`` (unit stride, the other stride, the 16-divisible arguments, extra constexprs)."""
    unit, other, divisible, extra = layout
    pointers = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "scales_ptr": "*fp32", "ws_ptr": "*i32", "offs_ptr": "*i32"}
    constants = {
        **config.kwargs, **extra, "PHASE": phase, "INT64_INDEX": False, unit: 1,
        **fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE),
    }  # fmt: skip
    pointer_args = {k: v for k, v in pointers.items() if k != "offs_ptr" or "offs_ptr" in divisible}
    return compile_sm90(kernel, constants, pointer_args, [*divisible, other], config.num_warps, cap)


def _coop_counts(kernel, config, phase: int, layout: tuple, cap: int | None) -> dict:
    """:func:`_compile_coop`'s kernel: registers, shared bytes, programs per SM, and its barriers, atomics and
    spills."""
    compiled = _compile_coop(kernel, config, phase, layout, cap)
    registers = loops(compiled)["registers"]
    shared = compiled.metadata.shared
    return {
        "registers": registers,
        "shared_bytes": shared,
        "programs_per_sm": blocks_per_sm(registers, config.num_warps, shared),
        **_barrier_counts(compiled, ("MEMBAR", "RED", "ATOM", "STL", "LDL")),
    }


def meetings() -> dict:
    """:func:`meeting_order` of every cooperative kernel's fused launch compiled for sm_90, under "<kernel> ttgir"
    and "<kernel> ptx": the slice kernel's uses (:func:`_coop_uses`), the tile kernel (fp8moe.kernels._group_tiles,
    64x128/w4) and the chunked kernel (fp8moe.kernels._group_chunks, 64x64/w4)."""
    from fp8moe.kernels import _coop
    from fp8moe.kernels._group_chunks import _group_chunks_kernel
    from fp8moe.kernels._group_tiles import _group_tiles_kernel

    fp8 = fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE)
    compiled = {
        op: _compile_coop(kernel, config, _coop.PHASE_FUSED, (unit, other, divisible, extra), None)
        for op, kernel, config, unit, other, divisible, extra in _coop_uses()
    }
    tiles_pointers = {**_POINTERS, "ws_ptr": "*i32"}
    compiled["tiles"] = compile_sm90(
        _group_tiles_kernel,
        {"LONG_COUNT": 0, "LONG_LIST": 1, "PHASE": int(_coop.PHASE_FUSED), "BLOCK_R": 64, "BLOCK_K": 128, "BLOCK_G": 64,
         "INT64_INDEX": False, "stride_xk": 1, **fp8},
        tiles_pointers, list(tiles_pointers), 4,
    )  # fmt: skip
    compiled["chunks"] = compile_sm90(
        _group_chunks_kernel,
        {"PHASE": int(_coop.PHASE_FUSED), "BLOCK_R": 64, "BLOCK_K": 64, "CHUNK_TILES": 8, "PROGRAMS_PER_SM": 4,
         "BLOCK_G": 16, "PACK_K": 4, "L2_HINTS": False, "INT64_INDEX": False, **fp8},
        _CHUNKS_POINTERS, list(_CHUNKS_POINTERS), 4,
    )  # fmt: skip
    return {
        f"{op} {name}": meeting_order(kernel.asm[name], level)
        for op, kernel in compiled.items()
        for level, name in enumerate(("ttgir", "ptx"))
    }


def _cuobjdump(*args: str) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=True).stdout


def loops(compiled) -> dict:
    """Registers per thread and, per loop (a backward branch), its instruction count and opcode counts."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        registers = int(re.search(r"REG:(\d+)", _cuobjdump("-res-usage", f.name)).group(1))
        sass = _cuobjdump("-sass", f.name)
    instructions = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            instructions.append((int(m.group(1), 16), m.group(2).strip()))
    found = []
    for address, text in instructions:
        branch = re.search(r"BRA (0x[0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address:
            target = int(branch.group(1), 16)
            body = [t for a, t in instructions if target <= a <= address]
            ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in body)
            found.append({"start": target, "end": address, "instructions": len(body), "opcodes": dict(ops)})
    return {"registers": registers, "instructions": len(instructions), "loops": found}


def _l2_policy_counts(compiled) -> dict:
    """A compiled kernel's PTX loads with an evict-last and with an evict-first L2 cache policy, its stores with an
    evict-first one, and the L2 policies it creates."""
    ptx = compiled.asm["ptx"].splitlines()
    loads = [line for line in ptx if "ld.global" in line]
    stores = [line for line in ptx if "st.global" in line]
    return {
        "loads_evict_last": sum("evict_last" in line and "L2::cache_hint" in line for line in loads),
        "loads_evict_first": sum("evict_first" in line and "L2::cache_hint" in line for line in loads),
        "stores_evict_first": sum("evict_first" in line and "L2::cache_hint" in line for line in stores),
        "l2_policies": sum("createpolicy" in line and "L2::evict_" in line for line in ptx),
    }


def l2_hints() -> dict:
    """L2 cache policies as compiled (:func:`_l2_policy_counts`): under "off" and "on", the chunked per-group kernel
    (64x64/w4, transposing view, fused launch) without and with its L2_HINTS (fp8moe.kernels._group_chunks); under
    "span <view> <n>", the span kernel (64x64/w4) with L2_HINTS = n (fp8moe.kernels._span.quantize_span)."""
    import torch

    from fp8moe.kernels._group_chunks import _group_chunks_kernel

    result = {}
    for hints in (False, True):
        constants = {
            "PHASE": 0, "BLOCK_R": 64, "BLOCK_K": 64, "CHUNK_TILES": 8, "PROGRAMS_PER_SM": 4, "BLOCK_G": 16,
            "PACK_K": 4, "L2_HINTS": hints, "INT64_INDEX": False,
            **fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE),
        }  # fmt: skip
        compiled = compile_sm90(_group_chunks_kernel, constants, _CHUNKS_POINTERS, list(_CHUNKS_POINTERS), 4)
        result["on" if hints else "off"] = _l2_policy_counts(compiled)
    for colwise in (False, True):
        for level in (0, 1, 2):
            compiled = compile_per_group(64, 64, 4, colwise, CAST_SATURATING_NATIVE, flags={"L2_HINTS": level})
            result[f"span {'colwise' if colwise else 'rowwise'} {level}"] = _l2_policy_counts(compiled)
    return result


def _grid_dependency_counts(compiled) -> dict:
    """A compiled kernel's grid dependency control in PTX: its griddepcontrol.wait and .launch_dependents, whether
    the wait comes before the first global load and the first global store, and its registers per thread."""
    ptx = compiled.asm["ptx"].splitlines()

    def first(pattern: str) -> int:
        return next((i for i, line in enumerate(ptx) if pattern in line), len(ptx))

    wait = first("griddepcontrol.wait")
    return {
        "waits": sum("griddepcontrol.wait" in line for line in ptx),
        "launch_dependents": sum("griddepcontrol.launch_dependents" in line for line in ptx),
        "wait_before_loads": wait < first("ld.global"),
        "wait_before_stores": wait < first("st.global"),
        "registers": loops(compiled)["registers"],
    }


def dependent_launch() -> dict:
    """The span kernels (64x64/w4: the rowwise and transposing views of the per-group kernel, the dual op's) compiled
    for sm_90 without and with DEPENDENT_LAUNCH (fp8moe.kernels._per_group.jagged_program), as
    :func:`_grid_dependency_counts` reads them, under "<kernel> off" and "<kernel> on"."""
    result = {}
    for on in (False, True):
        state = "on" if on else "off"
        for colwise in (False, True):
            compiled = compile_per_group(64, 64, 4, colwise, CAST_SATURATING_NATIVE, flags={"DEPENDENT_LAUNCH": on})
            result[f"{'colwise' if colwise else 'rowwise'} {state}"] = _grid_dependency_counts(compiled)
        result[f"dual {state}"] = _grid_dependency_counts(compile_dual(64, 64, 4, flags={"DEPENDENT_LAUNCH": on}))
    return result


def one_read_gap(block_r: int = 64, group: int = 128, warps: int = 4) -> dict:
    """The kernels of benchmarks/probe_one_read_gap.py's ladder, colwise view, compiled for sm_90: per variant its
    registers per thread, instructions and the programs an SM holds at once (:func:`blocks_per_sm`). The ``op``
    rows are the per-group kernel itself (both of its paths compiled)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import probe_one_read_gap
    import transpose_ceiling

    fp8 = fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE)
    compiled = {}
    for columns_fastest in (False, True):
        constants = {
            "SLICE": group, "BLOCK_K": group, "BLOCK_N": block_r, "MODE": transpose_ceiling.MODES["ptr"],
            "COLUMNS_FASTEST": columns_fastest, "x_desc": None, "q_desc": None,
        }  # fmt: skip
        pointers = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv"}
        name = "ceiling_columns_fastest" if columns_fastest else "ceiling"
        compiled[name] = compile_sm90(
            transpose_ceiling._cast_t_kernel, constants, pointers, [*pointers, "KT", "N"], warps
        )
    for order in ("", "/g"):
        rungs = (("one_read_fixed_bounds", group, True, False), ("one_read", 0, True, False))
        if not order:
            rungs += (("one_read_no_edges", 0, False, False), ("one_read_edge_loop", 0, True, True))
        for bounds, slice_len, edges, edge_loop in rungs:
            constants = {
                **fp8, "SLICE": slice_len, "BLOCK_R": block_r, "BLOCK_K": group, "GROUPS_FASTEST": order == "/g",
                "stride_xr": 1, "EDGES": edges, "EDGE_LOOP": edge_loop,
            }  # fmt: skip
            compiled[bounds + order] = compile_sm90(
                probe_one_read_gap._one_read_kernel, constants, _POINTERS, [*_POINTERS, "R", "stride_qr", "stride_xk"],
                warps,
            )  # fmt: skip
        constants = {
            **fp8, "BLOCK_R": block_r, "BLOCK_K": group, "PACK_K": 4, "INT64_INDEX": False, "stride_xr": 1,
            **SPAN_FLAGS, "GROUPS_FASTEST": order == "/g",
        }  # fmt: skip
        compiled["op" + order] = compile_sm90(
            _per_group_rows_kernel, constants, _POINTERS, [*_POINTERS, "R", "K", "stride_qr", "stride_xk"], warps
        )
        constants = {**constants, "BLOCK_K": group // 2, "ONE_READ_K": group}
        compiled["op_half_loop" + order] = compile_sm90(
            _per_group_rows_kernel, constants, _POINTERS, [*_POINTERS, "R", "K", "stride_qr", "stride_xk"], warps
        )
    result = {}
    for name in probe_one_read_gap.VARIANTS:
        counts = loops(compiled[name])
        result[name] = {
            "registers": counts["registers"],
            "instructions": counts["instructions"],
            "blocks_per_sm": blocks_per_sm(counts["registers"], warps),
        }
    return result


def long_slices() -> dict:
    """The kernels of benchmarks/probe_long_slices.py (its long and short variants), compiled for sm_90, per
    variant: registers, shared memory, per loop the cp.async copies (LDGSTS), the bulk tensor copies (UTMALDG) and
    the plain global loads, and the programs an SM holds at once by registers and by shared memory. Pipelined loops
    (``/s<S>``, S > 1) must have their loads as cp.async into S shared-memory stages, descriptor loops (``/d``) as
    bulk tensor copies."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import probe_long_slices

    fp8 = fp8_constexprs(torch.float8_e4m3fn, False, CAST_SATURATING_NATIVE)
    pointers = {"x_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32"}
    divisible = [*pointers, "K", "N", "stride_xe", "stride_xk", "stride_qe", "stride_qn"]
    result = {}
    for name in probe_long_slices.VARIANTS + probe_long_slices.SHORT_VARIANTS:
        v = probe_long_slices.parse_variant(name)
        constants = {
            **fp8, "BLOCK_K": v["block_k"], "BLOCK_N": v["block_n"], "STAGES": v["stages"],
            "PERSISTENT": v["per_sm"] > 0, "L2_HINTS": v["hints"], "DESCRIPTOR": v["descriptor"],
        }  # fmt: skip
        # A descriptor argument is typed by its element type and box, as Triton specialises it at launch.
        x_desc = f"tensordesc<bf16[{v['block_k']}, {v['block_n']}]>" if v["descriptor"] else "*bf16"
        compiled = compile_sm90(
            probe_long_slices._long_slices_kernel, constants, {**pointers, "x_desc": x_desc}, divisible, v["warps"]
        )
        counts = loops(compiled)
        shared = compiled.metadata.shared
        result[name] = {
            "registers": counts["registers"],
            "shared_bytes": shared,
            "cp_async_per_loop": _per_loop(counts, "LDGSTS"),
            "global_loads_per_loop": _per_loop(counts, "LDG."),
            "bulk_tensor_per_loop": _per_loop(counts, "UTMALDG"),
            "blocks_per_sm": blocks_per_sm(counts["registers"], v["warps"], shared),
        }
    return result


def _per_loop(counts: dict, prefix: str) -> list[int]:
    """Per loop of :func:`loops`' counts, its instructions whose opcode starts with ``prefix``."""
    return [sum(n for op, n in loop["opcodes"].items() if op.startswith(prefix)) for loop in counts["loops"]]


def cap_for_one_more_program(registers: int, warps: int) -> int | None:
    """The largest register cap (a multiple of 8) at which an SM holds one more program of ``warps`` warps than at
    ``registers``; None where threads, not registers, already limit it."""
    more = blocks_per_sm(registers, warps) + 1
    if more * warps * 32 > SM_THREADS:
        return None
    return SM_REGISTERS // (more * warps * 32) // 8 * 8


def _span_flags(config) -> dict:
    """The span flags (SPAN_FLAGS' names) a candidate config sets, as compile_per_group / compile_dual take them."""
    return {name: config.kwargs[name] for name in SPAN_FLAGS if name in config.kwargs}


def register_caps() -> dict:
    """Per candidate tile of the span kernel's lists (fp8moe.configs.PER_GROUP on both views, PER_GROUP_DUAL), as
    compiled for sm_90: registers and programs per SM, then the same with the cap that fits one more program per SM
    (:func:`cap_for_one_more_program`), and the spill loads and stores (LDL, STL) that cap puts inside each loop.
    A cap with none there is a candidate that changes residency and little else."""
    from fp8moe.configs import PER_GROUP, PER_GROUP_DUAL

    builds = {**span_builds(PER_GROUP.name, PER_GROUP.cuda), **span_builds(PER_GROUP_DUAL.name, PER_GROUP_DUAL.cuda)}
    result = {}
    for name, (config, build) in builds.items():
        warps = config.num_warps
        base = loops(build(None))
        row = {"registers": base["registers"], "blocks_per_sm": blocks_per_sm(base["registers"], warps)}
        cap = cap_for_one_more_program(base["registers"], warps)
        if cap is not None:
            capped = loops(build(cap))
            row.update(
                cap=cap,
                capped_registers=capped["registers"],
                capped_blocks_per_sm=blocks_per_sm(capped["registers"], warps),
                loop_spills=[loop["opcodes"].get("LDL", 0) + loop["opcodes"].get("STL", 0) for loop in capped["loops"]],
            )
        result[name] = row
    return result


def span_builds(list_name: str, candidates) -> dict:
    """label -> (config, build(cap)) for each candidate config of the span kernel's list ``list_name``: the
    per-group list's on both views ("per_group_scales colwise 64x64/w4/g"), the dual op's on its one; build(cap)
    compiles it for sm_90 with a register cap per thread (None for none)."""
    from fp8moe.configs import PER_GROUP, PER_GROUP_DUAL, describe

    if list_name not in (PER_GROUP.name, PER_GROUP_DUAL.name):
        raise SystemExit(f"no span-kernel candidate list {list_name!r}: {PER_GROUP.name!r} or {PER_GROUP_DUAL.name!r}")
    builds = {}
    for config in candidates:
        tile = (config.kwargs["BLOCK_R"], config.kwargs["BLOCK_K"], config.num_warps)
        flags = _span_flags(config)
        if list_name == PER_GROUP_DUAL.name:
            builds[f"{list_name} {describe(config)}"] = (
                config,
                lambda cap, t=tile, f=flags: compile_dual(*t, maxnreg=cap, flags=f),
            )
            continue
        for colwise in (False, True):
            builds[f"{list_name} {'colwise' if colwise else 'rowwise'} {describe(config)}"] = (
                config,
                lambda cap, t=tile, c=colwise, f=flags: compile_per_group(
                    *t, c, CAST_SATURATING_NATIVE, maxnreg=cap, flags=f
                ),
            )
    return builds


def candidate_registers(specs: list[str]) -> dict:
    """Registers, instructions and programs per SM of candidate configs named as benchmarks/tune_configs.py
    --candidates names them (``per_group_scales=64x128/w4/g/o256,...``, ``per_group_colwise_scales_dual=...``;
    fp8moe.configs.parse_config; a ``/rM`` cap is compiled in), compiled for sm_90: what a candidate costs in
    residency before a GPU times it. ``coop_columns=...`` tiles (BLOCK_L x BLOCK_M) are colwise 3D's fused launch on
    row-major input, counted as :func:`coop_slices` counts it (their keys "coop_columns <tile>")."""
    from fp8moe.configs import COOP_COLUMNS, describe, parse_config

    result = {}
    for spec in specs:
        list_name, _, tiles = spec.partition("=")
        if list_name == COOP_COLUMNS.name:  # colwise 3D's fused launch on row-major input
            from fp8moe.kernels import _coop, _coop_slices

            for tile in tiles.split(","):
                config = parse_config(tile, ["BLOCK_L", "BLOCK_M"])
                counts = _coop_counts(_coop_slices._coop_groups_kernel, config, _coop.PHASE_FUSED,
                                      _COOP_COLUMNS_LAYOUT, getattr(config, "maxnreg", None))  # fmt: skip
                result[f"{list_name} {describe(config)}"] = counts
            continue
        candidates = [parse_config(tile, ["BLOCK_R", "BLOCK_K"]) for tile in tiles.split(",")]
        for label, (config, build) in span_builds(list_name, candidates).items():
            counts = loops(build(getattr(config, "maxnreg", None)))
            result[label] = {
                "registers": counts["registers"],
                "instructions": counts["instructions"],
                "blocks_per_sm": blocks_per_sm(counts["registers"], config.num_warps),
            }
    return result


def main(argv: list[str] | None = None) -> int:
    """Print the counts for the requested tile, both views (``--json``: one JSON object per view)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", default="64,64,4", help="BLOCK_R,BLOCK_K,num_warps")
    parser.add_argument("--cast-mode", type=int, default=CAST_SATURATING_NATIVE, help="CAST_MODE (fp8moe.backend)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--x-type", default="bf16", choices=("bf16", "fp16", "fp32"), help="the input's type")
    parser.add_argument(
        "--pack",
        type=int,
        choices=(1, 4),
        default=None,
        help="PACK_K (default: the launchers' rule: 4 colwise, 1 rowwise)",
    )
    parser.add_argument("--folds", action="store_true", help="the fold kernels' barriers and atomics (JSON) instead")
    parser.add_argument(
        "--l2-hints", action="store_true", help="the chunked and span kernels' L2 cache policies (JSON) instead"
    )
    parser.add_argument(
        "--gap", action="store_true", help="registers and residency of probe_one_read_gap.py's kernels (JSON) instead"
    )
    parser.add_argument(
        "--dependent-launch", action="store_true", help="the span kernels' grid dependency control (JSON) instead"
    )
    parser.add_argument(
        "--two-pass-only", action="store_true", help="the span kernel without its one-read branch (ONE_READ=False)"
    )
    parser.add_argument(
        "--one-read-k", type=int, default=0, help="the one-read tile's width when it differs from BLOCK_K (ONE_READ_K)"
    )
    parser.add_argument(
        "--edges-in-tile", action="store_true", help="the one-read tile holds the edges (EDGES_IN_TILE)"
    )
    parser.add_argument(
        "--edge-loop", action="store_true", help="the partial edge chunks one at a time in a loop (EDGE_LOOP)"
    )
    parser.add_argument(
        "--caps", action="store_true", help="each per-group tile with the register cap of one more program (JSON)"
    )
    parser.add_argument(
        "--candidates",
        action="append",
        default=[],
        metavar="LIST=RxK/wN,...",
        help="registers and programs per SM of candidates named as tune_configs.py --candidates names them (JSON)",
    )
    parser.add_argument(
        "--long-slices", action="store_true", help="registers, shared memory and cp.async of probe_long_slices.py"
    )
    parser.add_argument(
        "--coop-slices", action="store_true", help="the cooperative slice kernel's registers and barriers (JSON)"
    )
    parser.add_argument(
        "--meetings", action="store_true", help="how each cooperative kernel's programs meet: barriers (JSON)"
    )
    parser.add_argument(
        "--wait-form",
        choices=arrival_forms.FORMS,
        default="barrier",
        help="with --coop-slices or --meetings: the slice kernel's meeting in this form (benchmarks/arrival_forms.py)",
    )
    parser.add_argument(
        "--gap-group", type=int, default=128, help="with --gap: tokens per group, the one-read tile's token extent"
    )
    args = parser.parse_args(argv)
    arrival_forms.apply(args.wait_form)
    if args.candidates:
        print(json.dumps(candidate_registers(args.candidates)))
        return 0
    if args.gap:
        print(json.dumps(one_read_gap(group=args.gap_group)))
        return 0
    if args.long_slices:
        print(json.dumps(long_slices()))
        return 0
    for wanted, report in ((args.caps, register_caps), (args.folds, fold_barriers),
                           (args.l2_hints, l2_hints), (args.dependent_launch, dependent_launch),
                           (args.coop_slices, coop_slices), (args.meetings, meetings)):  # fmt: skip
        if wanted:
            print(json.dumps(report()))
            return 0
    block_r, block_k, warps = (int(v) for v in args.tile.split(","))
    per_thread = block_r * block_k // (32 * warps)
    result = {}
    for colwise in (False, True):
        view = "colwise" if colwise else "rowwise"
        flags = {
            "ONE_READ": not args.two_pass_only, "ONE_READ_K": args.one_read_k, "EDGES_IN_TILE": args.edges_in_tile,
            "EDGE_LOOP": args.edge_loop,
        }  # fmt: skip
        compiled = compile_per_group(
            block_r, block_k, warps, colwise, args.cast_mode, args.x_type, args.pack, flags=flags
        )
        counts = loops(compiled)
        result[view] = {**counts, "elements_per_thread": per_thread}
        if not args.json:
            print(f"{view} view, tile {block_r}x{block_k}/w{warps} ({per_thread} elements per thread):")
            print(f"registers per thread: {counts['registers']}, instructions: {counts['instructions']}")
            for loop in counts["loops"]:
                top = sorted(loop["opcodes"].items(), key=lambda kv: -kv[1])[:8]
                print(
                    f"  loop {loop['start']:#x}-{loop['end']:#x}: {loop['instructions']} instructions "
                    f"({', '.join(f'{op} {n}' for op, n in top)})"
                )
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
