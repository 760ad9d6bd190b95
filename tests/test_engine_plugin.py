"""The pytest plugin and the spec grids it runs: device per xdist worker, grid modes, readable ids, seeds from test
ids, failure artifacts."""

from __future__ import annotations

import itertools
import math
import sys
import types
from collections import Counter

import pytest
import torch
import torch._dynamo  # before any in-process pytester run: see _import_torch_modules_outside_subsessions

from fp8ref import pytest_plugin
from fp8ref.pytest_plugin import grid_mode, worker_device
from fp8ref.spec import GRID_MODES, reference_specs, specs

_JAGGED = next(s for s in reference_specs() if s.name == "per_group_colwise_scales")


def test_each_xdist_worker_gets_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert worker_device("cuda", "gw3") == torch.device("cuda", 1)
    assert worker_device("cuda", None) == torch.device("cuda", 0)
    assert worker_device("cuda:1", "gw0") == torch.device("cuda", 1)
    assert worker_device("cpu", "gw5") == torch.device("cpu")


def test_a_test_patching_torch_cuda_does_not_move_the_workers_device(pytestconfig, monkeypatch):
    before = pytest_plugin._device(pytestconfig)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert worker_device(None, "gw1") == torch.device("cuda", 1)  # what an unresolved lookup would now give
    assert pytest_plugin._device(pytestconfig) == before


def test_param_ids_name_op_shape_groups_offs_dtypes_pow2_values_and_layout():
    ids = {p.id for s in reference_specs() for p in s.params()}
    assert "per_group_colwise_scales[reference]-130x16-G7-random-bf16-e4m3fn-pow2-special" in ids
    assert "per_group_colwise_scales[reference]-1x1-G1-empty_middle-f32-e5m2-colmajor" in ids
    assert "rowwise_2d_scale_and_cast[reference]-7x100-f16-e5m2-colmajor" in ids


@pytest.mark.parametrize("mode", GRID_MODES)
def test_param_ids_are_unique_in_every_mode(mode):
    ids = [p.id for s in (*reference_specs(), *specs()) for p in s.params(mode)]
    assert len(ids) == len(set(ids))


def _axes(p) -> dict:
    return {
        "shape": (p.shape, p.groups),
        "offs": p.offs,
        "dtype": p.dtype,
        "fp8_dtype": p.fp8_dtype,
        "pow2": p.round_scales_to_power_of_2,
        "values": p.values,
        "layout": p.layout,
        "kwargs": tuple(p.kernel_kwargs.items()),
    }


def _value_pairs(grid) -> set:
    return {(a, row[a], b, row[b]) for row in map(_axes, grid) for a, b in itertools.combinations(row, 2)}


def test_full_grid_is_the_whole_product_of_the_spec_axes():
    s = _JAGGED
    axes = (
        s.test_shapes,
        s.group_counts,
        s.offs_layouts,
        s.dtypes,
        s.fp8_dtypes,
        s.round_scales_to_power_of_2,
        s.values,
        s.layouts,
        s.kwargs_grid,
    )
    assert len(s.params("full")) == math.prod(map(len, axes)) == 2592


def _covered_point(p) -> tuple:
    """(shape, groups, layout class, fp8 dtype): the layout class is the offs layout for jagged ops."""
    return p.shape, p.groups, p.offs or p.layout, p.fp8_dtype


@pytest.mark.parametrize("spec", [*reference_specs(), *specs()], ids=lambda s: s.id)
def test_covering_grid_has_each_shape_class_fp8_point_once_and_every_axis_value(spec):
    full, covering = spec.params("full"), spec.params("covering")
    assert Counter(map(_covered_point, covering)) == dict.fromkeys(set(map(_covered_point, full)), 1)
    for axis in _axes(full[0]):
        assert {_axes(p)[axis] for p in covering} == {_axes(p)[axis] for p in full}, axis


@pytest.mark.parametrize("spec", reference_specs(), ids=lambda s: s.id)
def test_covering_grid_meets_every_pair_of_axis_values(spec):
    assert _value_pairs(spec.params("covering")) == _value_pairs(spec.params("full"))


def test_quick_grid_shows_each_shape_offs_layout_and_fp8_dtype_once():
    quick = _JAGGED.params("quick")
    assert len(quick) == len(_JAGGED.test_shapes) * len(_JAGGED.group_counts) == 9
    assert {p.offs for p in quick} == set(_JAGGED.offs_layouts)
    assert {p.fp8_dtype for p in quick} == set(_JAGGED.fp8_dtypes)


def test_explicit_fp8_dtypes_replace_the_spec_ones():
    grid = _JAGGED.params("covering", fp8_dtypes=(torch.float8_e4m3fnuz,))
    assert {p.fp8_dtype for p in grid} == {torch.float8_e4m3fnuz}


def test_unknown_grid_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown grid mode 'all'"):
        _JAGGED.params("all")


def test_grid_is_full_on_a_gpu_covering_on_the_cpu_unless_requested():
    assert grid_mode(None, torch.device("cuda", 1)) == "full"
    assert grid_mode(None, torch.device("cpu")) == "covering"
    assert grid_mode("quick", torch.device("cuda")) == "quick"


def test_grid_option_sets_the_kernel_and_reference_grids(pytester: pytest.Pytester):
    pytester.makepyfile("def test_point(reference_param):\n    assert reference_param.spec.variant\n")
    result = pytester.runpytest("--device=cpu", "--fp8ref-grid=quick", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert f"{sum(len(s.params('quick')) for s in reference_specs())} tests collected" in result.stdout.str()


def test_cpu_session_turns_the_triton_interpreter_on(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    pytester.makepyfile("import os\n\ndef test_env():\n    assert os.environ['TRITON_INTERPRET'] == '1'\n")
    result = pytester.runpytest_subprocess("--device=cpu", "-p", "no:cacheprovider")  # triton unimported
    result.assert_outcomes(passed=1)


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
    _import_torch_modules_outside_subsessions()
    (folder,) = (pytester.path / "arts").iterdir()
    names = {p.name for p in folder.iterdir()}
    members = names - {"report0.txt", "report0.json", "repro0.py"}
    assert names - members == {"report0.txt", "report0.json", "repro0.py"}
    assert members, "a battery report saves one repro per failing member"
    assert all(n.startswith("repro0-") and n.endswith(".py") for n in members), members  # repro0-3x33_values_...
    assert "unwritten" in (folder / "report0.txt").read_text()
    for repro in ("repro0.py", sorted(members)[0]):
        replay = pytester.runpython(folder / repro)
        assert replay.ret != 0
        assert "unwritten" in replay.stderr.str()


def _import_torch_modules_outside_subsessions():
    """An in-process pytester run restores sys.modules when it ends. A torch module first imported inside it stays
    registered in C++ but leaves sys.modules, and its next import in this worker fails: torch._dynamo imports
    torch._inductor.test_operators, which defines a TORCH_LIBRARY, so every later torch.compile or torch.manual_seed
    of the worker raised "Only a single TORCH_LIBRARY can be used to register the namespace _inductor_test" (3 tests
    of the session-27 H200 suite, h200-s27-call1-pytest.log). This module imports torch._dynamo at the top, so the
    subsession finds it and the snapshot keeps it."""
    assert "torch._dynamo" in sys.modules
    assert "torch._inductor.test_operators" in sys.modules


@pytest.mark.parametrize(("device", "reserved", "emptied"), [("cuda", 5 << 30, True), ("cuda", 1 << 30, False),
                                                             ("cpu", 5 << 30, False)])  # fmt: skip
def test_teardown_returns_a_large_gpu_cache_only(monkeypatch, device, reserved, emptied):
    """Workers sharing a GPU: a test leaving more than KEEP_CACHED_GPU_BYTES cached gives it back after it."""
    calls = []
    monkeypatch.setattr(pytest_plugin, "_device", lambda config: torch.device(device, 0) if device == "cuda" else
                        torch.device(device))  # fmt: skip
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev: reserved)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(True))
    pytest_plugin.pytest_runtest_teardown(types.SimpleNamespace(config=None))
    assert calls == ([True] if emptied else [])
