"""The kernel differential matrix: every discovered KernelSpec through ``fp8ref.compare`` on this backend.

Axes per spec: layout class (the named offs layouts for jagged ops, the input memory layouts otherwise) x input
dtype x fp8 dtype the backend stores x round_scales_to_power_of_2 x values ("normal", "special": NaN, +-inf, -0,
subnormals, all-zero and near-pow2 slices) x memory layout (jagged ops) x the spec's launch variants.

On a GPU the default is that whole product (~1,000 cases). In the interpreter a case takes 0.5-1.5 s (2 cores,
triton 3.9), so the default there covers every (layout class, fp8 dtype) pair and rotates dtype, pow2 and values
through them (~100 cases, ~2 min); ``--quick`` shows each layout class and each fp8 dtype once (~30 cases). Every
case runs on one small shape per spec, twice with poisoned outputs, so tails and masking are exercised.
"""

from __future__ import annotations

import itertools
import time
import warnings

import torch

from fp8ref.bringup.progress import Progress
from fp8ref.bringup.results import MAX_EXAMPLES, StepResult
from fp8ref.bringup.shard import run_items
from fp8ref.formats import fmt

__all__ = ["VALUES", "matrix_item", "matrix_items", "matrix_steps"]

VALUES = ("normal", "special")
#: Group count for jagged ops: with 7 groups every offs layout (empty, size-1, dominant, ...) has room to differ.
_GROUPS = 7


def _specs() -> tuple:
    # The engine package first: fp8ref.spec imports fp8ref.engine.contracts, whose package imports fp8ref.spec back.
    import fp8ref.engine  # noqa: F401
    from fp8ref import spec

    return spec.specs()


def _shape(spec) -> tuple[int, ...]:
    """The smallest test shape with every dim >= 2 (a tail in each dim), else the largest one."""
    shapes = sorted(spec.test_shapes, key=lambda s: (torch.Size(s).numel(), s))
    return next((s for s in shapes if min(s) >= 2), shapes[-1])


def _groups(spec) -> int | None:
    if not spec.contract.jagged:
        return None
    return _GROUPS if _GROUPS in spec.group_counts else max(spec.group_counts)


def _cases(spec, classes: tuple[str, ...], fp8_dtypes: list[torch.dtype], mode: str) -> list[tuple]:
    """(layout class, dtype, fp8 dtype, pow2, values, memory layout) tuples of one spec for ``mode``.

    "full": the whole product. "covering": every (layout class, fp8 dtype) pair. "quick": as few cases as show
    every layout class and every fp8 dtype once. In both, case i takes values i % 2, pow2 (i // 2) % 2 and dtype
    i % 3: 3 is coprime with 4, so any 12 consecutive cases meet all 12 (values, pow2, dtype) combinations, and
    "special" values come every other case.
    """
    if mode == "full":
        layouts = spec.layouts if spec.contract.jagged else (None,)
        return list(itertools.product(classes, spec.dtypes, fp8_dtypes, spec.pow2, VALUES, layouts))
    if mode == "covering":
        pairs = list(itertools.product(classes, fp8_dtypes))
    else:
        n = max(len(classes), len(fp8_dtypes))
        pairs = [(classes[i % len(classes)], fp8_dtypes[i % len(fp8_dtypes)]) for i in range(n)]
    return [
        (cls, spec.dtypes[i % len(spec.dtypes)], f8, spec.pow2[(i // 2) % len(spec.pow2)], VALUES[i % 2],
         spec.layouts[(i // 4) % len(spec.layouts)] if spec.contract.jagged else None)
        for i, (cls, f8) in enumerate(pairs)
    ]


def matrix_items(
    device: torch.device, fp8_dtypes: tuple[torch.dtype, ...], *, quick: bool
) -> tuple[list[dict], list[StepResult]]:
    """The cases to run (picklable dicts) and a skipped step for every spec x fp8 dtype the backend cannot run.

    Mode: "quick" with ``quick``; else "full" on a GPU and "covering" in the interpreter (see _cases).
    """
    from fp8moe import backend_for

    backend = backend_for(device)
    mode = "quick" if quick else ("covering" if backend.kind == "interpreter" else "full")
    items, skipped = [], []
    for index, spec in enumerate(_specs()):
        runnable = []
        for f8 in fp8_dtypes:
            reason = spec.unsupported(device, f8) or (
                None if f8 in backend.fp8_dtypes else f"the {backend.kind}/{backend.arch} backend has no {fmt(f8).name}"
            )
            if reason:
                skipped.append(StepResult(
                    step="kernel_matrix", name=f"kernel_matrix/{spec.id}/{fmt(f8).name}", status="skipped",
                    note=reason, params={"op": spec.id, "fp8_dtype": fmt(f8).name},
                ))
            else:
                runnable.append(f8)
        if not runnable:
            continue
        jagged = spec.contract.jagged
        classes = spec.offs_layouts if jagged else spec.layouts
        for (cls, dtype, f8, pow2, values, memory_layout), kwargs in itertools.product(
            _cases(spec, classes, runnable, mode), spec.kwargs_grid
        ):
            items.append({
                "spec_index": index,
                "spec": spec.id,
                "op": spec.name,
                "shape": _shape(spec),
                "groups": _groups(spec),
                "offs": cls if jagged else None,
                "layout": memory_layout if jagged else cls,
                "dtype": str(dtype).removeprefix("torch."),
                "fp8_dtype": fmt(f8).name,
                "pow2": pow2,
                "values": values,
                "kwargs": dict(kwargs),
            })
    return items, skipped


def _case_name(item: dict) -> str:
    parts = [item["spec"], "x".join(map(str, item["shape"]))]
    if item["groups"] is not None:
        parts += [f"G{item['groups']}", item["offs"]]
    parts += [item["layout"], item["dtype"], item["fp8_dtype"], "pow2" if item["pow2"] else "nopow2", item["values"]]
    parts += [str(v) for v in item["kwargs"].values()]
    return "kernel_matrix/" + "-".join(parts)


def matrix_item(item: dict, device: torch.device) -> dict:
    """Run one case through fp8ref.compare; a StepResult as a dict (runs in shard workers too)."""
    from fp8ref.engine import compare

    start = time.monotonic()
    spec = _specs()[item["spec_index"]]
    kwargs = {"offs": item["offs"], "groups": item["groups"]} if item["groups"] is not None else {}
    with warnings.catch_warnings():
        # The interpreter evaluates kernels in numpy, which warns on inf * 0 and NaN compares: the "special" values
        # do that on purpose, and the bytes are what is checked.
        warnings.simplefilter("ignore", RuntimeWarning)
        report = compare(
            spec, item["shape"], dtype=getattr(torch, item["dtype"]), fp8_dtype=fmt(item["fp8_dtype"]).dtype,
            round_scales_to_power_of_2=item["pow2"], values=item["values"], layout=item["layout"], device=device,
            max_examples=4 * MAX_EXAMPLES, **kwargs, **item["kwargs"],
        )
    categories = {}
    for cat, count in report.categories.items():
        examples = [str(m) for m in report.mismatches if m.category == cat][:MAX_EXAMPLES]
        categories[cat] = {"count": count, "examples": examples}
    if report.error:
        categories["kernel_error"] = {"count": 1, "examples": [report.error]}
    if report.structure:
        categories["structure"] = {"count": len(report.structure), "examples": list(report.structure[:MAX_EXAMPLES])}
    note = "" if report.ok else "failing: " + ", ".join(report.failing or tuple(categories))
    return StepResult(
        step="kernel_matrix",
        name=_case_name(item),
        status="pass" if report.ok else "fail",
        checked=report.n_fp8 + report.n_scales,
        mismatches=sum(c["count"] for c in categories.values()),
        categories=categories,
        duration_s=time.monotonic() - start,
        note=note,
        params={
            **{k: item[k] for k in ("op", "spec", "shape", "groups", "offs", "layout", "dtype", "fp8_dtype", "pow2",
                                    "values")},
            **({} if report.ok else {"repro": report.repro()}),
        },
    ).to_dict()


def matrix_steps(
    device: torch.device, devices: list[int], fp8_dtypes: tuple[torch.dtype, ...], *, quick: bool,
    show_progress: bool,
) -> list[StepResult]:
    """Every case of the matrix as a StepResult, sharded over ``devices`` when there are several GPUs."""
    if not _specs():
        return [StepResult(step="kernel_matrix", name="kernel_matrix", status="skipped",
                           note="no kernel package publishes specs (entry point group fp8ref.specs)")]
    items, skipped = matrix_items(device, fp8_dtypes, quick=quick)
    with Progress("kernel matrix", len(items), enabled=show_progress) as bar:
        results = run_items("fp8ref.bringup.matrix:matrix_item", items, device, devices, bar)
    return skipped + [StepResult(**r) for r in results]
