"""``fp8ref.compare``: run a kernel and the reference on the same inputs and explain every differing byte."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from fp8ref.contracts import CONTRACTS, contract
from fp8ref.engine.assess import assess, call_failed
from fp8ref.engine.battery import battery_formats, build_battery, member_label, merge_reports
from fp8ref.engine.gemm import run_grouped_gemm
from fp8ref.engine.inputs import Inputs, make_inputs
from fp8ref.engine.kernel_call import Problem, call_kernel, check_outputs, kernel_traceback
from fp8ref.engine.poison import POISON_BYTES, out_of_bounds_writes, padded_copy, poisoned_allocations
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
    rk: ResolvedKernel, inputs: Inputs, device: torch.device, poison: int, kwargs: dict, redzone: int
) -> tuple[tuple[torch.Tensor, ...] | None, list[Problem]]:
    """One poisoned call: its outputs copied to the CPU (None when unreadable), and what it did wrong besides its
    values, as (category, text) pairs, out-of-bounds writes included. Only the kernel's own exceptions propagate."""
    # Inputs are copies even on the CPU, so in-place writes show.
    padded = [padded_copy(x, device, redzone) for x in inputs.xs]
    xs = tuple(p.tensor for p in padded)
    offs = inputs.offs_tensor(device)
    with poisoned_allocations(poison, redzone) as allocations:
        out = call_kernel(lambda: contract(rk.op).call(rk.fn, xs, offs, **kwargs))
    outputs, problems = check_outputs(out, xs, inputs.xs, offs, inputs.offs, torch.device(device))
    returned = out if isinstance(out, tuple | list) else (out,)
    past = [
        *out_of_bounds_writes(allocations, tuple(returned)),
        *(p.out_of_bounds(f"input {i}") for i, p in enumerate(padded)),
    ]
    problems += [("out_of_bounds_write", str(o)) for o in past if o is not None]
    return outputs, problems


#: What an unpinned axis takes when the battery is off (``battery=False``): one call, as compare made before the
#: battery existed.
_SINGLE = {
    "offs": "uniform",
    "groups": 4,
    "dtype": torch.bfloat16,
    "fp8_dtype": torch.float8_e4m3fn,
    "round_scales_to_power_of_2": False,
    "values": "normal",
    "layout": "row_major",
}


def compare(
    kernel: object,
    shape: Sequence[int],
    *,
    like: str | None = None,
    offs: str | Sequence[int] | None = None,
    groups: int | None = None,
    dtype: torch.dtype | None = None,
    fp8_dtype: torch.dtype | None = None,
    round_scales_to_power_of_2: bool | None = None,
    values: str | None = None,
    layout: str | None = None,
    device: torch.device | str | None = None,
    seed: int = 0,
    strict_nan: bool = False,
    check_determinism: bool = True,
    max_examples: int = 20,
    battery: bool = True,
    _prelude: tuple[tuple[int, ...], ...] = (),
    **kernel_kwargs,
) -> Report:
    """Compare ``kernel`` with the fp8ref reference, byte for byte, on a battery of inputs (or on one).

    Every argument left out is an axis of the default battery (fp8ref.engine.battery): normal and special values,
    pow2 on and off, every fp8 format the kernel runs on this device, bf16/f16/f32 inputs, row- and column-major
    inputs, for jagged ops several offs layouts and two group counts in sequence, and edge shapes derived from
    ``shape`` when it is too regular to reach tails and sub-block paths. An argument passed pins its axis; with every
    axis pinned (or ``battery=False``) compare makes a single call. The members' Reports merge into one: each
    mismatch and problem names its member, ``report.members`` keeps every member's Report and ``repro()`` replays
    the first failing member.

    Each call runs the kernel twice with poisoned output allocations (fp8ref.engine.poison): an element still holding
    the poison both times is "unwritten"; two runs writing different bytes is "nondeterministic"; a write into the
    redzones around an output is "out_of_bounds_write". The reference runs on the CPU on the same inputs. Every
    differing fp8 byte and scale word gets a category (fp8ref.engine.categories); the policy (fail everything except
    NaN sign/payload differences unless ``strict_nan``) decides ``report.ok``.

    Args:
        kernel: a KernelSpec, a registered op name (its discovered kernel), a "module:attr" string, or any callable
            following an op contract.
        shape: the op's shape tuple: (M, K), (E, K, N), (M, Ktot), (Ktot, N) or (Ktot, N1, N2) for the dual op.
        like: the op contract a callable follows, when its name does not say.
        offs: explicit end offsets or a layout name from fp8ref.layouts.OFFS_LAYOUTS.
        groups: the group count for a named ``offs`` layout.
        dtype: the input dtype.
        fp8_dtype: the op's argument: the fp8 output format.
        round_scales_to_power_of_2: the op's argument: whether scales are rounded to powers of two.
        values: a distribution from fp8ref.engine.values.VALUE_KINDS.
        layout: input memory layout, "row_major" or "col_major".
        device: where the kernel runs (default cuda if available, else cpu).
        seed: with every other argument, names the inputs; the same call gives the same bytes on every device.
        strict_nan: fail on NaN codes that differ only in sign or payload.
        check_determinism: fail when the two runs wrote different bytes.
        max_examples: how many mismatches the report lists.
        battery: False for a single call, the unpinned axes taking their old defaults (uniform offs, 4 groups,
            bf16, e4m3fn, no pow2, normal values, row-major).
        **kernel_kwargs: extra keyword arguments for the kernel (e.g. method="atomic").
    """
    rk = resolve_kernel(kernel, like)
    c = contract(rk.op)
    device = torch.device(device) if device is not None else default_device()
    if c.kind == "grouped_gemm":  # results judged by SQNR, operands bitwise (fp8ref.engine.gemm)
        return run_grouped_gemm(
            rk,
            c,
            shape,
            battery=battery,
            offs=offs,
            groups=groups,
            dtype=dtype,
            fp8_dtype=fp8_dtype,
            round_scales_to_power_of_2=round_scales_to_power_of_2,
            values=values,
            layout=layout,
            device=device,
            seed=seed,
            strict_nan=strict_nan,
            kernel_kwargs=kernel_kwargs,
        )
    axes = {
        "offs": offs,
        "groups": groups,
        "dtype": dtype,
        "fp8_dtype": fp8_dtype,
        "round_scales_to_power_of_2": round_scales_to_power_of_2,
        "values": values,
        "layout": layout,
    }
    common = {
        "device": device,
        "seed": seed,
        "strict_nan": strict_nan,
        "check_determinism": check_determinism,
        "max_examples": max_examples,
    }
    free = [k for k, v in axes.items() if v is None and (c.jagged or k not in ("offs", "groups"))]
    if c.jagged and offs is not None and not isinstance(offs, str):
        free = [k for k in free if k != "groups"]  # explicit offsets fix the group count
    if not battery or not free:
        pinned = {k: _SINGLE[k] if v is None else v for k, v in axes.items()}
        if not c.jagged:
            pinned["offs"] = None
        return _compare_one(rk, c, shape, prelude=_prelude, kernel_kwargs=kernel_kwargs, **pinned, **common)
    kwargs_grid = rk.spec.kwargs_grid if rk.spec is not None and not kernel_kwargs else (kernel_kwargs,)
    members, notes = build_battery(c, shape, formats=battery_formats(rk.spec, device), kwargs_grid=kwargs_grid, **axes)
    reports, earlier = [], {}
    for m in members:
        # A member's prelude: the calls before it on the same shape (a per-shape cache's state depends on them).
        before = earlier.setdefault(m.shape, [])
        prelude = (*_prelude, *before) if m.shape == tuple(shape) else tuple(before)
        report = _compare_one(
            rk,
            c,
            m.shape,
            prelude=prelude,
            kernel_kwargs=dict(m.kernel_kwargs),
            offs=m.offs,
            groups=m.groups or _SINGLE["groups"],
            dtype=m.dtype,
            fp8_dtype=m.fp8_dtype,
            round_scales_to_power_of_2=m.round_scales_to_power_of_2,
            values=m.values,
            layout=m.layout,
            member=m.label,
            **common,
        )
        reports.append(report)
        if report.call.offs is not None:
            before.append(report.call.offs)
    return merge_reports(reports, notes, max_examples)


def _compare_one(
    rk: ResolvedKernel,
    c,
    shape: Sequence[int],
    *,
    offs: str | Sequence[int] | None,
    groups: int,
    dtype: torch.dtype,
    fp8_dtype: torch.dtype,
    round_scales_to_power_of_2: bool,
    values: str,
    layout: str,
    device: torch.device,
    seed: int,
    strict_nan: bool,
    check_determinism: bool,
    max_examples: int,
    prelude: tuple[tuple[int, ...], ...],
    kernel_kwargs: dict,
    member: str = "",
) -> Report:
    """One comparison with every axis fixed: the kernel twice into poisoned outputs, the reference once."""
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
        prelude=prelude,
        member=member
        or member_label(
            shape,
            values=values,
            pow2=round_scales_to_power_of_2,
            dtype=dtype,
            fp8_dtype=fp8_dtype,
            layout=layout,
            offs=inputs.offs if offs is None or not isinstance(offs, str) else offs,
            groups=None if inputs.offs is None else len(inputs.offs),
            kernel_kwargs=kernel_kwargs,
        ),
    )
    # A callable without a spec is judged against the reference itself, whatever kernel packages are installed.
    spec = rk.spec or reference_spec(c.name)
    args = {"fp8_dtype": fp8_dtype, "round_scales_to_power_of_2": round_scales_to_power_of_2}
    expected = _as_outputs(c.call(spec.reference_fn(), inputs.xs, inputs.offs_tensor(), **args))
    # Redzones as large as the largest tensor of the call: a store grid sized for another tensor (the dual op's second
    # half launched with the first half's width) overruns by at most that much (fp8ref.engine.poison).
    redzone = max(t.untyped_storage().nbytes() for t in (*expected, *inputs.xs))
    try:
        runs_and_problems = [
            _run(rk, inputs, device, byte, {**args, **kernel_kwargs}, redzone) for byte in POISON_BYTES
        ]
    except Exception as exc:
        return call_failed(call, [("kernel_raised", f"{type(exc).__name__}: {exc}")], kernel_traceback(exc))
    runs = [outputs for outputs, _ in runs_and_problems]
    side_effects = _once_per_output(p for _, problems in runs_and_problems for p in problems)
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


def _once_per_output(problems) -> list[Problem]:
    """Problems of both runs, each once; an output's out-of-bounds writes once (the first run's count: the second
    run's poison byte may equal a byte the kernel writes, so the two counts can differ by a few)."""
    seen, kept = set(), []
    for category, text in problems:
        key = (category, text.split(":")[0] if category == "out_of_bounds_write" else text)
        if key not in seen:
            seen.add(key)
            kept.append((category, text))
    return kept


def compare_sequence(
    kernel: object, shape: Sequence[int], *, groups: Sequence[int] = (1, 3, 8), offs: str = "random", **kwargs
) -> tuple[Report, ...]:
    """Compare the same kernel object on one shape with several group counts, in order, in this process.

    Anything a kernel caches per shape must key on everything that changes the result (SPEC §6): a cache keyed on
    the shape alone passes the first call and fails a later one. Each report's ``call.prelude`` records the calls
    before it, so its repro replays them. Axes other than offs and groups follow ``compare``'s battery rules.
    """
    reports, prelude = [], ()
    for g in groups:
        report = compare(kernel, shape, offs=offs, groups=g, _prelude=prelude, **kwargs)
        reports.append(report)
        prelude = (*prelude, report.call.offs)
    return tuple(reports)
