"""Launch plans (fp8moe.replay) on the CPU: recording, the plan key, slot mapping and every fallback, with a stand-in
kernel whose "compiled" launcher runs a Python body. The real compiled kernels replay on the GPU
(tests/test_replay_gpu.py); here the logic around them is pinned down.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import triton
from triton.runtime.autotuner import Heuristics

from fp8moe import configs, replay
from fp8moe.backend import cuda_backend

CUDA = cuda_backend(9, 0)
INTERPRETER = dataclasses.replace(CUDA, kind="interpreter", autotune=False)

FAKE = configs.KernelConfigs(
    name="replay_test_double",
    cuda=(triton.Config({"BLOCK": 4}, num_warps=1), triton.Config({"BLOCK": 8}, num_warps=2)),
    rocm=triton.Config({"BLOCK": 4}, num_warps=1),
    interpreter=configs.InterpreterTiles({"BLOCK": ("N",)}, reduced="BLOCK"),
    key=("N", "FLAG"),
)


@dataclasses.dataclass(frozen=True)
class _Param:
    name: str
    default: object = inspect.Parameter.empty


class _FakeCompiled:
    """Stands in for triton's CompiledKernel: ``compiled[grid](*every parameter)`` runs the kernel's body."""

    function = "fake"

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.kernel.replays += 1
            self.kernel.body(grid, dict(zip(self.kernel.names, args)))

        return runner


class _FakeJit(triton.runtime.KernelInterface):
    """Stands in for a JITFunction: ``kernel[grid](**kwargs)`` runs the body and returns a _FakeCompiled."""

    def __init__(self, names, compiled=True, defaults=None):
        self.names = names
        self.defaults = defaults or {}
        self.params = [_Param(n, self.defaults.get(n, inspect.Parameter.empty)) for n in names]
        self.compiled = compiled
        self.runs = self.replays = 0
        self.seen = []

    def body(self, grid, a):
        self.seen.append(a)
        assert torch.all(a["t_ptr"] == 0), "scratch must start at zero on every call"
        a["t_ptr"].fill_(7)
        a["q_ptr"][: a["x_ptr"].numel()].copy_(a["x_ptr"] * 2)
        a["s_ptr"].fill_(grid[0] * 100 + a["BLOCK"] + (1000 if a["FLAG"] else 0) + a.get("HALF", 0) * 10000)

    def run(self, *args, grid, warmup, **kwargs):
        assert not args
        self.runs += 1
        self.body((*grid, 1, 1)[:3], {**self.defaults, **kwargs})  # Triton binds omitted parameters' defaults
        return _FakeCompiled(self) if self.compiled else None


def _make_op(kernel, view=lambda x: x):
    @replay.replayable
    def op(x, flag, backend):
        q = torch.empty_like(x)
        s = torch.empty(1)
        scratch = replay.scratch_zeros((3,), torch.int32, x.device)
        configs.launch(
            kernel,
            FAKE,
            backend,
            lambda meta: (triton.cdiv(meta["N"], meta["BLOCK"]),),
            x_ptr=view(x),
            q_ptr=q,
            s_ptr=s,
            t_ptr=scratch,
            N=x.numel(),
            FLAG=flag,
        )
        return q, s

    return op


NAMES = ["x_ptr", "q_ptr", "s_ptr", "t_ptr", "N", "FLAG", "BLOCK"]


@pytest.fixture(autouse=True)
def cpu_replays(monkeypatch):
    """Let CPU tensors take the GPU path of fp8moe.replay, with an empty plan store per test."""
    monkeypatch.setattr(replay, "_replays_on", lambda t: True)
    monkeypatch.setattr(replay, "ENABLED", True)
    replay.forget()
    yield
    replay.forget()


def _x(n=10, seed=0, dtype=torch.float32):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_the_second_call_replays_the_recorded_launch_on_its_own_tensors():
    kernel = _FakeJit(NAMES)
    op = _make_op(kernel)
    x1, x2 = _x(seed=1), _x(seed=2)
    q1, s1 = op(x1, False, CUDA)
    assert (kernel.runs, kernel.replays, replay.plan_count()) == (1, 0, 1)
    q2, s2 = op(x2, False, CUDA)
    assert (kernel.runs, kernel.replays) == (1, 1)
    assert torch.equal(q2, x2 * 2)
    assert torch.equal(q1, x1 * 2)
    assert q2.data_ptr() not in (q1.data_ptr(), x1.data_ptr(), x2.data_ptr())
    assert torch.equal(s1, s2)
    assert s2.item() == 3 * 100 + 4  # grid cdiv(10, 4) = 3, the smallest tile's BLOCK
    launched, replayed = kernel.seen
    assert list(replayed) == NAMES  # every parameter, in signature order, the tensors this call's own
    assert replayed["x_ptr"] is x2
    assert replayed["q_ptr"] is q2
    assert replayed["s_ptr"] is s2
    assert [replayed[k] for k in ("N", "FLAG", "BLOCK")] == [launched[k] for k in ("N", "FLAG", "BLOCK")]


def test_replay_sets_the_last_config_like_a_launch():
    op = _make_op(_FakeJit(NAMES))
    op(_x(), False, CUDA)
    configs.LAST_CONFIG[FAKE.name] = None
    op(_x(seed=3), False, CUDA)
    assert configs.LAST_CONFIG[FAKE.name] is FAKE.smallest_cuda


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda x: x[:7].clone(), id="shape"),
        pytest.param(lambda x: x.to(torch.float64), id="dtype"),
        pytest.param(lambda x: torch.stack([x, x], 1)[:, 0], id="strides"),
        pytest.param(lambda x: torch.cat([x[:1], x])[1:], id="misaligned-pointer"),
    ],
)
def test_any_other_tensor_metadata_records_its_own_plan(other):
    kernel = _FakeJit(NAMES)
    op = _make_op(kernel)
    x = _x()
    op(x, False, CUDA)
    y = other(x)
    assert y.data_ptr() % 16 != 0 or y.shape != x.shape or y.dtype != x.dtype or y.stride() != x.stride()
    q, _ = op(y, False, CUDA)
    assert (kernel.runs, kernel.replays) == (2, 0)
    assert torch.equal(q, y * 2)


@pytest.mark.parametrize("change", ["flag", "backend"])
def test_other_non_tensor_arguments_record_their_own_plan(change):
    kernel = _FakeJit(NAMES)
    op = _make_op(kernel)
    op(_x(), False, CUDA)
    _, s = op(_x(), change == "flag", cuda_backend(8, 9) if change == "backend" else CUDA)
    assert (kernel.runs, kernel.replays) == (2, 0)
    assert s.item() == 304 + (1000 if change == "flag" else 0)


def test_heuristic_values_are_bound_in_signature_order():
    kernel = _FakeJit([*NAMES, "HALF"])
    op = _make_op(Heuristics(kernel, NAMES, {"HALF": lambda a: a["N"] // 2}))
    _, s1 = op(_x(), False, CUDA)
    _, s2 = op(_x(seed=5), False, CUDA)
    assert kernel.replays == 1
    assert s1.item() == s2.item() == 304 + 5 * 10000


def test_a_parameter_left_at_its_default_is_replayed_at_that_default():
    """The per-group kernels' GROUPS_FASTEST: set by some configs, left at its default by the others."""
    kernel = _FakeJit([*NAMES, "HALF"], defaults={"HALF": 2})
    op = _make_op(kernel)
    _, s1 = op(_x(), False, CUDA)
    _, s2 = op(_x(seed=5), False, CUDA)
    assert (kernel.runs, kernel.replays) == (1, 1)
    assert s1.item() == s2.item() == 304 + 2 * 10000


def _fake_autotuner(kernel, monkeypatch) -> list[dict]:
    """Make configs.launch autotune through a stand-in that picks FAKE.cuda[1] and runs ``kernel``'s body once;
    returns the list each tuner run appends its keywords to."""
    tuned = []

    class Tuner:
        best_config = FAKE.cuda[1]

        def __getitem__(self, grid):
            def run(**kwargs):
                tuned.append(kwargs)
                kernel.body(grid({**kwargs, **FAKE.cuda[1].kwargs}), {**kwargs, **FAKE.cuda[1].kwargs})

            return run

    monkeypatch.setattr(configs, "autotuned", lambda k, c, args: Tuner())
    monkeypatch.setattr(configs, "_CHOSEN", {})
    return tuned


def test_autotuned_launches_are_recorded_only_once_the_choice_is_cached(monkeypatch):
    kernel = _FakeJit(NAMES)
    tuned = _fake_autotuner(kernel, monkeypatch)
    op = _make_op(kernel)
    n = configs.AUTOTUNE_MIN_ELEMENTS
    op(_x(n), False, CUDA)  # the tuner runs: nothing recorded
    assert (len(tuned), replay.plan_count()) == (1, 0)
    op(_x(n, seed=1), False, CUDA)  # the chosen config, launched: recorded
    q, s = op(_x(n, seed=2), False, CUDA)  # replayed with the chosen config
    assert (len(tuned), kernel.runs, kernel.replays) == (1, 1, 1)
    assert torch.equal(q, _x(n, seed=2) * 2)
    assert s.item() == triton.cdiv(n, 8) * 100 + 8


@pytest.mark.parametrize(
    "case",
    [
        pytest.param({"backend": INTERPRETER}, id="interpreter-backend"),
        pytest.param({"compiled": False}, id="launch-returns-no-compiled-kernel"),
        pytest.param({"view": lambda x: x[1:]}, id="kernel-argument-at-no-known-pointer"),
    ],
)
def test_calls_that_cannot_be_replayed_keep_the_normal_path(case):
    kernel = _FakeJit(NAMES, compiled=case.get("compiled", True))
    view = case.get("view", lambda x: x)
    op = _make_op(kernel, view=view)
    for seed in range(3):
        x = _x(seed=seed)
        q, _ = op(x, False, case.get("backend", CUDA))
        expected = view(x) * 2
        assert torch.equal(q[: expected.numel()], expected)
    assert (kernel.runs, kernel.replays, replay.plan_count()) == (3, 0, 0)


def test_aliased_inputs_are_not_recorded_but_replay_fills_each_role_with_its_own_tensor():
    kernel = _FakeJit(["a_ptr", "b_ptr", "q_ptr", "s_ptr", "t_ptr", "N", "FLAG", "BLOCK"])
    kernel.body = lambda grid, a: a["q_ptr"].copy_(a["a_ptr"] - 2 * a["b_ptr"])

    @replay.replayable
    def op(a, b, backend):
        q, s = torch.empty_like(a), torch.empty(1)
        t = replay.scratch_zeros((3,), torch.int32, a.device)
        configs.launch(kernel, FAKE, backend, lambda meta: (1,), a_ptr=a, b_ptr=b, q_ptr=q, s_ptr=s, t_ptr=t,
                       N=a.numel(), FLAG=False)  # fmt: skip
        return q, s

    x, y, z = _x(seed=1), _x(seed=2), _x(seed=3)
    op(x, x, CUDA)  # a and b alias: which one a slot means is ambiguous
    assert replay.plan_count() == 0
    op(x, y, CUDA)
    assert replay.plan_count() == 1
    assert torch.equal(op(y, z, CUDA)[0], y - 2 * z)
    assert torch.equal(op(z, z, CUDA)[0], -z)  # the same plan key: the aliased call replays correctly
    assert (kernel.runs, kernel.replays) == (2, 2)


def test_disabled_keyword_calls_and_forget_take_the_normal_path(monkeypatch):
    kernel = _FakeJit(NAMES)
    op = _make_op(kernel)
    op(_x(), False, CUDA)
    op(x=_x(), flag=False, backend=CUDA)  # keyword call: never replayed
    assert (kernel.runs, kernel.replays) == (2, 0)
    replay.forget()
    op(_x(), False, CUDA)
    assert (kernel.runs, replay.plan_count()) == (3, 1)
    monkeypatch.setattr(replay, "ENABLED", False)
    op(_x(), False, CUDA)
    assert (kernel.runs, kernel.replays) == (4, 0)


def test_plans_per_op_are_bounded(monkeypatch):
    monkeypatch.setattr(replay, "MAX_PLANS_PER_OP", 3)
    op = _make_op(_FakeJit(NAMES))
    for n in range(1, 5):
        op(_x(n), False, CUDA)
    assert replay.plan_count() == 1  # the fourth signature found the store full and started it again


def test_plans_do_not_keep_the_recorded_calls_tensors_alive():
    op = _make_op(_FakeJit(NAMES))
    x = _x()
    op(x, False, CUDA)
    [plans] = [p for p in replay._ALL_PLANS if p]
    [plan] = plans.values()
    held = [v for launch in plan.launches for v in launch.values if isinstance(v, torch.Tensor)]
    assert held == []


def test_an_op_called_inside_another_ops_recording_lands_in_the_outer_plan():
    kernel = _FakeJit(NAMES)
    inner = _make_op(kernel)
    inner(_x(), False, CUDA)  # the inner op alone: its own plan

    @replay.replayable
    def outer(x, flag, backend):
        return inner(x, flag, backend)

    outer(_x(seed=4), False, CUDA)  # recorded: inner must launch here, or the outer plan would have no launch
    assert (kernel.runs, kernel.replays, replay.plan_count()) == (2, 0, 2)
    q, _ = outer(_x(seed=5), False, CUDA)  # the outer plan replays the launch
    assert (kernel.runs, kernel.replays) == (2, 1)
    assert torch.equal(q, _x(seed=5) * 2)


class _DependentJit(_FakeJit):
    """A fake kernel that declares DEPENDENT_LAUNCH (as the span kernels do) and keeps each launch's keywords."""

    def __init__(self):
        super().__init__([*NAMES, "DEPENDENT_LAUNCH"], defaults={"DEPENDENT_LAUNCH": False})
        self.arg_names = self.names
        self.launches = []

    def run(self, *args, grid, warmup, **kwargs):
        self.launches.append(kwargs)
        return super().run(*args, grid=grid, warmup=warmup, **kwargs)


@pytest.mark.parametrize("dependent", [False, True])
def test_a_dependent_launch_backend_launches_the_kernels_that_declare_it_with_pdl_and_replays_them(dependent):
    backend = dataclasses.replace(CUDA, dependent_launch=dependent)
    kernel = _DependentJit()
    op = _make_op(kernel)
    op(_x(), False, backend)  # launched and recorded
    launch = kernel.launches[-1]
    assert launch.get("DEPENDENT_LAUNCH", False) is dependent  # off: the kernel's default
    assert launch.get("launch_pdl", False) is dependent
    q, _ = op(_x(seed=1), False, backend)  # replayed: the recorded compiled kernel, with the value it was bound to
    assert (kernel.runs, kernel.replays) == (1, 1)
    assert kernel.seen[-1]["DEPENDENT_LAUNCH"] is dependent
    assert torch.equal(q, _x(seed=1) * 2)


def test_a_dependent_launch_backend_leaves_kernels_that_do_not_declare_it_alone(monkeypatch):
    # The other kernels (dense, chunked, tiles) take no DEPENDENT_LAUNCH: passing one, or launch_pdl without the
    # wait in the kernel, would be wrong.
    kernel = _FakeJit(NAMES)
    seen = []
    monkeypatch.setattr(kernel, "run", lambda *a, **kw: seen.append(kw) or _FakeJit.run(kernel, *a, **kw))
    _make_op(kernel)(_x(), False, dataclasses.replace(CUDA, dependent_launch=True))
    assert "DEPENDENT_LAUNCH" not in seen[-1]
    assert "launch_pdl" not in seen[-1]


def test_a_dependent_launch_backend_autotunes_with_pdl(monkeypatch):
    kernel = _DependentJit()
    tuned = _fake_autotuner(kernel, monkeypatch)
    _make_op(kernel)(_x(configs.AUTOTUNE_MIN_ELEMENTS), False, dataclasses.replace(CUDA, dependent_launch=True))
    assert tuned[0]["DEPENDENT_LAUNCH"] is True
    assert tuned[0]["launch_pdl"] is True


# ---- Public calls (replay.replays_public_calls) -------------------------------------------------------------------


class _Public:
    """A public op over _make_op's launch: checks (counted), then one launch on its tensors, its outputs returned;
    ``post``, ``extra_launch`` and ``copy_input`` break one of the rules a replayed public call relies on."""

    def __init__(self, direct=lambda *tensors: True, post=None, extra_launch=False, copy_input=False):
        self.kernel = _FakeJit(NAMES)
        self.launch = _make_op(self.kernel)
        self.checks = 0
        self.post, self.extra_launch, self.copy_input = post, extra_launch, copy_input
        self.call = replay.replays_public_calls(direct)(self._public)

    def _public(self, x, flag, *, validate_offs=False):
        self.checks += 1
        if not isinstance(flag, bool):
            raise TypeError(f"flag must be a bool, got {type(flag).__name__}")
        out = self.launch(x.clone() if self.copy_input else x, flag, CUDA)
        if self.extra_launch:
            self.launch(x, flag, CUDA)
        return self.post(out) if self.post else out


def test_a_repeated_public_call_replays_without_its_checks_and_writes_its_own_outputs():
    op = _Public()
    op.call(_x(seed=0), True)
    q, s = op.call(_x(seed=1), True)
    q2, _ = op.call(_x(seed=2), True)
    assert op.checks == 1  # the checks ran on the first call only
    assert (op.kernel.runs, op.kernel.replays) == (1, 2)
    assert torch.equal(q, _x(seed=1) * 2)
    assert torch.equal(q2, _x(seed=2) * 2)
    assert q.data_ptr() != q2.data_ptr()  # fresh outputs per call
    assert s.item() == triton.cdiv(10, 4) * 100 + 4 + 1000


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda x: (x[:8], True), id="shape"),
        pytest.param(lambda x: (x.double(), True), id="dtype"),
        pytest.param(lambda x: (x, False), id="flag-value"),
        pytest.param(lambda x: (x, 1), id="flag-type"),  # 1 == True: the key must still tell them apart
    ],
)
def test_a_public_call_with_other_arguments_is_checked_again(other):
    op = _Public()
    op.call(_x(), True)
    args = other(_x(seed=1))
    if type(args[1]) is not bool:
        with pytest.raises(TypeError, match="flag must be a bool"):
            op.call(*args)
    else:
        op.call(*args)
    assert op.checks == 2


def test_a_public_call_with_an_unhashable_argument_gets_the_checks_error_not_a_key_error():
    op = _Public()
    op.call(_x(), True)
    with pytest.raises(TypeError, match="flag must be a bool, got list"):
        op.call(_x(seed=1), [True])
    assert op.checks == 2


@pytest.mark.parametrize(
    "case",
    [
        pytest.param({"direct": lambda *tensors: False}, id="dispatcher-call"),
        pytest.param({"post": lambda out: tuple(reversed(out))}, id="outputs-not-the-launchs"),
        pytest.param({"extra_launch": True}, id="two-launches"),
        pytest.param({"copy_input": True}, id="launch-on-another-tensor"),
    ],
)
def test_public_calls_that_break_a_rule_are_checked_every_time_and_stay_right(case):
    op = _Public(**case)
    for seed in range(3):
        out = op.call(_x(seed=seed), True)
        q = out[1] if "post" in case else out[0]
        assert torch.equal(q, _x(seed=seed) * 2)
    assert op.checks == 3


def test_public_calls_asking_for_fresh_checks_disabled_plans_and_forget_take_the_normal_path(monkeypatch):
    op = _Public()
    op.call(_x(), True)
    op.call(_x(seed=1), True, validate_offs=True)
    assert op.checks == 2
    monkeypatch.setattr(replay, "ENABLED", False)
    op.call(_x(seed=2), True)
    assert op.checks == 3
    monkeypatch.setattr(replay, "ENABLED", True)
    monkeypatch.setattr(replay, "PUBLIC_CALLS", False)  # plans at the launch level only
    op.call(_x(seed=3), True)
    assert op.checks == 4
    monkeypatch.setattr(replay, "PUBLIC_CALLS", True)
    replay.forget()
    op.call(_x(seed=4), True)
    assert op.checks == 5


def test_a_public_call_inside_another_records_into_it():
    inner = _Public()
    inner.call(_x(), True)  # the inner op alone: its plan is kept
    outer_kernel = _FakeJit(NAMES)
    outer_launch = _make_op(outer_kernel)

    def outer(x, flag):
        inner.call(x, flag)  # nested: the normal path, its launch reported to the outer call
        return outer_launch(x, flag, CUDA)

    wrapped = replay.replays_public_calls(lambda *tensors: True)(outer)
    for seed in range(3):
        wrapped(_x(seed=seed), True)
    assert inner.checks == 4  # once alone, then on each nested call
    assert outer_kernel.replays == 2  # the outer launch replays at launch level; the outer call is never kept
