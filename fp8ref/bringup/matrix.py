"""The kernel differential matrix: every discovered KernelSpec through ``fp8ref.compare`` on this backend.

The cases are ``KernelSpec.params(mode, fp8_dtypes=<what the backend stores>)``, the grid pytest runs, narrowed to
one small shape per spec (the smallest with every dim >= 2, so each dim has a tail) and, for jagged ops, 7 groups.
Modes: on a GPU "full", the whole product (~1,000 cases with two fp8 dtypes); in the interpreter "covering", every
(layout class, fp8 dtype) pair with the other axes chosen for pairwise coverage (~100 cases with four fp8 dtypes,
~0.2-1 s each on 2 cores, triton 3.9); ``--quick``: "quick", each layout class and fp8 dtype once (~30 cases).
Every case runs the kernel twice into poisoned outputs, so tails and masking are exercised.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import torch

from fp8ref.backends import kernel_backend
from fp8ref.bringup.progress import Progress
from fp8ref.bringup.results import MAX_EXAMPLES, StepResult
from fp8ref.bringup.shard import run_items
from fp8ref.engine.battery import label_of
from fp8ref.formats import fmt

__all__ = ["matrix_item", "matrix_items", "matrix_steps"]

#: Group count for jagged ops: with 7 groups every offs layout (empty, size-1, dominant, ...) has room to differ.
_GROUPS = 7


def _specs() -> tuple:
    from fp8ref import spec

    return spec.specs()


def _narrowed(spec):
    """``spec`` on one shape (the smallest with every dim >= 2, else the largest) and one group count."""
    shapes = sorted(spec.test_shapes, key=lambda s: (torch.Size(s).numel(), s))
    shape = next((s for s in shapes if min(s) >= 2), shapes[-1])
    groups = _GROUPS if _GROUPS in spec.group_counts else max(spec.group_counts)
    return dataclasses.replace(spec, test_shapes=(shape,), group_counts=(groups,))


def matrix_items(
    device: torch.device, fp8_dtypes: tuple[torch.dtype, ...], *, quick: bool
) -> tuple[list[dict], list[StepResult]]:
    """The cases to run (picklable dicts) and a skipped step for every spec x fp8 dtype the backend cannot run.

    Mode: "quick" with ``quick``; else "full" on a GPU and "covering" in the interpreter (KernelSpec.params).
    """
    backend = kernel_backend().describe(device)
    mode = "quick" if quick else ("covering" if backend.interpreter else "full")
    items, skipped = [], []
    for index, spec in enumerate(_specs()):
        runnable = []
        for f8 in fp8_dtypes:
            reason = spec.unsupported(device, f8) or (
                None if f8 in backend.fp8_dtypes else f"the {backend.kind}/{backend.arch} backend has no {fmt(f8).name}"
            )
            if reason:
                skipped.append(
                    StepResult(
                        step="kernel_matrix",
                        name=f"kernel_matrix/{spec.id}/{fmt(f8).name}",
                        status="skipped",
                        note=reason,
                        params={"op": spec.id, "fp8_dtype": fmt(f8).name},
                    )
                )
            else:
                runnable.append(f8)
        if not runnable:
            continue
        for p in _narrowed(spec).params(mode, fp8_dtypes=runnable):
            items.append(
                {
                    "name": f"kernel_matrix/{p.id}",
                    # The case named as compare's battery names its members (fp8ref.engine.battery.label_of).
                    "member": label_of(p),
                    "spec_index": index,
                    "spec": spec.id,
                    "op": spec.name,
                    "shape": p.shape,
                    "groups": p.groups,
                    "offs": p.offs,
                    "layout": p.layout,
                    "dtype": str(p.dtype).removeprefix("torch."),
                    "fp8_dtype": fmt(p.fp8_dtype).name,
                    "pow2": p.round_scales_to_power_of_2,
                    "values": p.values,
                    "kwargs": dict(p.kernel_kwargs),
                }
            )
    return items, skipped


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
            spec,
            item["shape"],
            dtype=getattr(torch, item["dtype"]),
            fp8_dtype=fmt(item["fp8_dtype"]).dtype,
            round_scales_to_power_of_2=item["pow2"],
            values=item["values"],
            layout=item["layout"],
            device=device,
            max_examples=4 * MAX_EXAMPLES,
            **kwargs,
            **item["kwargs"],
        )
    # Every problem and mismatch is counted once, under its own category (kernel_raised, shape_stride_dtype, ...),
    # with readable examples; a kernel's exception keeps its traceback in the JSON.
    categories = {}
    for cat, count in report.categories.items():
        examples: list = report.examples(cat, MAX_EXAMPLES)
        if cat == "kernel_raised" and report.traceback:
            examples = [{"exception": report.error, "traceback": report.traceback}]
        categories[cat] = {"count": count, "examples": examples}
    note = "" if report.ok else "failing: " + ", ".join(report.failing or tuple(categories))
    return StepResult(
        step="kernel_matrix",
        name=item["name"],
        status="pass" if report.ok else "fail",
        checked=report.n_fp8 + report.n_scales,
        mismatches=sum(c["count"] for c in categories.values()),
        categories=categories,
        duration_s=time.monotonic() - start,
        note=note,
        params={
            **{
                k: item[k]
                for k in (
                    "op",
                    "spec",
                    "member",
                    "shape",
                    "groups",
                    "offs",
                    "layout",
                    "dtype",
                    "fp8_dtype",
                    "pow2",
                    "values",
                )
            },
            **({} if report.ok else {"repro": report.repro()}),
        },
    ).to_dict()


def matrix_steps(
    device: torch.device,
    devices: list[int],
    fp8_dtypes: tuple[torch.dtype, ...],
    *,
    quick: bool,
    show_progress: bool,
) -> list[StepResult]:
    """Every case of the matrix as a StepResult, sharded over ``devices`` when there are several GPUs."""
    from fp8ref.spec import load_errors

    broken = load_errors()
    if broken:
        # A kernel package that is installed but does not load is a genuine failure, never an empty matrix.
        return [
            StepResult(
                step="kernel_matrix",
                name=f"kernel_matrix/load/{ep}",
                status="fail",
                checked=1,
                mismatches=1,
                categories={"load_error": {"count": 1, "examples": [{"exception": repr(exc)}]}},
                note=f"entry point fp8ref.specs:{ep} failed to load",
            )
            for ep, exc in broken.items()
        ]
    if not _specs():
        return [
            StepResult(
                step="kernel_matrix",
                name="kernel_matrix",
                status="skipped",
                note="no kernel package publishes specs (entry point group fp8ref.specs)",
            )
        ]
    items, skipped = matrix_items(device, fp8_dtypes, quick=quick)
    with Progress("kernel matrix", len(items), enabled=show_progress) as bar:
        results = run_items("fp8ref.bringup.matrix:matrix_item", items, device, devices, bar)
    return skipped + [StepResult(**r) for r in results]
