"""``fp8ref.compare``: run a kernel and the reference on the same inputs and explain every differing byte."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from fp8ref.contracts import CONTRACTS, contract
from fp8ref.engine.assess import assess, call_failed
from fp8ref.engine.inputs import Inputs, make_inputs
from fp8ref.engine.kernel_call import Problem, call_kernel, check_outputs, kernel_traceback
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations
from fp8ref.engine.report import Call, Report
from fp8ref.engine.source import is_installed, replay_recipe
from fp8ref.spec import Exact, KernelSpec, find_spec, reference_spec, resolve

__all__ = ["compare", "compare_sequence", "default_device", "resolve_kernel"]


def default_device() -> torch.device:
    """cuda when a GPU is visible, else cpu (where fp8moe kernels run in the Triton interpreter)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass(frozen=True)
class ResolvedKernel:
    """A kernel argument of ``compare`` made concrete: the callable, its contract and how to name and replay it."""

    fn: Callable
    op: str
    label: str
    expr: str | None
    import_line: str
    spec: KernelSpec | None


def resolve_kernel(kernel: object, like: str | None = None) -> ResolvedKernel:
    """Turn ``kernel`` (KernelSpec, op name, "module:attr" string or callable) into a ResolvedKernel.

    Raises:
        ValueError: ``like`` names no op, or the op contract cannot be inferred and ``like`` is not given.
    """
    if like is not None and like not in CONTRACTS:
        raise ValueError(f"unknown op like={like!r}; the ops are {sorted(CONTRACTS)}")
    if isinstance(kernel, KernelSpec):
        setup, expr = ("", repr(kernel.kernel)) if isinstance(kernel.kernel, str) else replay_recipe(kernel.kernel)
        return ResolvedKernel(kernel.kernel_fn(), kernel.name, kernel.id, expr, setup, kernel)
    if isinstance(kernel, str) and ":" not in kernel:
        spec = find_spec(kernel)
        return ResolvedKernel(spec.kernel_fn(), spec.name, spec.id, repr(kernel), "", spec)
    if isinstance(kernel, str):
        fn = resolve(kernel)
        op = like or kernel.rsplit(":", 1)[1].rsplit(".", 1)[-1]
        # A module found only through this process's sys.path (a file next to the script) imports nowhere else.
        setup, expr = ("", repr(kernel)) if is_installed(kernel.split(":")[0]) else replay_recipe(fn)
        return ResolvedKernel(fn, contract(op).name, kernel, expr, setup, None)
    if not callable(kernel):
        raise TypeError(f"kernel must be a KernelSpec, an op name, 'module:attr' or a callable, got {kernel!r}")
    op = like or getattr(kernel, "op", None) or getattr(kernel, "__name__", None)
    if op not in CONTRACTS:
        raise ValueError(f"cannot tell which op contract {kernel!r} follows; pass like=<one of {sorted(CONTRACTS)}>")
    label = getattr(kernel, "__qualname__", None) or repr(kernel)
    recipe = getattr(kernel, "fp8ref_repro", None)  # (import statement, expression), e.g. set by mutants
    if recipe is not None:
        return ResolvedKernel(kernel, op, label, recipe[1], recipe[0], None)
    setup, expr = replay_recipe(kernel)
    return ResolvedKernel(kernel, op, label, expr, setup, None)


def _as_outputs(out: object) -> tuple[torch.Tensor, ...]:
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out)


def _run(
    rk: ResolvedKernel, inputs: Inputs, device: torch.device, poison: int, kwargs: dict
) -> tuple[tuple[torch.Tensor, ...] | None, list[Problem]]:
    """One poisoned call: its outputs copied to the CPU (None when unreadable), and what it did wrong besides its
    values, as (category, text) pairs. Only the kernel's own exceptions propagate."""
    xs = tuple(x.to(device, copy=True) for x in inputs.xs)  # a copy even on the CPU: in-place writes must show
    offs = inputs.offs_tensor(device)
    with poisoned_allocations(poison):
        out = call_kernel(lambda: contract(rk.op).call(rk.fn, xs, offs, **kwargs))
    return check_outputs(out, xs, inputs.xs, offs, inputs.offs, torch.device(device))


def compare(
    kernel: object,
    shape: Sequence[int],
    *,
    like: str | None = None,
    offs: str | Sequence[int] | None = None,
    groups: int = 4,
    dtype: torch.dtype = torch.bfloat16,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    round_scales_to_power_of_2: bool = False,
    values: str = "normal",
    layout: str = "row_major",
    device: torch.device | str | None = None,
    seed: int = 0,
    strict_nan: bool = False,
    check_determinism: bool = True,
    max_examples: int = 20,
    _prelude: tuple[tuple[int, ...], ...] = (),
    **kernel_kwargs,
) -> Report:
    """Compare ``kernel`` with the fp8ref reference on one generated input, byte for byte.

    The kernel runs twice with poisoned output allocations (see fp8ref.engine.poison): an element still holding
    the poison both times is "unwritten"; two runs writing different bytes is "nondeterministic". The reference
    runs on the CPU on the same inputs. Every differing fp8 byte and scale word gets a category
    (fp8ref.engine.categories); the policy (fail everything except NaN sign/payload differences unless
    ``strict_nan``) decides ``report.ok``.

    Args:
        kernel: a KernelSpec, a registered op name (its discovered kernel, or the reference when none is
            registered), a "module:attr" string, or any callable following an op contract.
        shape: the op's shape tuple: (M, K), (E, K, N), (M, Ktot), (Ktot, N) or (Ktot, N1, N2) for the dual op.
        like: the op contract a callable follows, when its name does not say.
        offs: explicit end offsets or a layout name from fp8ref.layouts.OFFS_LAYOUTS (default "uniform").
        groups: the group count for a named ``offs`` layout.
        values: a distribution from fp8ref.engine.values.VALUE_KINDS.
        layout: input memory layout, "row_major" or "col_major".
        device: where the kernel runs (default cuda if available, else cpu).
        seed: with every other argument, names the inputs; the same call gives the same bytes on every device.
        strict_nan: fail on NaN codes that differ only in sign or payload.
        check_determinism: fail when the two runs wrote different bytes.
        max_examples: how many mismatches the report lists.
        **kernel_kwargs: extra keyword arguments for the kernel (e.g. method="atomic").
    """
    rk = resolve_kernel(kernel, like)
    c = contract(rk.op)
    device = torch.device(device) if device is not None else default_device()
    inputs = make_inputs(
        c, shape, groups=groups, offs=offs, dtype=dtype, fp8_dtype=fp8_dtype, values=values, layout=layout, seed=seed
    )
    call = Call(
        op=c.name,
        kernel=rk.label,
        kernel_expr=rk.expr,
        kernel_import=rk.import_line,
        shape=tuple(int(s) for s in shape),
        offs=inputs.offs,
        dtype=str(dtype).removeprefix("torch."),
        fp8_dtype=str(fp8_dtype).removeprefix("torch."),
        round_scales_to_power_of_2=round_scales_to_power_of_2,
        values=values,
        layout=layout,
        seed=seed,
        device=str(device),
        strict_nan=strict_nan,
        kernel_kwargs=dict(kernel_kwargs),
        prelude=_prelude,
    )
    # A callable without a spec is judged against the reference itself, whatever kernel packages are installed.
    spec = rk.spec or reference_spec(c.name)
    args = {"fp8_dtype": fp8_dtype, "round_scales_to_power_of_2": round_scales_to_power_of_2}
    expected = _as_outputs(c.call(spec.reference_fn(), inputs.xs, inputs.offs_tensor(), **args))
    try:
        runs_and_problems = [_run(rk, inputs, device, byte, {**args, **kernel_kwargs}) for byte in POISON_BYTES]
    except Exception as exc:
        return call_failed(call, [("kernel_raised", f"{type(exc).__name__}: {exc}")], kernel_traceback(exc))
    runs = [outputs for outputs, _ in runs_and_problems]
    side_effects = list(dict.fromkeys(p for _, problems in runs_and_problems for p in problems))
    if any(outputs is None for outputs in runs):
        return call_failed(call, side_effects)
    tolerance = spec.tolerance if rk.spec is not None else Exact()
    return assess(
        c,
        inputs,
        expected,
        runs,
        call,
        tolerance=tolerance,
        check_determinism=check_determinism,
        max_examples=max_examples,
        side_effects=side_effects,
    )


def compare_sequence(
    kernel: object, shape: Sequence[int], *, groups: Sequence[int] = (1, 3, 8), offs: str = "random", **kwargs
) -> tuple[Report, ...]:
    """Compare the same kernel object on one shape with several group counts, in order, in this process.

    Anything a kernel caches per shape must key on everything that changes the result (SPEC §6): a cache keyed on
    the shape alone passes the first call and fails a later one. Each report's ``call.prelude`` records the calls
    before it, so its repro replays them.
    """
    reports, prelude = [], ()
    for g in groups:
        report = compare(kernel, shape, offs=offs, groups=g, _prelude=prelude, **kwargs)
        reports.append(report)
        prelude = (*prelude, report.call.offs)
    return tuple(reports)
