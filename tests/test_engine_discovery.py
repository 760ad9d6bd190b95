"""Kernel discovery must never turn a broken install into a comparison of the reference with itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import fp8ref
import fp8ref.spec


class _BrokenEntryPoint:
    name = "broken_kernels"

    def load(self):
        raise ImportError("simulated: the kernel package is half-installed")


@pytest.fixture
def broken_install(monkeypatch):
    monkeypatch.setattr(fp8ref.spec, "entry_points", lambda group: [_BrokenEntryPoint()])
    monkeypatch.setattr(fp8ref.spec, "_LOAD_ERRORS", {})
    fp8ref.spec.specs.cache_clear()
    yield
    fp8ref.spec.specs.cache_clear()


def test_op_name_is_refused_when_the_kernel_package_failed_to_load(broken_install):
    with pytest.warns(UserWarning, match="failed to load"), pytest.raises(RuntimeError, match="half-installed"):
        fp8ref.compare("rowwise_2d_scale_and_cast", (4, 8))


def test_a_foreign_callable_is_still_judged_against_the_reference(broken_install):
    def mine(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        return fp8ref.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)

    assert fp8ref.compare(mine, (4, 8), like="rowwise_2d_scale_and_cast").ok


def test_fp8moe_still_imports_after_the_engine_ran_first_on_a_cpu_only_process():
    """The engine's poisoning imports torch._dynamo, which imports triton: it must turn the interpreter on first."""
    script = textwrap.dedent(
        """
        import fp8ref
        from fp8ref.engine.mutants import MUTANTS
        m = MUTANTS["round_half_away"]
        fp8ref.compare(m.make(), (4, 8), like=m.op)
        import fp8moe
        assert fp8ref.compare("rowwise_2d_scale_and_cast", (4, 8)).ok
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_bringup_fails_when_the_kernel_package_does_not_load(broken_install, tmp_path):
    from fp8ref.bringup.cli import main

    with pytest.warns(UserWarning, match="failed to load"):
        rc = main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"])
    assert rc == 1
    assert "kernel_matrix/load/broken_kernels" in (tmp_path / "certificate.md").read_text()


def test_pytest_grid_is_a_collection_error_when_the_kernel_package_does_not_load(broken_install):
    from fp8ref.pytest_plugin import load_errors

    assert "broken_kernels" in load_errors()


def test_op_name_without_any_kernel_package_is_refused_not_compared_with_itself(monkeypatch):
    monkeypatch.setattr(fp8ref.spec, "entry_points", lambda group: [])
    monkeypatch.setattr(fp8ref.spec, "_LOAD_ERRORS", {})
    fp8ref.spec.specs.cache_clear()
    try:
        with pytest.raises(LookupError, match="no installed kernel package publishes"):
            fp8ref.compare("per_group_rowwise_scales", (4, 8))
        assert fp8ref.compare(fp8ref.spec.reference_spec("per_group_rowwise_scales"), (4, 8)).ok
    finally:
        fp8ref.spec.specs.cache_clear()
