"""The fp8ref pytest plugin (entry point ``pytest11: fp8ref``): devices, capability skips, spec grids, artifacts.

What it gives a test suite:
    * ``--device`` (default: cuda when visible, else cpu) and the ``device`` fixture. Under pytest-xdist on a
      machine with several GPUs, worker ``gwN`` uses ``cuda:(N % device_count)``.
    * Capability marks defined once, each with its reason: ``needs_gpu``, ``needs_fnuz``, ``needs_interpreter``;
      tests marked ``@pytest.mark.gpu`` are skipped on the CPU with a reason.
    * Grids over the discovered KernelSpecs: a test taking ``kernel_param`` runs once per point of
      ``KernelSpec.params(mode)`` (shape, groups, offs layout, dtype, fp8 dtype, pow2, values, memory layout,
      kwargs), with ids like ``per_group_colwise_scales-130x16-G7-random-bf16-e4m3fn-pow2-special``;
      ``reference_param`` does the same over the reference specs. ``--fp8ref-grid`` picks the mode: "full" by
      default on a GPU, "covering" on the CPU (~0.2 s per point in the Triton interpreter, 2 cores), or "quick".
      Points the device cannot run are skipped with the backend's reason.
    * On the CPU it sets TRITON_INTERPRET=1 (unless the environment already sets it) in ``pytest_configure``, before
      any test module imports triton: Triton kernels run on the CPU only through the interpreter, which must be on
      when triton is imported (fp8moe.backend raises an ImportError otherwise). This changes where kernels run,
      never what they compute.
    * After each test, a worker holding more than 4 GiB of cached GPU memory returns it (``empty_cache``), so
      workers sharing a GPU do not starve each other's large tests.
    * ``seed``: derived from the test id, so every test has its own inputs and reruns get the same ones.
    * ``fp8ref_compare``: ``fp8ref.compare`` with this test's device and seed; when the test fails, every failing
      report is saved under ``--fp8ref-artifacts`` (default ./fp8ref-artifacts) as report.txt, report.json and a
      runnable repro.py, and for a battery (axes left free) one repro per failing member, named by the member label
      that the report, ``fp8ref bringup`` and the battery share (fp8ref.engine.battery.member_label).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from fp8ref.engine.inputs import derive_seed
from fp8ref.spec import GRID_MODES, Param, load_errors, reference_specs, specs
from fp8ref.triton_env import use_interpreter_for_cpu

__all__ = ["grid_mode", "needs_fnuz", "needs_gpu", "needs_interpreter", "worker_device"]

_FNUZ = (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
#: Kernels on CPU tensors (the Triton interpreter). A string condition: evaluated at run time, after
#: ``pytest_configure`` has chosen the interpreter (it is off whenever a GPU is present, unless TRITON_INTERPRET=1).
needs_interpreter = pytest.mark.skipif(
    "os.environ.get('TRITON_INTERPRET', '0') in ('', '0')",
    reason="runs kernels on CPU tensors through the Triton interpreter, which is off in this process",
)
needs_fnuz = pytest.mark.skipif(
    torch.cuda.is_available() and torch.version.hip is None,
    reason="fnuz fp8 types do not compile on NVIDIA (H200, triton 3.6); they run on AMD gfx942 and in the interpreter",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fp8ref")
    group.addoption(
        "--device",
        default=None,
        help="device the kernels run on: cuda, cuda:1, cpu (default: cuda when a GPU is visible, else cpu)",
    )
    group.addoption(
        "--fp8ref-artifacts",
        default="fp8ref-artifacts",
        help="directory for the report and repro.py of failing fp8ref comparisons (default: ./fp8ref-artifacts)",
    )
    group.addoption(
        "--fp8ref-grid",
        default=None,
        choices=GRID_MODES,
        help="KernelSpec.params mode of the kernel_param/reference_param grids (default: full on a GPU, covering "
        "on the CPU)",
    )


def worker_device(requested: str | None, worker: str | None) -> torch.device:
    """The device of one pytest(-xdist) worker: ``requested`` (or the default), spread over GPUs by worker index.

    Args:
        requested: the --device value, or None.
        worker: the xdist worker id ("gw3"), or None outside xdist.
    """
    device = torch.device(requested or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" or device.index is not None:
        return device
    index = int(worker[2:]) if worker and worker.startswith("gw") else 0
    return torch.device("cuda", index % max(torch.cuda.device_count(), 1))


_DEVICE = pytest.StashKey[torch.device]()


def _device(config: pytest.Config) -> torch.device:
    """This worker's device, resolved once per session: a test that patches ``torch.cuda`` (``device_count``, say)
    must not move the worker, or the teardown hook would query a device the machine lacks (on a one-GPU H100,
    worker gw1 asked for cuda:1 after such a test and every later test on that worker errored,
    benchmarks/results/h100-s23-call2-pytest.log)."""
    if _DEVICE not in config.stash:
        config.stash[_DEVICE] = worker_device(config.getoption("--device"), os.environ.get("PYTEST_XDIST_WORKER"))
    return config.stash[_DEVICE]


def grid_mode(requested: str | None, device: torch.device) -> str:
    """The ``KernelSpec.params`` mode: ``requested`` (--fp8ref-grid), else "full" on a GPU and "covering" on the CPU."""
    return requested or ("covering" if device.type == "cpu" else "full")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fp8ref_spec(id): the KernelSpec a parametrized test point belongs to")
    if _device(config).type == "cpu":
        use_interpreter_for_cpu(cpu_requested=True)


def pytest_report_header(config: pytest.Config) -> str:
    device = _device(config)
    mode = grid_mode(config.getoption("--fp8ref-grid"), device)
    return f"fp8ref: device={device}, grid={mode}, specs={[s.id for s in specs()] or 'none discovered'}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None and _device(item.config).type == "cpu":
        pytest.skip("marked gpu: runs only with a CUDA or ROCm device (--device cuda)")


#: Cached GPU memory a test may leave in its worker's allocator (bytes); above it the teardown returns the cache.
KEEP_CACHED_GPU_BYTES = 4 << 30


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Give a finished test's cached GPU memory back to the device when it holds more than
    :data:`KEEP_CACHED_GPU_BYTES`: xdist workers share one GPU, and a worker keeping the tens of GB its largest test
    used would make another worker's large test run out of memory (seen on the H200 with 12 workers)."""
    device = _device(item.config)
    cuda_in_use = device.type == "cuda" and torch.cuda.is_initialized()
    if cuda_in_use and torch.cuda.memory_reserved(device) > KEEP_CACHED_GPU_BYTES:
        torch.cuda.empty_cache()


def _param(p: Param, device: torch.device):
    reason = p.spec.unsupported(device, p.fp8_dtype)
    marks = [pytest.mark.skip(reason=reason)] if reason else []
    return pytest.param(p, id=p.id, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    device = _device(metafunc.config)
    mode = grid_mode(metafunc.config.getoption("--fp8ref-grid"), device)
    if "kernel_param" in metafunc.fixturenames:
        broken = load_errors()
        if broken:  # a collection error, never a quietly empty grid
            raise RuntimeError(f"kernel package(s) failed to load, nothing to test: {broken!r}")
        grid = [_param(p, device) for s in specs() for p in s.params(mode)]
        if not grid:
            grid = [pytest.param(None, marks=pytest.mark.skip(reason="no KernelSpec discovered (fp8ref.specs)"))]
        metafunc.parametrize("kernel_param", grid)
    if "reference_param" in metafunc.fixturenames:
        grid = [pytest.param(p, id=p.id) for s in reference_specs() for p in s.params(mode)]
        metafunc.parametrize("reference_param", grid)


@pytest.fixture
def device(request: pytest.FixtureRequest) -> torch.device:
    """The device this worker runs kernels on (see --device)."""
    return _device(request.config)


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A 32-bit seed derived from the test id: distinct per test and parameter, identical on every rerun."""
    return derive_seed(request.node.nodeid) & 0xFFFFFFFF


@pytest.fixture
def fp8ref_compare(request: pytest.FixtureRequest, device: torch.device, seed: int):
    """``fp8ref.compare`` bound to this test's device and seed; reports are kept for failure artifacts."""
    from fp8ref.engine import compare

    reports = request.node.stash.setdefault(_REPORTS, [])

    def run(kernel, shape, **kwargs):
        kwargs.setdefault("device", device)
        kwargs.setdefault("seed", seed)
        report = compare(kernel, shape, **kwargs)
        reports.append(report)
        return report

    return run


_REPORTS = pytest.StashKey[list]()


def _safe(name: str) -> str:
    """``name`` as a file name: runs of characters other than letters, digits, ``_.-`` become one ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    result = outcome.get_result()
    if result.when != "call" or not result.failed:
        return
    failing = [r for r in item.stash.get(_REPORTS, []) if not r.ok]
    if not failing:
        return
    root = Path(item.config.getoption("--fp8ref-artifacts"))
    folder = root / _safe(item.nodeid)
    folder.mkdir(parents=True, exist_ok=True)
    for i, report in enumerate(failing):
        (folder / f"report{i}.txt").write_text(repr(report) + "\n")
        (folder / f"report{i}.json").write_text(report.to_json() + "\n")
        (folder / f"repro{i}.py").write_text(report.repro())
        # A battery run (compare with axes left free): one repro per failing member, named by its member label.
        for member in report.members:
            if not member.ok:
                (folder / f"repro{i}-{_safe(member.call.member)}.py").write_text(member.repro())
    result.sections.append(("fp8ref artifacts", f"{len(failing)} failing report(s) saved under {folder}"))
