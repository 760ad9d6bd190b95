"""Every committed mutant through ``fp8ref.compare(mutant, shape)`` with default arguments, at the example shapes.

    python benchmarks/battery_mutants.py [NAME ...]

Prints, per mutant, whether the report failed and with which categories, then the count caught and the count caught
with the mutant's own category (benchmarks/results/engine-battery-mutants-cpu.md has the before/after of issue #10:
the "before" ran the same mutants.py against the engine of bddc7a0, checked out with ``git worktree add``).
"""

from __future__ import annotations

import sys
import time
import warnings

import fp8ref
from fp8ref.engine.battery import EXAMPLE_SHAPES
from fp8ref.engine.mutants import MUTANTS, mutant


def main(names: list[str]) -> int:
    warnings.simplefilter("ignore", RuntimeWarning)
    names = names or list(MUTANTS)
    caught = right = 0
    for name in names:
        m = MUTANTS[name]
        start = time.perf_counter()
        report = fp8ref.compare(mutant(name), EXAMPLE_SHAPES[m.op], device="cpu")
        caught += not report.ok
        right += not report.ok and m.category in report.failing
        print(
            f"{name:50s} want={m.category:27s} ok={report.ok} failing={report.failing} "
            f"{time.perf_counter() - start:.1f}s",
            flush=True,
        )
    print(f"caught {caught}/{len(names)}, with the mutant's category {right}/{len(names)}")
    return 0 if right == len(names) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
