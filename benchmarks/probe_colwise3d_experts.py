"""Colwise 3D on row-major input, the cooperative slice kernel's dense launch against its jagged launch with the
experts as uniform groups, at the issue #11 3D points: one process, one GPU, every row bitwise against fp8ref.

Why: on an H100 the jagged kernel ran the bytes of colwise 3D at (16, 4096, 4096), as per-group colwise at
65536 x 4096 G = 16, in 320.6 us at 128 registers (4 programs per SM), where the dense launch of the same kernel
took 371.1 us at 151 (3 per SM), the same 256 x 64 tiles in the same item order
(benchmarks/results/s38-summary.md, section 5). Since session 39 colwise 3D launches the jagged kernel
(fp8moe.kernels._coop_slices.launch_coop_experts: group g is expert g, x and q moved to its block). Compiled for
sm_90 on the CPU (triton 3.6, benchmarks/sass_counts.py --coop-slices) that launch takes 141 registers at 16
experts (3 per SM); capped at 128 it spills 3, and since session 40 the op takes the cap for more than one expert
(fp8moe.configs.COOP_COLUMNS). Variants:

- ``dense``: the dense launch (fp8moe.kernels._coop_slices.launch_coop_slices on x.mT under COOP_COLUMNS' uncapped
  tile), colwise 3D's default on CUDA in sessions 37-38;
- ``rows``: the batched row kernel (FP8MOE_COLWISE_3D_KERNEL=rows);
- ``experts``: the op, its default now;
- ``experts/uncapped`` and ``experts/r128``: the op with COOP_COLUMNS' 256 x 64 tile forced on CUDA, without and
  with the 128-register cap, whatever the rule picks.

::

    python benchmarks/probe_colwise3d_experts.py > "$OUT/colwise3d-experts.md"
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

import torch

import fp8moe  # before triton
from fp8moe import configs, replay
from fp8moe.backend import backend_for
from fp8moe.bench import _SHAPES_3D, _time, copy_bandwidth_gbps, ideal_bytes, same_outputs
from fp8moe.kernels import _coop_slices
from fp8ref.contracts import contract

#: Where the inputs live (the CPU test of this script runs it through the interpreter).
DEVICE = "cuda"
#: The call's arguments: e4m3fn, no pow2 rule (the bench's).
ARGS = {"fp8_dtype": torch.float8_e4m3fn, "round_scales_to_power_of_2": False}
#: The tiles ``experts/uncapped`` and ``experts/r128`` force on CUDA.
FORCED = {"experts/uncapped": "256x64/w4", "experts/r128": "256x64/w4/r128"}


@contextlib.contextmanager
def forced_columns_tile(tile: str) -> Iterator[None]:
    """COOP_COLUMNS' rule gives CUDA ``tile`` (fp8moe.configs.describe's form) inside the block; plans forgotten on
    the way in and out (a plan replays the config it recorded). The rule, not the table's candidate list: the rule
    holds the list it was made with, so a patched list alone changes nothing (session 39's first run of this probe
    timed the uncapped tile twice that way)."""
    table = configs.COOP_COLUMNS
    saved = table.rule
    forced = configs.parse_config(tile, ["BLOCK_L", "BLOCK_M"])
    object.__setattr__(table, "rule", lambda backend, args: forced if backend.kind == "cuda" else saved(backend, args))
    replay.forget()
    try:
        yield
    finally:
        object.__setattr__(table, "rule", saved)  # frozen dataclass: a tool-only patch, undone here
        replay.forget()


def dense_launch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Colwise 3D of the (E, K, N) ``x`` by the dense launch of the cooperative kernel, as the op ran it before."""
    e, k, n = x.shape
    q = torch.empty_strided((e, k, n), (k * n, 1, k), dtype=ARGS["fp8_dtype"], device=x.device)
    scales = torch.empty((e, 1, n), dtype=torch.float32, device=x.device)
    _coop_slices.launch_coop_slices(
        x.mT, q.mT, scales.view(e * n), configs.COOP_COLUMNS, ARGS["fp8_dtype"], False, backend_for(x.device)
    )
    return q, scales


def variants(x: torch.Tensor) -> Iterator[tuple[str, Callable[[], contextlib.AbstractContextManager], Callable]]:
    """(variant, context factory, call) per measured call on ``x``."""
    op = lambda: fp8moe.colwise_3d_scale_and_cast(x, **ARGS)
    # the dense launch as sessions 37-38 ran it: COOP_COLUMNS' rule now caps the tile past one expert
    yield "dense", lambda: forced_columns_tile(FORCED["experts/uncapped"]), lambda: dense_launch(x)
    yield "rows", lambda: configs.forced_kernel("COLWISE_3D_KERNEL", "rows"), op
    yield "experts", contextlib.nullcontext, op
    for name, tile in FORCED.items():
        yield name, lambda tile=tile: forced_columns_tile(tile), op


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=";".join(",".join(map(str, s)) for s in _SHAPES_3D), help="E,K,N;E,K,N;...")
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    c = contract("colwise_3d_scale_and_cast")
    copy = copy_bandwidth_gbps()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {copy:.0f} GB/s, bf16 row-major (E, K, N) input\n")
    print("| shape | variant | us (graph) | % of copy | vs dense | bitwise |")
    print("|---|---|---:|---:|---:|---|")
    for shape in shapes:
        gen = torch.Generator(device=DEVICE).manual_seed(0)
        x = torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.bfloat16)
        expected = c.call(c.reference, (x,), None, **ARGS)  # on the GPU, as the bench checks (fp8ref is exact there)
        nbytes = ideal_bytes(c, shape, 1)
        times = {}
        for name, factory, call in variants(x):
            with factory():
                ok = same_outputs(call(), expected)
                graph, eager = _time(call)
            us = times[name] = graph if graph is not None else eager[0]
            pct = 100 * nbytes / (us * 1e-6) / 1e9 / copy
            ratio = f"{us / times['dense']:.2f}"
            label = "x".join(map(str, shape))
            print(f"| {label} | {name} | {us:.1f} | {pct:.0f}% | {ratio} | {'yes' if ok else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
