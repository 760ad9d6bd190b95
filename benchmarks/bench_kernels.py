"""Kernel throughput vs the device copy roofline and torch.compile of the reference, side by side in one run.

    python benchmarks/bench_kernels.py --out benchmarks/results/h200-kernels.md

Iterates the KernelSpec table (fp8ref.specs(): each spec's bench shapes, the MoE shapes of SPEC §7). Per point: the
median time of triton.testing.do_bench, GB/s over the spec's ideal bytes (input read once + fp8 written once +
scales), that as % of the device copy bandwidth measured in the same run, and the speed-up over torch.compile of the
fp8ref reference (the same rule compiled by Inductor). Each kernel output on the benchmark inputs is first checked
bitwise against the reference on the same GPU, so a fast wrong kernel cannot post a number.
"""

from __future__ import annotations

import argparse
import platform
import sys

import torch

import fp8moe  # noqa: F401  (imported before triton, as fp8moe requires)
import fp8ref
from fp8ref.layouts import make_offs, to_memory_layout
from fp8ref.testing import same_bits

E4 = torch.float8_e4m3fn
#: Group layout of the jagged benchmarks: random sizes that are multiples of 16 (the grouped-GEMM constraint).
BENCH_OFFS = "aligned16"


def copy_bandwidth_gbs(do_bench) -> float:
    """Device-to-device copy of a 2 GiB buffer, read + write bytes: the roofline every kernel is measured against."""
    src = torch.empty(2**30, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * src.element_size() / do_bench(lambda: dst.copy_(src)) / 1e6


def _graph_time_ms(fn) -> float | None:
    """GPU time of ``fn`` replayed from a CUDA graph (no Python, no launch overhead), or None if it cannot be
    captured. Next to the eager time it shows how much of a call is host overhead (wrapper, autotuner, launch)."""
    from triton.testing import do_bench_cudagraph

    try:
        return do_bench_cudagraph(fn)
    except Exception as exc:  # a capture failure is reported in the table, never fatal to the benchmark
        print(f"CUDA graph capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def bench_inputs(spec, shape, groups, layout=None):
    """The benchmark inputs of one point: bf16 normal values drawn on the GPU (production sizes are ~1e9 elements)
    in ``layout`` (default: the spec's canonical one), and for jagged ops BENCH_OFFS end offsets of ``groups``."""
    c = spec.contract
    gen = torch.Generator(device="cuda").manual_seed(0)
    xs = tuple(
        to_memory_layout(torch.randn(s, generator=gen, device="cuda", dtype=torch.bfloat16), layout or spec.layouts[0])
        for s in c.input_shapes(shape)
    )
    offs = None
    if c.jagged:
        ends = make_offs(BENCH_OFFS, c.jagged_length(shape), groups, torch.Generator().manual_seed(0))
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    return xs, offs


def outputs_identical(out, expected) -> bool:
    """Same number of outputs, each with the same shape, strides and bits (NaN as a class)."""
    return len(out) == len(expected) and all(
        a.shape == b.shape and a.stride() == b.stride() and bool(same_bits(a, b).all()) for a, b in zip(out, expected)
    )


def point_label(spec, shape, groups) -> str:
    return "x".join(map(str, shape)) + (f" G={groups}" if spec.contract.jagged else "")


def bench_point(spec, shape, groups, kwargs, do_bench, with_compile: bool) -> dict:
    """Check and time one (spec, shape, groups, kwargs) point; returns one table row."""
    c = spec.contract
    xs, offs = bench_inputs(spec, shape, groups)
    kernel, reference = spec.kernel_fn(), spec.reference_fn()
    fixed = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}

    def run_kernel():
        return c.call(kernel, xs, offs, **fixed, **kwargs)

    out, expected = run_kernel(), c.call(reference, xs, offs, **fixed)
    exact = outputs_identical(out, expected)
    ms = do_bench(run_kernel)
    graph_ms = _graph_time_ms(run_kernel)
    row = {
        "op": spec.id,
        "shape": point_label(spec, shape, groups),
        "variant": ",".join(f"{k}={v}" for k, v in kwargs.items()),
        "us": ms * 1e3,
        "graph_us": None if graph_ms is None else graph_ms * 1e3,
        "gbs": spec.bytes_moved(xs, groups) / ms / 1e6,
        "exact": exact,
        "compile_us": None,
    }
    if with_compile:
        compiled = torch.compile(lambda xs, offs: c.call(reference, xs, offs, **fixed), dynamic=False)
        compiled(xs, offs)
        row["compile_us"] = do_bench(lambda: compiled(xs, offs)) * 1e3
        torch._dynamo.reset()
    return row


def format_row(r: dict, copy_gbs: float) -> str:
    """One Markdown row of the table from a bench_point result."""
    compile_cells = (
        ("-", "-") if r["compile_us"] is None else (f"{r['compile_us']:.0f}", f"{r['compile_us'] / r['us']:.2f}x")
    )
    graph, graph_pct = (
        ("-", "-")
        if r["graph_us"] is None
        else (f"{r['graph_us']:.0f}", f"{100 * r['gbs'] * r['us'] / r['graph_us'] / copy_gbs:.0f}%")
    )
    return (
        f"| {r['op']} | {r['shape']} | {r['variant'] or '-'} | {r['us']:.0f} | {graph} | "
        f"{r['gbs']:.0f} | {100 * r['gbs'] / copy_gbs:.0f}% | {graph_pct} | {compile_cells[0]} | "
        f"{compile_cells[1]} | {'yes' if r['exact'] else 'NO'} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the Markdown table to this file")
    parser.add_argument("--only", default=None, help="substring filter on the spec id")
    parser.add_argument(
        "--compile",
        choices=("none", "first", "all"),
        default="first",
        help="torch.compile baseline for no point, the first shape of each spec, or every point",
    )
    args = parser.parse_args(argv)
    from triton.testing import do_bench

    copy_gbs = copy_bandwidth_gbs(do_bench)
    header = [
        f"# fp8moe kernels on {torch.cuda.get_device_name()}",
        "",
        f"torch {torch.__version__}, triton {sys.modules['triton'].__version__}, python {platform.python_version()}. "
        f"bf16 in, e4m3fn out, median of triton.testing.do_bench. Device copy bandwidth (read+write), same run: "
        f"**{copy_gbs:.0f} GB/s**. GB/s counts ideal bytes (input once + fp8 once + scales). `graph us`: the same "
        "call replayed from a CUDA graph (triton.testing.do_bench_cudagraph), i.e. GPU time without the Python "
        "wrapper, autotuner lookup and launch; where it is far below `fp8moe us`, the call is host-bound.",
        "",
        "| op | shape | variant | fp8moe us | graph us | GB/s | % of copy | graph % of copy | compile(ref) us "
        "| fp8moe vs compile | bitwise |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    print("\n".join(header), flush=True)
    lines, all_exact = list(header), True
    chosen = [s for s in fp8ref.specs() if not args.only or args.only in s.id]
    # Shape-major: every op on the first MoE configuration before any op on the second, so a time limit cuts whole
    # configurations, not whole ops.
    for i in range(max(len(s.bench_shapes) for s in chosen)):
        for spec in chosen:
            if i >= len(spec.bench_shapes):
                continue
            shape, groups = spec.bench_shapes[i], spec.bench_groups[i]
            for kwargs in spec.kwargs_grid:
                with_compile = args.compile == "all" or (args.compile == "first" and i == 0)
                r = bench_point(spec, shape, groups, dict(kwargs), do_bench, with_compile)
                all_exact &= r["exact"]
                line = format_row(r, copy_gbs)
                lines.append(line)
                print(line, flush=True)
                torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if all_exact else 1


if __name__ == "__main__":
    sys.exit(main())
