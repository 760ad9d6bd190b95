"""The pytest plugin: device per xdist worker, readable ids, seeds from test ids, failure artifacts."""

from __future__ import annotations

import pytest
import torch

from fp8ref.pytest_plugin import worker_device
from fp8ref.spec import reference_specs


def test_each_xdist_worker_gets_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert worker_device("cuda", "gw3") == torch.device("cuda", 1)
    assert worker_device("cuda", None) == torch.device("cuda", 0)
    assert worker_device("cuda:1", "gw0") == torch.device("cuda", 1)
    assert worker_device("cpu", "gw5") == torch.device("cpu")


def test_param_ids_name_op_shape_groups_dtypes_and_pow2():
    ids = {p.id for s in reference_specs() for p in s.params()}
    assert "per_group_colwise_scales[reference]-130x16-G7-bf16-e4m3fn-pow2" in ids
    assert "rowwise_2d_scale_and_cast[reference]-7x100-f16-e5m2-colmajor" in ids


def test_failing_comparison_saves_report_and_runnable_repro(pytester: pytest.Pytester):
    pytester.makepyfile(
        """
        from fp8ref.engine.mutants import mutant

        def test_tail(fp8ref_compare, seed):
            assert seed == seed & 0xFFFFFFFF
            report = fp8ref_compare(mutant("wrong_tail_mask"), (2, 20), device="cpu")
            assert report.ok, report
        """
    )
    result = pytester.runpytest("--fp8ref-artifacts=arts", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    (folder,) = (pytester.path / "arts").iterdir()
    assert {p.name for p in folder.iterdir()} == {"report0.txt", "report0.json", "repro0.py"}
    assert "unwritten" in (folder / "report0.txt").read_text()
    replay = pytester.runpython(folder / "repro0.py")
    assert replay.ret != 0
    assert "unwritten" in replay.stderr.str()
