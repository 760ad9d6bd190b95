"""Launch plans: an eager call replays the kernel launches an earlier call with the same metadata made.

Why: an fp8moe op on a MoE-sized tensor takes 30-100 us of GPU time, while the host path of one call (argument
checks, output allocation, launch-argument derivation, the config policy, Triton's own argument binding and
specialization) took 110-250 us on the H200 host (benchmarks/results/h200-bench-2026-12-02-s8.md, loop column):
eager calls, and eager MoE training steps, were host-bound. A plan keeps what the host derived for one call
signature and does only the per-call part again: allocate the outputs, fill the tensor arguments in, launch.

Semantics:
    - A plan is recorded per *plan key*: for each tensor argument of the op's launch function its shape, strides,
      dtype, device index and whether its data pointer is 16-byte aligned; every other argument (fp8 dtype, pow2
      flag, Backend, method) by value.
    - Everything a launch function computes on the host is a function of that key: it reads tensor metadata, never
      tensor values (nothing in a kernel path reads them on the host, SPEC §4.7). So a later call with the same key
      would make the same launches with the same non-tensor arguments and the same grids; only the tensors differ.
      Triton specializes a compiled kernel on tensor dtypes, 16-byte pointer alignment and integer values, all fixed
      by the key, so the recorded compiled kernel is the one Triton would pick for the later call.
    - Replay allocates the outputs with the recorded shapes, strides and dtypes (and zero-filled scratch tensors,
      :func:`scratch_zeros`), then calls each recorded compiled kernel with its recorded arguments, the tensor
      arguments replaced by this call's inputs, outputs and scratch (a kernel argument is recorded as whichever of
      those has its data pointer: Triton's launcher reads a tensor argument's pointer only).
    - Recorded only on CUDA and only when every launch of the call ran one fixed config (fp8moe.configs.launch):
      the autotuner's first run of a key, the interpreter and ROCm (whose Triton backend specializes on more than
      the key holds, unverified here) keep the normal path, and so does a call whose kernel arguments cannot be
      mapped to exactly one known tensor (a view at another data pointer, aliased inputs), or whose outputs are not
      fresh 16-byte-aligned allocations. A replay whose fresh outputs are not 16-byte aligned falls back to the
      normal path too.
    - Bytes never depend on this: a replay is the same compiled kernel on the same arguments. The GPU tests compare
      replayed calls with the normal path, byte for byte, on inputs the recording never saw
      (tests/test_replay_gpu.py); ``FP8MOE_REPLAY=0`` in the environment turns plans off
      (benchmarks/host_overhead.py times both).

Public calls (:func:`replays_public_calls`, on each public op of fp8moe.ops): a public call whose arguments have the
*public key* of an earlier direct call (same tensor metadata as the plan key, every other argument by type and
value, keywords included) replays the plan that call's one launch used, without the argument checks, the backend
lookup and the launch wrapper: the checks read nothing the key does not hold, so they would pass again, and the
launch's key is a function of the public key. Kept only where the earlier call made exactly one launch, on exactly
the public call's tensors in order, and returned that launch's outputs themselves; never for calls that must go
through the dispatcher (fp8moe.ops._direct_call), under torch.compile, inside a recording, or with a keyword that
asks for a fresh check (``validate_offs=True``). On an H100's host the dual op's direct call takes 32.0 us with it and
41.0 us with the checks run every call (benchmarks/results/h100-s34-call11-host-split.txt).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from fp8moe.backend import launch_device

__all__ = [
    "ENABLED",
    "MAX_PLANS_PER_OP",
    "PUBLIC_CALLS",
    "active_recorder",
    "forget",
    "plan_count",
    "replayable",
    "replays_public_calls",
    "scratch_zeros",
]

#: Plans on unless FP8MOE_REPLAY=0 (read once, at import).
ENABLED: bool = os.environ.get("FP8MOE_REPLAY", "1") != "0"

#: Public calls replay their launch's plan (:func:`replays_public_calls`) where plans are on; False keeps the plans
#: at the launch level only (benchmarks/host_overhead.py --split times both).
PUBLIC_CALLS: bool = True

#: Plans one op keeps before it forgets them all (a fuzzing loop over thousands of shapes must not grow without
#: bound; a training run has a few dozen signatures per op).
MAX_PLANS_PER_OP = 1024

_ACTIVE: contextvars.ContextVar[_Recorder | None] = contextvars.ContextVar("fp8moe_replay_recorder", default=None)
_ALL_PLANS: list[dict] = []
#: The launches of the public call in progress (:func:`replays_public_calls`): (plan or None, inputs, outputs) each.
_PUBLIC_CALL: contextvars.ContextVar[list | None] = contextvars.ContextVar("fp8moe_public_call", default=None)
_ALL_PUBLIC: list[dict] = []


def active_recorder() -> _Recorder | None:
    """The recorder of the call being recorded in this context, or None (fp8moe.configs.launch reports to it)."""
    return _ACTIVE.get()


def forget() -> None:
    """Drop every plan (tools that change the config policy at run time, e.g. benchmarks/tune_configs.py)."""
    for plans in (*_ALL_PLANS, *_ALL_PUBLIC):
        plans.clear()


def plan_count() -> int:
    """Plans held over all ops (tests and benchmarks check that replays happen)."""
    return sum(len(plans) for plans in _ALL_PLANS)


def scratch_zeros(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.zeros(shape, dtype=dtype, device=device)`` that a plan re-creates on replay (a launch function's
    zero-initialised temporary, e.g. the atomic transpose's amax bits)."""
    t = torch.zeros(shape, dtype=dtype, device=device)
    recorder = _ACTIVE.get()
    if recorder is not None:
        recorder.scratch.append(t)
    return t


@dataclass(frozen=True)
class _Launch:
    runner: Callable[..., None]  # CompiledKernel[grid]
    values: tuple  # every kernel parameter in signature order, None at tensor slots
    slots: tuple[tuple[int, int], ...]  # (parameter position, index into the call's known tensors)
    list_name: str  # the KernelConfigs name
    config: object  # the triton.Config it ran with
    last_config: dict  # fp8moe.configs.LAST_CONFIG, set on replay as a launch sets it


class _Recorder:
    """Collects the launches of one call (fp8moe.configs.launch calls :meth:`launched` or :meth:`not_replayable`)."""

    def __init__(self) -> None:
        self.launches: list[tuple[Callable, tuple, str, object, dict]] = []
        self.scratch: list[torch.Tensor] = []
        self.replayable = True

    def not_replayable(self) -> None:
        self.replayable = False

    def launched(
        self, kernel, compiled, grid: tuple[int, ...], meta: dict, list_name: str, config, last_config: dict
    ) -> None:
        """One fixed-config launch: ``kernel[grid](**meta)`` returned ``compiled``; ``last_config`` is the dict the
        launch recorded ``config`` in under ``list_name``."""
        values = _bound_values(kernel, meta)
        if values is None or not callable(getattr(compiled, "__getitem__", None)) or not hasattr(compiled, "function"):
            self.replayable = False
            return
        self.launches.append((compiled[grid], values, list_name, config, last_config))

    def plan(self, inputs: Sequence[torch.Tensor], outputs) -> _Plan | None:
        if not self.replayable or not isinstance(outputs, tuple):
            return None
        if not all(isinstance(o, torch.Tensor) and o.storage_offset() == 0 and o.data_ptr() % 16 == 0 for o in outputs):
            return None
        known = (*inputs, *outputs, *self.scratch)
        pointers = [t.data_ptr() for t in known]
        launches = []
        for runner, values, list_name, config, last_config in self.launches:
            slots = []
            for position, value in enumerate(values):
                if isinstance(value, torch.Tensor):
                    owners = [i for i, p in enumerate(pointers) if p == value.data_ptr()]
                    if len(owners) != 1:
                        return None
                    slots.append((position, owners[0]))
            template = tuple(None if isinstance(v, torch.Tensor) else v for v in values)
            launches.append(_Launch(runner, template, tuple(slots), list_name, config, last_config))
        return _Plan(
            outputs=tuple((tuple(o.shape), o.stride(), o.dtype) for o in outputs),
            scratch=tuple((tuple(t.shape), t.dtype) for t in self.scratch),
            launches=tuple(launches),
        )


def _bound_values(kernel, meta: dict) -> tuple | None:
    """Every parameter of the JIT function under ``kernel`` in signature order, as Triton binds them for
    ``kernel[grid](**meta)``: the ``triton.heuristics`` wrappers' values computed the way their run does, and a
    parameter ``meta`` omits at its declared default (a config may set GROUPS_FASTEST, fp8moe.kernels._per_group;
    the others rely on its default). None when a parameter has neither."""
    from triton.runtime.autotuner import Heuristics

    full = dict(meta)
    while isinstance(kernel, Heuristics):
        for name, rule in kernel.values.items():
            full[name] = rule(full)
        kernel = kernel.fn
    params = getattr(kernel, "params", None)
    if params is None:
        return None
    values = []
    for p in params:
        if p.name in full:
            values.append(full[p.name])
        elif getattr(p, "default", inspect.Parameter.empty) is not inspect.Parameter.empty:
            values.append(p.default)
        else:
            return None
    return tuple(values)


@dataclass(frozen=True)
class _Plan:
    outputs: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]
    scratch: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    launches: tuple[_Launch, ...]

    def replay(self, inputs: Sequence[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, ...] | None:
        outputs = [
            torch.empty_strided(shape, stride, dtype=dtype, device=device) for shape, stride, dtype in self.outputs
        ]
        for o in outputs:
            if o.data_ptr() % 16:
                return None
        known = [*inputs, *outputs]
        for shape, dtype in self.scratch:
            known.append(torch.zeros(shape, dtype=dtype, device=device))
        for launch in self.launches:
            args = list(launch.values)
            for position, index in launch.slots:
                args[position] = known[index]
            launch.runner(*args)
            launch.last_config[launch.list_name] = launch.config
        return tuple(outputs)


def _plan_key(args: tuple) -> tuple[tuple, list[torch.Tensor]]:
    """(the plan key of ``args``, its tensors in order)."""
    key = []
    tensors = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append(_tensor_key(a))
            tensors.append(a)
        else:
            key.append(a)
    return tuple(key), tensors


def _tensor_key(t: torch.Tensor) -> tuple:
    """A tensor argument's part of a plan key: what a launch reads of it on the host (module docstring)."""
    return (t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() % 16 == 0)


def replayable(launch_fn: Callable[..., tuple[torch.Tensor, ...]]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """Wrap a kernel module's ``launch(*args) -> outputs`` with a plan per plan key (module docstring).

    Calls with keyword arguments, with tensors off CUDA, or made while another call is being recorded (a launch
    function that calls another op's) run ``launch_fn`` as is.
    """
    plans: dict[tuple, _Plan] = {}
    _ALL_PLANS.append(plans)

    @functools.wraps(launch_fn)
    def launch(*args, **kwargs):
        if kwargs or not ENABLED or _ACTIVE.get() is not None:
            # Inside another op's recording, this call's launches belong to that op's plan: it must go through
            # configs.launch (where the outer recorder sees them), never replay on its own.
            return _reported(None, (), launch_fn(*args, **kwargs))
        key, inputs = _plan_key(args)
        if not inputs or not _replays_on(inputs[0]):
            return _reported(None, inputs, launch_fn(*args))
        plan = plans.get(key)
        if plan is not None:
            device = inputs[0].device
            with launch_device(device):
                outputs = plan.replay(inputs, device)
            if outputs is not None:
                return _reported(plan, inputs, outputs)
        recorder = _Recorder()
        token = _ACTIVE.set(recorder)
        try:
            outputs = launch_fn(*args)
        finally:
            _ACTIVE.reset(token)
        plan = recorder.plan(inputs, outputs)
        if plan is not None:
            if len(plans) >= MAX_PLANS_PER_OP:
                plans.clear()
            plans[key] = plan
        return _reported(plan, inputs, outputs)

    return launch


def _reported(plan: _Plan | None, inputs: Sequence[torch.Tensor], outputs):
    """``outputs``, after telling the public call in progress, if any, which plan (None: none) made them from
    ``inputs``."""
    launches = _PUBLIC_CALL.get()
    if launches is not None:
        launches.append((plan, tuple(inputs), outputs))
    return outputs


def _public_key(args: tuple, kwargs: dict) -> tuple:
    """The public key of a call (module docstring): the plan key of its positional arguments with every non-tensor
    argument's type beside its value (``True`` and ``1`` differ: the checks refuse the int), and its keywords likewise.
    It may hold an unhashable argument, which the checks then refuse."""
    return (
        tuple(_tensor_key(a) if isinstance(a, torch.Tensor) else (type(a), a) for a in args),
        tuple((name, type(value), value) for name, value in kwargs.items()),
    )


def replays_public_calls(direct_call: Callable[..., bool], fresh_when: tuple[str, ...] = ("validate_offs",)):
    """Decorate a public op so that a repeated call replays the plan its first call's launch used (module docstring,
    "Public calls").

    The op must check its arguments, then make exactly one launch through a :func:`replayable` launch function on its
    tensor arguments in order and return that launch's outputs as they are, doing nothing else on the device: a call
    that does anything else is never replayed here (it makes no launch, more than one, launches on other tensors or
    returns other objects), but a device operation outside the launch would be skipped unseen.

    Args:
        direct_call: the op module's rule for running without the dispatcher (fp8moe.ops._direct_call), called with
            the call's tensors; calls it refuses take the normal path every time.
        fresh_when: keywords that, when true, ask for work on every call (``validate_offs`` reads offs' values).
    """

    def decorate(public):
        plans: dict[tuple, _Plan] = {}
        _ALL_PUBLIC.append(plans)

        @functools.wraps(public)
        def call(*args, **kwargs):
            if torch.compiler.is_compiling():  # first: nothing below may touch a traced (fake) tensor
                return public(*args, **kwargs)
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if (
                not (ENABLED and PUBLIC_CALLS)
                or _ACTIVE.get() is not None  # inside a recording: the launches belong to the outer plan
                or _PUBLIC_CALL.get() is not None  # inside another public call: its launches count there
                or not tensors
                or any(kwargs.get(name) for name in fresh_when)
                or any(isinstance(v, torch.Tensor) for v in kwargs.values())
                or not direct_call(*tensors)
                or not _replays_on(tensors[0])
            ):
                return public(*args, **kwargs)
            key = _public_key(args, kwargs)
            try:
                plan = plans.get(key)
            except TypeError:  # an unhashable argument: no key, and the checks will say what is wrong with it
                key = plan = None
            if plan is not None:
                device = tensors[0].device
                with launch_device(device):
                    outputs = plan.replay(tensors, device)
                if outputs is not None:
                    return outputs
            launches: list = []
            token = _PUBLIC_CALL.set(launches)
            try:
                outputs = public(*args, **kwargs)
            finally:
                _PUBLIC_CALL.reset(token)
            if key is not None and len(launches) == 1:
                plan, inputs, launched = launches[0]
                same_tensors = len(inputs) == len(tensors) and all(a is b for a, b in zip(inputs, tensors))
                if plan is not None and launched is outputs and same_tensors:
                    if len(plans) >= MAX_PLANS_PER_OP:
                        plans.clear()
                    plans[key] = plan
            return outputs

        return call

    return decorate


def _replays_on(t: torch.Tensor) -> bool:
    """Whether calls on ``t``'s device may replay (GPU tensors; configs.launch then records only on CUDA)."""
    return t.is_cuda
