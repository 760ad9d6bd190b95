"""Notebooks are documentation that must run, and they are committed with what they print.

Each notebook is executed top to bottom on an in-memory copy (never written back: `python notebooks/execute.py`
refreshes the committed outputs) within a time budget; the committed file must hold the outputs of such a run, use
only the public API, and stay small enough for a readable diff.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import resource
import time
import types
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK_DIR = Path(__file__).parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

#: Seconds one notebook may take, from kernel start to shutdown, on the 2-core CI machine (issue #13). Measured as
#: the CPU time of the kernel process (and anything it runs), which a busy machine cannot inflate the way it inflates
#: wall time; on an idle machine the wall time of these CPU-bound notebooks is about the same (see the "Runs on" line
#: of each). The slowest, bringup_certificate, took 21 s of CPU on a quiet machine and 28 s on a loaded one on
#: 2026-12-01. On 2026-12-02 it took 83-92 s of CPU on a machine of CI's kind, 74 s of them in the bring-up's kernel
#: matrix (Triton interpreter), with that day's first commit as with its last, while a pure-Python loop ran at the
#: machine's usual speed: slower interpreted kernels, cause not found. The budget went from 60 to 120 s so that
#: this variance alone does not fail CI; it still fails a notebook whose cost grows past 1.3x that slow run.
BUDGET_S = 120
#: A hang fails the cell instead of blocking the run; far above any cell's time even on a loaded machine.
CELL_TIMEOUT_S = 600
#: Committed size limits: images are small PNGs, reprs are truncated; a larger output means a repr got out of hand.
MAX_OUTPUT_CHARS = 120_000
MAX_NOTEBOOK_BYTES = 400_000
RUNS_ON = re.compile(r"Runs on: CPU \(Triton interpreter\) or GPU; ~\d+ s on 2 CPU cores")
#: Top-level packages whose use must go through public names (no underscore, each name in its module's __all__).
OURS = ("fp8ref", "fp8moe")


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_at_least_five_notebooks():
    assert len(NOTEBOOKS) >= 5, [p.name for p in NOTEBOOKS]


def _kernel_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_within_budget(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": NOTEBOOK_DIR}},
    )
    # The kernel is a child process that nbclient shuts down and reaps before execute() returns, so its CPU time
    # (with its own reaped children) lands in RUSAGE_CHILDREN of this process.
    cpu_before, wall_before = _kernel_cpu_seconds(), time.perf_counter()
    client.execute()
    cpu, wall = _kernel_cpu_seconds() - cpu_before, time.perf_counter() - wall_before
    errors = [o for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert cpu < BUDGET_S, f"{path.name}: {cpu:.0f} s of CPU (wall {wall:.0f} s), over the {BUDGET_S} s budget"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_with_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    cells = _code_cells(nb)
    missing = [i for i, c in enumerate(cells) if not c.get("outputs")]
    assert not missing, f"{path.name}: code cells {missing} have no output; run python notebooks/execute.py"
    errors = [o["ename"] for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: committed with errors {errors}"
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: not one top-to-bottom run: {counts}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_says_where_it_runs_and_stays_small(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown", f"{path.name}: the first cell is not Markdown"
    line = "Runs on: CPU (Triton interpreter) or GPU; ~N s on 2 CPU cores"
    assert RUNS_ON.search(first.source), f"{path.name}: the first cell lacks the line {line!r}"
    assert path.stat().st_size < MAX_NOTEBOOK_BYTES, f"{path.name}: {path.stat().st_size} bytes"
    for i, cell in enumerate(_code_cells(nb)):
        for out in cell.outputs:
            size = len(str(out.get("data", out.get("text", ""))))
            assert size < MAX_OUTPUT_CHARS, f"{path.name}: code cell {i} has a {size}-character output"


def _public(module: types.ModuleType, name: str) -> tuple[bool, object]:
    """Whether ``module.name`` is public (in ``__all__``, or a submodule without a leading underscore), and it."""
    if name.startswith("_"):
        return False, None
    if name in getattr(module, "__all__", ()):
        return True, getattr(module, name)
    full = f"{module.__name__}.{name}"
    try:
        found = hasattr(module, "__path__") and importlib.util.find_spec(full) is not None
    except ModuleNotFoundError:
        found = False
    return (True, importlib.import_module(full)) if found else (False, None)


def _private_uses(source: str) -> list[str]:
    """Uses of fp8ref or fp8moe names outside the public API in one cell's source."""
    tree = ast.parse(source)
    bound: dict[str, types.ModuleType] = {}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OURS:
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        bad.append(f"import {alias.name}")
                    bound[alias.asname or alias.name.split(".")[0]] = importlib.import_module(
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in OURS:
            if any(part.startswith("_") for part in node.module.split(".")):
                bad.append(f"from {node.module}")
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                ok, obj = _public(module, alias.name)
                if not ok:
                    bad.append(f"from {node.module} import {alias.name}")
                elif isinstance(obj, types.ModuleType):
                    bound[alias.asname or alias.name] = obj
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = []
        base = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in bound):
            continue
        obj = bound[base.id]
        for attr in reversed(chain):
            if not isinstance(obj, types.ModuleType):
                break  # attributes of a public object (methods, fields) are its own API
            ok, obj = _public(obj, attr)
            if not ok:
                bad.append(f"{base.id}.{'.'.join(reversed(chain))}")
                break
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_uses_only_the_public_api(path):
    nb = nbformat.read(path, as_version=4)
    bad = [use for cell in _code_cells(nb) for use in _private_uses(cell.source)]
    assert not bad, f"{path.name}: names outside fp8ref's / fp8moe's public API (__all__): {sorted(set(bad))}"


def test_public_api_check_catches_private_names():
    assert _private_uses("import fp8ref\nfp8ref.compare\nfp8ref.engine.mutants.MUTANTS") == []
    assert _private_uses("import fp8ref\nfp8ref.engine.report._heatmap_html") == ["fp8ref.engine.report._heatmap_html"]
    assert _private_uses("from fp8ref.bringup.cli import argparse") == ["from fp8ref.bringup.cli import argparse"]
    assert _private_uses("import fp8ref.bringup.cli as cli\ncli.main\ncli.shlex") == ["cli.shlex"]
    assert _private_uses("from fp8ref.formats import _BY_NAME") == ["from fp8ref.formats import _BY_NAME"]
