"""The cooperative slice kernel with and without the barrier before its arrival, run many times on inputs where a
missed fold changes bytes: does the race session 48 found in Triton 3.6's code show on the GPU, and is it gone with
the barrier.

    python benchmarks/probe_coop_race.py                      # every form, three ops, 3000 runs each (GPU)
    python benchmarks/probe_coop_race.py --runs 2 --device cpu --colwise-shape 1,1024,32 \
        --transpose-shape 2,16,512 --per-group-shape 4096,16,2             # a smoke run (interpreter)
    python benchmarks/probe_coop_race.py --ops colwise_3d --colwise-shape 128,5120,8192 --forms no-barrier,barrier \
        --colwise-tiles 256x64/w4,256x64/w4/r128 --runs 1000    # session 47's point, its two tiles forced (GPU)

Why: in the fused launch of fp8moe.kernels._coop_slices (colwise 3D on row-major input; the atomic transpose; the
per-group ops' jagged "coop" launch) the threads that hold the reduced amax fold it into the workspace, in warps 0 and
1 of a 4-warp program, and one thread of warp 0 then counts the program in with a release atomic. A release orders
only what its own thread, and threads it has synchronized with, did before it; compiled by Triton 3.6 (the GPU's)
the kernel had no barrier between the folds and the arrival (benchmarks/sass_counts.py --meetings, run under 3.6), so
a program of the slice could see the count complete, read the amax without warp 1's fold and cast its chunk with too
small an amax. Session 47's bench once marked colwise 3D at (128, 5120, 8192) not bitwise, which seven later runs
did not repeat (benchmarks/results/s47-summary.md, section 2). Session 48 put the barrier in
(fp8moe.kernels._coop.arrive).

Forms (benchmarks/arrival_forms.py): "barrier" is the kernel as it is; "no-barrier" the code before session 48;
"acquire" adds one acquire atomic on the count after the wait (Triton 3.6 compiles it to atom.acquire.max, the same
141 registers for colwise 3D's tile), the order the PTX memory model makes formal (SPEC §10.2, "Arrival order"):
what that costs; "poll-acquire" (session 50) makes every poll of the count an acquire load instead, with no
instruction added (CUDA only: the probe refuses it in the interpreter). Each (form, op) runs in a process of its
own: Triton keys a kernel's compiled code on the helpers it calls, so the form is set before anything compiles, and
the other forms' code is never reused.

Inputs: x ~ N(0, 1) in bf16 (E, K, N), row-major, and in every slice one spike of 1000 at a position drawn at random
among the last 128 of the slice's reduced axis (K for colwise 3D, whose slices are the columns (e, n); N for the
transpose, whose slices are (e, k); a group's tokens for per_group_colwise_scales at G = 16 long groups, where
"auto" takes the jagged cooperative launch, whose slices are (g, n)), so that each slice's amax sits in its last
chunk, the one most often the last to arrive: a chunk that reads the amax without that fold scales its codes by
about 1000 / 4 too much, and most of them change. Each run's codes and scales are compared with fp8ref's, byte for
byte, where they lie; a line per differing run (the codes and scales that differ) and one summary line per (form,
op), with the microseconds per call of 200 calls made back to back after the runs (``us_per_call``: what the barrier
costs, the forms timed one after the other on one GPU) and the meetings of the kernels the process compiled
(benchmarks/meeting_order.py on their PTX: that the form ran as named). The exit status is 1 where the "barrier"
form, the kernel as it ships, differs in any run (or a process fails).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys

import torch

import fp8moe  # before triton: without a GPU it turns the interpreter on first

# isort: split
import arrival_forms  # benchmarks/, this script's folder
from arrival_forms import CUDA_ONLY_FORMS, FORMS

from fp8ref import ops as ref_ops

#: op name -> (the fp8moe call, the fp8ref call, the reduced axis of x's (E, K, N); None: jagged, x (Ktot, N) with G
#: uniform groups along Ktot)
OPS = {  # in the order the parent runs them: colwise 3D, where session 47 saw bytes differ, first
    "colwise_3d": (fp8moe.colwise_3d_scale_and_cast, ref_ops.colwise_3d_scale_and_cast, 1),
    "per_group_colwise": (fp8moe.per_group_colwise_scales, ref_ops.per_group_colwise_scales, None),
    "transpose_atomic": (
        lambda x: fp8moe.rowwise_3d_transpose_rhs(x, method="atomic"),
        ref_ops.rowwise_3d_transpose_rhs,
        2,
    ),
}
SPIKE = 1000.0
#: The spikes lie in each slice's last SPIKE_SPAN positions: inside its last chunk (every tile of either use is at
#: least 128 long), whose program takes the last ticket of the slice block and so most often arrives last, while the
#: block's other programs poll. Its late fold is the one they would miss.
SPIKE_SPAN = 128


def spiked_input(shape: tuple[int, int, int], reduced: int, device: str, seed: int = 0) -> torch.Tensor:
    """x (E, K, N) bf16, row-major: N(0, 1) with one SPIKE per slice along axis ``reduced``, at a random one of its
    last SPIKE_SPAN positions (all of them where the axis is shorter). Drawn on ``device`` (the 5.4 G elements of
    (128, 5120, 8192) would take minutes on the host), so the draws depend on the device."""
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=generator, device=device, dtype=torch.bfloat16)
    e, k, n = shape
    length = shape[reduced]
    span = min(SPIKE_SPAN, length)
    at = length - 1 - torch.randint(0, span, (e, n if reduced == 1 else k), generator=generator, device=device)
    experts = torch.arange(e, device=device)[:, None]
    if reduced == 1:  # slices (e, n) along K
        x[experts, at, torch.arange(n, device=device)[None, :]] = SPIKE
    else:  # slices (e, k) along N
        x[experts, torch.arange(k, device=device)[None, :], at] = SPIKE
    return x


def op_inputs(op: str, shape: tuple[int, ...], device: str) -> tuple:
    """The arguments of ``op`` at ``shape``: (x,) for the 3D ops (:func:`spiked_input`); (x, offs) for the jagged op,
    shape (Ktot, N, G): x (Ktot, N) with a spike in each column of each of G equal groups, among the group's last
    SPIKE_SPAN tokens (the slices of its transposing view are (g, n), along the tokens)."""
    reduced = OPS[op][2]
    if reduced is not None:
        return (spiked_input(shape, reduced, device),)
    ktot, n, groups = shape
    # G experts of Ktot / G tokens each: as (G, Ktot / G, N) the slices run along axis 1
    x = spiked_input((groups, ktot // groups, n), 1, device).reshape(ktot, n)
    offs = torch.arange(1, groups + 1, dtype=torch.int32, device=device) * (ktot // groups)
    return x, offs


def differing(out, expected) -> tuple[int, int]:
    """(codes, scales) of ``out`` whose bytes differ from ``expected``'s (0, 0 without a copy where all match)."""
    (q, scales), (q_ref, scales_ref) = out, expected
    if q.shape != q_ref.shape or q.stride() != q_ref.stride() or scales.shape != scales_ref.shape:
        raise AssertionError(f"layout differs: {q.shape} {q.stride()} against {q_ref.shape} {q_ref.stride()}")
    codes, want_codes = q.view(torch.uint8), q_ref.view(torch.uint8)
    words, want_words = scales.view(torch.int32), scales_ref.view(torch.int32)
    if torch.equal(codes, want_codes) and torch.equal(words, want_words):
        return 0, 0
    return int((codes != want_codes).sum()), int((words != want_words).sum())


def compiled_meetings() -> list[dict]:
    """benchmarks/meeting_order.py on the PTX of every slice-kernel variant this process compiled (what shows that a
    form ran as named: "no-barrier" arrives with no barrier after the folds); empty in the interpreter."""
    from meeting_order import meeting_order

    from fp8moe.kernels import _coop_slices

    found = []
    for kernel in (_coop_slices._coop_groups_kernel, _coop_slices._coop_slices_kernel):
        for caches in getattr(kernel, "device_caches", {}).values():
            for compiled in caches[0].values():
                ptx = getattr(compiled, "asm", {}).get("ptx")
                if ptx:
                    found.append({"kernel": kernel.__name__, **meeting_order(ptx, 1)})
    return found


def time_calls(call, calls: int) -> float:
    """Microseconds per call of ``calls`` calls made back to back between two CUDA events, after one untimed call
    (the queue stays full: each call's kernel takes longer than the host takes to launch the next)."""
    call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        call()
    end.record()
    end.synchronize()
    return round(start.elapsed_time(end) * 1000 / calls, 1)


def run_form(
    form: str, op: str, shape: tuple[int, int, int], runs: int, device: str, tile: str = "", timed: int = 200
) -> dict:
    """``runs`` calls of ``op`` in ``form`` (this process: nothing of the slice kernel may have compiled yet), then
    ``timed`` calls timed back to back on a GPU: each form's cost beside the other's, one machine. ``tile``: colwise
    3D's cooperative tile forced (a COOP_COLUMNS candidate as fp8moe.configs.describe names it; "" for the rule's)."""
    refused = interpreter_refuses([form], device)
    if refused:
        raise SystemExit(refused)
    arrival_forms.apply(form)
    call, reference, _ = OPS[op]
    args = op_inputs(op, shape, device)
    expected = reference(*args)
    labels = {"form": form, "op": op, **({"tile": tile} if tile else {})}
    bad = 0
    with forced_columns_tile(tile):
        for attempt in range(runs):
            codes, scales = differing(call(*args), expected)
            if codes or scales:
                bad += 1
                print(json.dumps({**labels, "run": attempt, "codes": codes, "scales": scales}), flush=True)
        us = time_calls(lambda: call(*args), timed) if device != "cpu" else None
    summary = {**labels, "shape": list(shape), "runs": runs, "differing_runs": bad, "us_per_call": us,
               "meeting": compiled_meetings()}  # fmt: skip
    print(json.dumps(summary), flush=True)
    return summary


def interpreter_refuses(forms, device: str) -> str:
    """Why the forms among ``forms`` that poll with inline PTX (CUDA_ONLY_FORMS) cannot run on ``device``: the CPU,
    where the interpreter runs no inline PTX; "" where every form can."""
    cuda_only = sorted(set(forms) & set(CUDA_ONLY_FORMS))
    if device != "cpu" or not cuda_only:
        return ""
    return f"forms {cuda_only} poll with inline PTX, which the interpreter cannot run: they need a CUDA GPU"


def columns_tile_index(tile: str) -> int:
    """The index of ``tile`` (as fp8moe.configs.describe names it) in colwise 3D's CUDA list of cooperative tiles;
    SystemExit naming the list where it is not there."""
    from fp8moe import configs

    named = [configs.describe(cfg) for cfg in configs.COOP_COLUMNS.cuda]
    if tile not in named:
        raise SystemExit(f"no COOP_COLUMNS tile {tile!r}: the CUDA list holds {named}")
    return named.index(tile)


def forced_columns_tile(tile: str):
    """Colwise 3D's cooperative tile (COOP_COLUMNS) forced to ``tile`` inside the block (tune_configs.forced); a
    null context for ""."""
    if not tile:
        return contextlib.nullcontext()
    from tune_configs import forced

    from fp8moe import configs

    return forced({configs.COOP_COLUMNS.name}, columns_tile_index(tile))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--colwise-shape", default="16,8192,5120", help="E,K,N of colwise 3D (32 chunks of 256)")
    parser.add_argument("--transpose-shape", default="16,5120,8192", help="E,K,N of the atomic transpose")
    parser.add_argument(
        "--per-group-shape", default="65536,2048,16", help="Ktot,N,G of per_group_colwise_scales (the jagged coop)"
    )
    parser.add_argument("--form", choices=FORMS, help="run this form of one op here (the parent runs each so)")
    parser.add_argument(
        "--forms", default="", help="the forms the parent runs, in order (default: all, those the device can run)"
    )
    parser.add_argument("--op", choices=tuple(OPS))
    parser.add_argument("--ops", default=",".join(OPS), help="the ops the parent runs, in order")
    parser.add_argument(
        "--colwise-tiles", default="", help="colwise 3D's cooperative tiles to force, one process each ('': the rule's)"
    )
    parser.add_argument("--tile", default="", help="the tile this process forces (the parent passes it)")
    args = parser.parse_args(argv)
    shapes = {
        "colwise_3d": args.colwise_shape,
        "transpose_atomic": args.transpose_shape,
        "per_group_colwise": args.per_group_shape,
    }
    if args.form:
        shape = tuple(int(d) for d in shapes[args.op].split(","))
        summary = run_form(args.form, args.op, shape, args.runs, args.device, args.tile)
        return 1 if args.form == "barrier" and summary["differing_runs"] else 0  # the kernel as it ships
    runnable = [form for form in FORMS if not interpreter_refuses([form], args.device)]
    forms, ops = (args.forms.split(",") if args.forms else runnable), args.ops.split(",")
    for chosen, known, what in ((forms, FORMS, "forms"), (ops, tuple(OPS), "ops")):
        if set(chosen) - set(known):
            parser.error(f"unknown {what} {sorted(set(chosen) - set(known))}: choose from {known}")
    refused = interpreter_refuses(forms, device=args.device)
    if refused:
        parser.error(refused)
    tiles = args.colwise_tiles.split(",")
    for tile in filter(None, tiles):
        columns_tile_index(tile)  # before any process starts: a misspelt tile would cost a device call
    failed = 0
    for op in ops:
        for tile in tiles if op == "colwise_3d" else [""]:
            for form in forms:
                command = [sys.executable, __file__, "--form", form, "--op", op, "--runs", str(args.runs),
                           "--device", args.device, "--colwise-shape", args.colwise_shape,
                           "--transpose-shape", args.transpose_shape,
                           "--per-group-shape", args.per_group_shape, "--tile", tile]  # fmt: skip
                failed += subprocess.run(command).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
