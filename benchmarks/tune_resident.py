"""Time the per-group ops' resident launch (fp8moe.kernels._per_group.launch_by_group_length) on one GPU, one run.

    python benchmarks/tune_resident.py --out benchmarks/results/h200-resident-<run>.md

For each per-group point of issue #11 with short groups (G >= 64: mean groups of 130-260 tokens) it times the op
three ways, CUDA-graph replay, every run first checked bitwise against fp8ref:

- ``single``: no resident launch (RESIDENT_BOUNDS empty), one autotuned launch owns every group, the path before
  the resident launch existed;
- ``resident<B> <tile>``: for each bound B and each candidate tile of that bound's list, the resident launch forced
  to that tile and the long launch (SHORT_UP_TO = B) autotuned as in production;
- with ``--bytes``, the same with byte stores (PACK_K = 1, ``/bytes``) on the transposing views, where the
  kernels store words.

The table gives each time as a fraction of the point's ``single`` time and as % of the copy bandwidth measured in
the same run: what decides the bounds and tile lists of fp8moe.configs.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import sys

import torch
from tune_configs import byte_stores, point_label

import fp8moe  # imported before triton, as fp8moe requires
import fp8moe.configs as configs_module
from fp8moe import replay
from fp8moe.bench import ISSUE11_POINTS, Point, copy_bandwidth_gbps, ideal_bytes, make_inputs, same_outputs
from fp8ref.contracts import contract

E4 = torch.float8_e4m3fn
_LISTS = {
    "per_group_rowwise_scales": configs_module.PER_GROUP_RESIDENT,
    "per_group_colwise_scales": configs_module.PER_GROUP_RESIDENT,
    "per_group_colwise_scales_dual": configs_module.PER_GROUP_DUAL_RESIDENT,
}


def _forget_tuning(name: str) -> None:
    """Drop what the launch policy remembers about the list ``name``: its autotuner, its chosen configs, plans."""
    configs_module._AUTOTUNED.pop(name, None)
    for key in [k for k in configs_module._CHOSEN if k[0] == name]:
        del configs_module._CHOSEN[key]
    replay.forget()


@contextlib.contextmanager
def policy(bounds: tuple[int, ...], lists: dict, candidate: int | None):
    """CUDA resident bounds ``bounds``; with ``candidate``, every resident list reduced to that one tile."""
    saved_bounds = configs_module.RESIDENT_BOUNDS["cuda"]
    saved = {b: kc.cuda for b, kc in lists.items()}
    configs_module.RESIDENT_BOUNDS["cuda"] = bounds
    for b, kc in lists.items():
        if candidate is not None:
            object.__setattr__(kc, "cuda", (saved[b][candidate],))  # frozen dataclass: a tool-only patch
            kc.__dict__.pop("smallest_cuda", None)
        _forget_tuning(kc.name)
    try:
        yield
    finally:
        configs_module.RESIDENT_BOUNDS["cuda"] = saved_bounds
        for b, kc in lists.items():
            object.__setattr__(kc, "cuda", saved[b])
            kc.__dict__.pop("smallest_cuda", None)
            _forget_tuning(kc.name)


def tune_point(point: Point, do_bench, copy_gbps: float, byte_store_runs: bool) -> list[str]:
    c = contract(point.op)
    xs, offs = make_inputs(c, point, "cuda")
    fixed_args = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}
    expected = c.call(c.reference, xs, offs, **fixed_args)
    kernel = getattr(fp8moe, point.op)
    lists = _LISTS[point.op]
    nbytes = ideal_bytes(c, point.shape, point.groups)
    runs = [("single", (), None, False)]
    for bound, kc in lists.items():
        if bound not in (256, 512):
            continue
        for i, config in enumerate(kc.cuda):
            if (config.kwargs["BLOCK_R"] >= 16) != (point.op != "per_group_rowwise_scales"):
                continue  # tall tiles for the colwise views, short ones for the rowwise view
            label = f"resident{bound} {configs_module.describe(config)}"
            runs.append((label, (bound,), i, False))
            if byte_store_runs:
                runs.append((label + "/bytes", (bound,), i, True))
    rows, base = [], None
    for label, bounds, candidate, bytes_only in runs:
        stores = byte_stores() if bytes_only else contextlib.nullcontext()
        with policy(bounds, {b: lists[b] for b in bounds}, candidate), stores:
            try:
                out = c.call(kernel, xs, offs, **fixed_args)
                exact = same_outputs(out, expected)
                del out
                ms = do_bench(lambda: c.call(kernel, xs, offs, **fixed_args), rep=20)
            except Exception as exc:  # a tile that does not compile (registers, shared memory) is a result
                rows.append(f"| {point.op} | {point_label(point)} | {point.offs} | {label} | - | - | - | "
                            f"{type(exc).__name__}: {str(exc)[:80]} |")  # fmt: skip
                continue
        base = ms if base is None else base
        pct = 100 * nbytes / (ms * 1e-3) / (copy_gbps * 1e9)
        rows.append(
            f"| {point.op} | {point_label(point)} | {point.offs} | {label} | {ms * 1e3:.1f} | {pct:.0f}% | "
            f"{ms / base:.2f} | {'yes' if exact else 'NO'} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the Markdown table to this file")
    parser.add_argument("--min-groups", type=int, default=64, help="points with at least this many groups")
    parser.add_argument("--select", default=None, help="substring filter on '<op> <shape> <offs>'")
    parser.add_argument("--bytes", action="store_true", help="also time each colwise tile with byte stores")
    args = parser.parse_args(argv)
    from triton.testing import do_bench_cudagraph

    copy_gbps = copy_bandwidth_gbps()
    lines = [
        f"# per-group resident launch on {torch.cuda.get_device_name()}",
        "",
        f"torch {torch.__version__}, triton {sys.modules['triton'].__version__}, python {platform.python_version()}. "
        "bf16 in, e4m3fn out, median CUDA-graph replay (triton.testing.do_bench_cudagraph). `single`: one autotuned "
        "launch owns every group (no resident launch). `residentB tile`: the resident launch forced to that tile "
        "(groups whose aligned interior fits B), the long launch autotuned. x single = time / single time. "
        f"Copy bandwidth (read + write, CUDA graph), same run: {copy_gbps:.0f} GB/s.",
        "",
        "| op | shape | offs | launch | us | % of copy | x single | bitwise |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    print("\n".join(lines), flush=True)
    ok = True
    for point in ISSUE11_POINTS:
        if point.op not in _LISTS or point.groups < args.min_groups:
            continue
        if args.select and args.select not in f"{point.op} {point_label(point)} {point.offs}":
            continue
        byte_store_runs = args.bytes and point.op != "per_group_rowwise_scales"
        rows = tune_point(point, do_bench_cudagraph, copy_gbps, byte_store_runs)
        ok &= all(r.endswith("| yes |") for r in rows)
        lines.extend(rows)
        print("\n".join(rows), flush=True)
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
