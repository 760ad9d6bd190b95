"""``fp8ref.fuzz``: hypothesis over (shape, offs, values, seed, ...) that shrinks a failure to a minimal Report.

Hypothesis runs without its example database (nothing is written to ``.hypothesis/``) and without a deadline (the
Triton interpreter takes ~ms per program instance). When an example fails, hypothesis shrinks it (smaller dims,
fewer groups, simpler offsets, "normal" values, seed 0) and replays the minimal one; its Report is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fp8ref.contracts import OpContract, contract
from fp8ref.engine.battery import DTYPES, battery_formats
from fp8ref.engine.comparator import compare, default_device, resolve_kernel
from fp8ref.engine.report import Report
from fp8ref.engine.values import VALUE_KINDS
from fp8ref.layouts import OFFS_LAYOUTS

__all__ = ["DIM_CAPS", "fuzz"]

#: Largest size drawn per dim letter: ~64 x 200 keeps one interpreted kernel call well under a second on the CPU,
#: and 200 exceeds one 128-wide block plus a tail.
DIM_CAPS: dict[str, int] = {"M": 64, "K": 200, "Ktot": 200, "N": 32, "N1": 16, "N2": 16, "E": 3}
_CAPS_3D: dict[str, int] = {"E": 3, "K": 48, "N": 48}


class _Failed(Exception):
    def __init__(self, report: Report):
        super().__init__(repr(report))
        self.report = report


def _example(c: OpContract, layouts: Sequence[str], dtypes, fp8_dtypes, sequence: bool):
    from hypothesis import strategies as st

    dims = c.dims
    caps = _CAPS_3D if dims[0] == "E" else DIM_CAPS

    @st.composite
    def draw(draw_):
        shape = tuple(draw_(st.integers(1, caps[d]), label=d) for d in dims)
        ex = {"shape": shape, "offs": None, "prelude_groups": ()}
        if c.jagged:
            length = c.jagged_length(shape)
            explicit = st.lists(st.integers(0, length), min_size=1, max_size=8).map(lambda v: tuple(sorted(v)))
            ex["offs"] = draw_(st.one_of(explicit, st.sampled_from(OFFS_LAYOUTS)), label="offs")
            ex["groups"] = draw_(st.integers(1, 8), label="groups")
            if sequence:
                ex["prelude_groups"] = tuple(draw_(st.lists(st.integers(1, 8), max_size=2), label="prelude"))
        ex["values"] = draw_(st.sampled_from(VALUE_KINDS), label="values")
        ex["seed"] = draw_(st.integers(0, 2**16), label="seed")
        ex["round_scales_to_power_of_2"] = draw_(st.sampled_from(c.round_scales_options), label="pow2")
        ex["layout"] = draw_(st.sampled_from(tuple(layouts)), label="layout")
        ex["dtype"] = draw_(st.sampled_from(tuple(dtypes)), label="dtype")
        ex["fp8_dtype"] = draw_(st.sampled_from(tuple(fp8_dtypes)), label="fp8_dtype")
        return ex

    return draw()


def fuzz(
    kernel: object,
    *,
    like: str | None = None,
    max_examples: int = 50,
    seed: int = 0,
    fresh: Callable[[], Callable] | None = None,
    sequence: bool = False,
    category: str | None = None,
    dtypes: Sequence[torch.dtype] | None = None,
    fp8_dtypes: Sequence[torch.dtype] | None = None,
    layouts: Sequence[str] | None = None,
    **compare_kwargs,
) -> Report | None:
    """Search for an input on which ``kernel`` fails ``compare``; return the shrunk failing Report, or None.

    Args:
        kernel: anything ``compare`` accepts.
        like: the op contract, when the kernel's name does not say.
        max_examples: examples generated before giving up (shrinking runs more).
        seed: the hypothesis seed; the same seed explores the same examples.
        fresh: a factory returning a new kernel object per example, for kernels with state (caches): without it,
            state left by one example changes the next and the failure cannot be shrunk.
        sequence: before each example, call the kernel on the same shape with up to two other group counts
            (jagged ops), so per-shape caches that ignore the group count are exercised.
        category: count an example as failing only if this category fails in it (shrink to *that* failure).
        dtypes: the input dtypes to draw from; default the battery's (fp8ref.engine.battery DTYPES).
        fp8_dtypes: the fp8 formats to draw from; default those the battery tries for this kernel on the device
            (fnuz included where stored) that the op takes.
        layouts: the input memory layouts to draw from; default the contract's layouts.
        **compare_kwargs: passed to every ``compare`` call (e.g. device, strict_nan, method="atomic").
    """
    # hypothesis is a test extra, imported here so that ``import fp8ref`` needs only torch.
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    rk = resolve_kernel(kernel, like)
    op = rk.op
    c = contract(op)
    if c.kind != "quantize":
        raise ValueError(f"fuzz searches the quantization ops; {op} is judged by SQNR: use compare(kernel, shape)")
    device = compare_kwargs.get("device") or default_device()
    if fp8_dtypes is None:
        fp8_dtypes = tuple(f for f in battery_formats(rk.spec, device) if f in c.fp8_dtypes)
    strategy = _example(c, layouts or c.input_layouts, dtypes or DTYPES, fp8_dtypes, sequence)

    @hypothesis_seed(seed)
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
    )
    @given(strategy)
    def search(ex: dict) -> None:
        k = fresh() if fresh is not None else kernel
        common = {key: ex[key] for key in ("values", "seed", "round_scales_to_power_of_2", "layout", "dtype")}
        common = {**common, "fp8_dtype": ex["fp8_dtype"], "like": op, **compare_kwargs}
        prelude: tuple[tuple[int, ...], ...] = ()
        for g in ex["prelude_groups"]:
            r = compare(k, ex["shape"], offs="uniform", groups=g, _prelude=prelude, **common)
            prelude = (*prelude, r.call.offs)
        offs_kw = {} if ex["offs"] is None else {"offs": ex["offs"], "groups": ex["groups"]}
        report = compare(k, ex["shape"], _prelude=prelude, **offs_kw, **common)
        if not report.ok and (category is None or category in report.failing):
            raise _Failed(report)

    try:
        search()
    except _Failed as failure:
        return failure.report
    return None
