"""Report.repro() is self-contained: it replays a failure in a fresh interpreter started in another directory, also
for kernels defined in a local module or in ``__main__`` (where "module:attr" would not import)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import fp8ref

#: A user's own module: a kernel with a helper, a constant and a module alias, none of it installed anywhere.
_LOCAL_MODULE = """
import torch
import fp8ref.scaling as sc
from fp8ref import ops

FLIP = 0x01


def _corrupt(q):
    b = q.view(torch.uint8).clone()
    b[0, 0] ^= FLIP
    return b.view(q.dtype)


def my_rowwise(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    assert sc.EPS > 0
    return _corrupt(q), s
"""


#: Every input axis pinned: one call (compare's battery would run many), the same in the test and in the session.
_PINNED = {
    "like": "rowwise_2d_scale_and_cast",
    "dtype": torch.bfloat16,
    "fp8_dtype": torch.float8_e4m3fn,
    "round_scales_to_power_of_2": False,
    "values": "normal",
    "layout": "row_major",
    "device": "cpu",
}
_PINNED_SOURCE = ", ".join(f"{k}={v if isinstance(v, torch.dtype) else repr(v)}" for k, v in _PINNED.items())


def _run_snippet(code: str, tmp_path, name: str) -> subprocess.CompletedProcess:
    """Write ``code`` to a file and run it with a fresh interpreter in an empty directory elsewhere."""
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    elsewhere = tmp_path / f"{name}-cwd"
    elsewhere.mkdir()
    return subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True, text=True, timeout=120)


def test_repro_of_a_kernel_in_a_local_module_inlines_it_and_fails_the_same_way(tmp_path, monkeypatch):
    pkg = tmp_path / "userdir"
    pkg.mkdir()
    (pkg / "my_kernels_h13.py").write_text(_LOCAL_MODULE)
    monkeypatch.syspath_prepend(str(pkg))
    import my_kernels_h13

    report = fp8ref.compare(my_kernels_h13.my_rowwise, (4, 8), **_PINNED)
    assert report.failing == ("genuine",), report
    snippet = report.repro()
    assert "def my_rowwise(" in snippet
    assert "def _corrupt(" in snippet
    assert "FLIP = 1" in snippet
    assert "import fp8ref.scaling as sc" in snippet
    assert "my_kernels_h13" not in snippet.replace("kernel my_kernels_h13", "")  # never imported by name
    done = _run_snippet(snippet, tmp_path, "repro")
    assert done.returncode == 1, done.stderr
    assert "Report(FAIL rowwise_2d_scale_and_cast-4x8" in done.stdout
    assert "AssertionError: fp8ref.compare: FAIL: genuine" in done.stderr


def test_repro_of_a_kernel_defined_in_main_runs_from_another_directory(tmp_path):
    """The whole user session as a script: the kernel lives in __main__; its repro must still run elsewhere."""
    session = _LOCAL_MODULE + textwrap.dedent(
        """
        import sys

        import fp8ref

        report = fp8ref.compare(my_rowwise, (4, 8), PINNED)
        open(sys.argv[0] + ".repro.py", "w").write(report.repro())
        """
    ).replace("PINNED", _PINNED_SOURCE)
    made = _run_snippet(session, tmp_path, "session")
    assert made.returncode == 0, made.stderr
    snippet = (tmp_path / "session.py.repro.py").read_text()
    assert "kernel = my_rowwise" in snippet
    done = _run_snippet(snippet, tmp_path, "repro")
    assert done.returncode == 1, done.stderr
    assert "FAIL: genuine" in done.stderr


def test_repro_says_plainly_when_the_source_cannot_be_retrieved():
    namespace: dict = {}
    exec(
        "import torch\nfrom fp8ref import ops\n"
        "def hidden(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):\n"
        "    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)\n"
        "    return q, s * 2\n",
        namespace,
    )
    report = fp8ref.compare(namespace["hidden"], (4, 8), **_PINNED)
    assert not report.ok
    snippet = report.repro()
    assert "NOT REPRODUCED: hidden: its source cannot be retrieved" in snippet
    result: dict = {}
    with pytest.raises(AssertionError, match="kernel_raised"):
        exec(compile(snippet, "repro.py", "exec"), result)
    assert "could not rebuild the kernel hidden from source" in result["report"].error


def test_repro_of_a_kernel_that_raised_keeps_its_traceback():
    def broken(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        return 1 / 0

    report = fp8ref.compare(broken, (4, 8), **_PINNED)
    assert "ZeroDivisionError" in report.traceback
    assert "return 1 / 0" in report.traceback
    snippet = report.repro()
    assert "#   ZeroDivisionError: division by zero" in snippet
    assert "def broken(" in snippet
