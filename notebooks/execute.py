"""Re-execute notebooks in place, so their committed outputs match the current code.

    python notebooks/execute.py                      # every notebook in this folder
    python notebooks/execute.py notebooks/benchmarks.ipynb

Each notebook runs top to bottom in a fresh kernel with this folder as its working directory, like
tests/test_notebooks.py runs it. Outputs are kept small and stable so the repo diff stays readable: no execution
timings, no per-cell metadata, only the kernel and language name in the notebook metadata. A notebook that raises is
not written back; the script prints the error and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent

#: Per-cell timeout: a hang fails loudly instead of blocking; the per-notebook budget is checked by the test.
CELL_TIMEOUT_S = 300


def tidy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what changes on every run without saying anything: timings, cell metadata, kernel versions."""
    for cell in nb.cells:
        cell.metadata = {}
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def execute(path: Path, cwd: Path = HERE) -> tuple[nbformat.NotebookNode, float]:
    """Run the notebook at ``path`` top to bottom; returns the executed notebook and the wall time in seconds.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (the message names the cell and the exception).
    """
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False, resources={"metadata": {"path": cwd}}
    )
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to run (default: all in notebooks/)")
    args = parser.parse_args(argv)
    paths = args.paths or sorted(HERE.glob("*.ipynb"))
    failed = 0
    for path in paths:
        try:
            nb, seconds = execute(path)
        except nbclient.exceptions.CellExecutionError as exc:
            print(f"{path.name}: FAILED, not written\n{exc}", file=sys.stderr)
            failed += 1
            continue
        nbformat.write(tidy(nb), path)
        print(f"{path.name}: {seconds:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
