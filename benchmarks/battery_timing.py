"""Wall time of ``fp8ref.compare(op, shape)``'s default battery at the README's example shapes, per op.

    python benchmarks/battery_timing.py [--device cuda] [--repeat 3] [--out benchmarks/results/battery-timing]

Each op's battery runs once to warm up (Triton compiles, CUDA autotunes, the interpreter imports), then ``--repeat``
times; the table gives the members, the median seconds and where that time goes: the kernel's own calls (two per
member, poisoned runs) and everything else (inputs, the reference on the CPU, the byte-for-byte assessment). The
issue #10 budget is the whole call: under 5 s on the CPU interpreter, under 1 s on a GPU after warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import fp8moe  # noqa: F401  (first: without a GPU it turns the Triton interpreter on before triton is imported)
import fp8ref
from fp8ref.engine import comparator
from fp8ref.engine.battery import EXAMPLE_SHAPES


def _timed_kernel_calls() -> list[float]:
    """Patch the engine's kernel call so each call's wall time (synchronized on CUDA) is recorded."""
    spent: list[float] = []
    call = comparator.call_kernel

    def timed(fn):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            return call(fn)
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            spent.append(time.perf_counter() - start)

    comparator.call_kernel = timed
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=3, help="timed batteries per op after the warm-up")
    parser.add_argument("--out", default=None, help="write <out>.md with the table (default: stdout only)")
    args = parser.parse_args(argv)

    spent = _timed_kernel_calls()
    rows = [
        f"Default battery of fp8ref.compare(op, shape), device {args.device}, torch {torch.__version__}, "
        f"median of {args.repeat} after one warm-up",
        "",
        "| op | shape | members | ok | seconds | kernel calls s | engine s |",
        "|---|---|---|---|---|---|---|",
    ]
    for op, shape in EXAMPLE_SHAPES.items():
        report = fp8ref.compare(op, shape, device=args.device)  # warm-up
        times, kernel = [], []
        for _ in range(args.repeat):
            spent.clear()
            start = time.perf_counter()
            report = fp8ref.compare(op, shape, device=args.device)
            times.append(time.perf_counter() - start)
            kernel.append(sum(spent))
        total, in_kernel = statistics.median(times), statistics.median(kernel)
        rows.append(
            f"| {op} | {'x'.join(map(str, shape))} | {len(report.members) or 1} | {report.ok} | {total:.2f} | "
            f"{in_kernel:.2f} | {total - in_kernel:.2f} |"
        )
        print(rows[-1], flush=True)
        if not report.ok:
            print(report, file=sys.stderr)
    text = "\n".join(rows) + "\n"
    print(text)
    if args.out:
        Path(args.out).with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
