"""Why the jagged cooperative kernel runs slower than the dense one on the same bytes: per-group colwise at
65536 x 4096 G = 16 against colwise 3D on the same x viewed as (16, 4096, 4096), one process, one GPU.

On an H100 the jagged form (``FP8MOE_PER_GROUP_KERNEL=coop``) ran that point at 53% of copy bandwidth, slower than
the default kernels' 58% (benchmarks/results/h100-s37-call19-jagged_coop.md), while the dense use of the same kernel,
colwise 3D on row-major input, runs at 74% at (16, 8192, 5120) (benchmarks/results/h100-s37-call20-bench.md). With
uniform 4096-token groups the two read and write the same bytes in the same tiles (256 x 64, 4 warps): only the
jagged bookkeeping (bounds from offs, the item search, the edge code, the second launch for groups too long to wait)
differs. The variants take those apart one at a time:

- ``dense``: colwise_3d_scale_and_cast on x.view(16, 4096, 4096), its cooperative kernel (the CUDA default);
- ``coop``: per_group_colwise_scales under the jagged cooperative kernel, both launches (fused, then the long-group
  pass, which a 65536-position view always needs: one group may hold every position);
- ``coop_fused_only``: the same without the long-group pass (safe here: no group of these layouts takes more chunks
  than may wait: 17 chunks of 256 positions at most);
- ``auto``: the default kernels of the op.

each at uniform groups and at aligned16 (the bench's layout), every output compared with fp8ref's.
``--profile`` runs each variant once more between cudaProfilerStart and Stop for Nsight Compute
(benchmarks/profile_kernels.py --summarize reads the log)::

    python benchmarks/probe_coop_jagged_vs_dense.py > "$OUT/coop-jagged-vs-dense.md"
    ncu --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy \\
        --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats --csv --page details \\
        python benchmarks/probe_coop_jagged_vs_dense.py --profile > "$OUT/ncu.csv"
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

import torch

import fp8moe  # before triton
from fp8moe import configs, replay
from fp8moe.bench import _time, copy_bandwidth_gbps, ideal_bytes, same_outputs
from fp8moe.kernels import _coop_slices
from fp8ref.contracts import contract
from fp8ref.layouts import make_offs

#: Where the inputs live (the CPU test of this script runs it through the interpreter).
DEVICE = "cuda"
#: The call's arguments: e4m3fn, no pow2 rule (the bench's).
ARGS = {"fp8_dtype": torch.float8_e4m3fn, "round_scales_to_power_of_2": False}
#: Tokens, columns and groups of the issue #11 point (G = 16, 4096-token groups).
SHAPE = (65536, 4096, 16)
LAYOUTS = ("uniform", "aligned16")


@contextlib.contextmanager
def jagged_kernel(kind: str, long_pass: bool = True) -> Iterator[None]:
    """The per-group ops on ``kind`` (fp8moe.configs.PER_GROUP_KERNEL), the cooperative one without its long-group
    pass where ``long_pass`` is False; plans forgotten on the way in and out."""
    saved_kind, saved_long = dict(configs.PER_GROUP_KERNEL), _coop_slices.may_have_long_groups
    configs.PER_GROUP_KERNEL.update(dict.fromkeys(configs.PER_GROUP_KERNEL, kind))
    if not long_pass:
        _coop_slices.may_have_long_groups = lambda *args: False
    replay.forget()
    try:
        yield
    finally:
        configs.PER_GROUP_KERNEL.update(saved_kind)
        _coop_slices.may_have_long_groups = saved_long
        replay.forget()


def variants(tokens: int, columns: int, groups: int) -> Iterator[tuple[str, str, Callable, Callable, Callable, int]]:
    """(variant, layout, context factory, call, fp8ref's outputs for it, ideal bytes) per measured call, on one
    shared x; the reference is a function, called once per (dense or jagged) and layout."""
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(tokens, columns, generator=gen, device=DEVICE, dtype=torch.bfloat16)
    dense = contract("colwise_3d_scale_and_cast")
    x3 = x.view(groups, tokens // groups, columns)
    yield (
        "dense", "-", contextlib.nullcontext, lambda: fp8moe.colwise_3d_scale_and_cast(x3, **ARGS),
        lambda: dense.call(dense.reference, (x3.cpu(),), None, **ARGS),
        ideal_bytes(dense, (groups, tokens // groups, columns), 1),
    )  # fmt: skip
    jagged = contract("per_group_colwise_scales")
    for layout in LAYOUTS:
        ends = make_offs(layout, tokens, groups, torch.Generator().manual_seed(0))
        offs = torch.tensor(ends, dtype=torch.int32, device=DEVICE)
        call = lambda offs=offs: fp8moe.per_group_colwise_scales(x, offs, **ARGS)
        expected = lambda offs=offs: jagged.call(jagged.reference, (x.cpu(),), offs.cpu(), **ARGS)
        for name, factory in (
            ("coop", lambda: jagged_kernel("coop")),
            ("coop_fused_only", lambda: jagged_kernel("coop", long_pass=False)),
            ("auto", lambda: jagged_kernel("auto")),
        ):
            yield name, layout, factory, call, expected, ideal_bytes(jagged, (tokens, columns), groups)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="one profiled call per variant, for ncu")
    parser.add_argument("--shape", default=",".join(map(str, SHAPE)), help="tokens,columns,groups")
    args = parser.parse_args(argv)
    tokens, columns, groups = (int(v) for v in args.shape.split(","))
    if args.profile:
        from profile_kernels import _profiled_call

        marker = torch.zeros(1, dtype=torch.float64, device=DEVICE)
        for name, layout, factory, call, _, nbytes in variants(tokens, columns, groups):
            with factory():
                _profiled_call(marker, f"{name} | {tokens}x{columns} G={groups} | - | {layout}", nbytes, call)
        return
    copy = copy_bandwidth_gbps()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {copy:.0f} GB/s, x {tokens}x{columns} bf16, G = {groups}\n")
    print("| variant | layout | us (graph) | % of copy | bitwise |")
    print("|---|---|---:|---:|---|")
    expected = {}
    for name, layout, factory, call, reference, nbytes in variants(tokens, columns, groups):
        key = "dense" if name == "dense" else layout
        if key not in expected:
            expected[key] = reference()
        with factory():
            ok = same_outputs(tuple(t.cpu() for t in call()), expected[key])
            us, _ = _time(call)
        pct = 100 * nbytes / (us * 1e-6) / 1e9 / copy
        print(f"| {name} | {layout} | {us:.1f} | {pct:.0f}% | {'yes' if ok else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
