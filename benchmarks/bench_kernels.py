"""Kernel throughput at the SPEC §7 MoE shapes: ``python -m fp8moe.bench --points moe`` under its old name.

    python benchmarks/bench_kernels.py --out benchmarks/results/h200-kernels

The benchmark itself (points, timing, bytes model, bitwise checks, table and plot) lives in fp8moe/bench.py, so that
users run it as ``python -m fp8moe.bench``; this script only changes the default point set. Any other argument of
fp8moe.bench passes through (``--only``, ``--kernel``/``--like``, ``--compile``, ...).
"""

from __future__ import annotations

import sys

from fp8moe.bench import main

if __name__ == "__main__":
    sys.exit(main(["--points", "moe", *sys.argv[1:]]))
