"""KernelSpec: the one table pytest, ``fp8ref.compare``, bring-up, benchmarks and notebooks iterate (STYLE.md).

A spec pairs a kernel with its reference and everything needed to exercise it. Kernel packages publish their specs
through the ``fp8ref.specs`` entry point group (fp8moe: ``fp8moe.specs:SPECS``); ``specs()`` discovers them. A spec
names its kernel as a "module:attr" string, resolved on first use, so discovery imports no kernel (and no Triton).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import torch

from fp8ref.contracts import CONTRACTS, QUANTIZE_OPS, OpContract, contract
from fp8ref.formats import dtype_id
from fp8ref.layouts import OFFS_LAYOUTS
from fp8ref.tolerances import Exact, Sqnr

__all__ = [
    "GRID_MODES",
    "Exact",
    "KernelSpec",
    "Param",
    "Sqnr",
    "find_spec",
    "load_errors",
    "reference_spec",
    "reference_specs",
    "resolve",
    "specs",
]

#: The modes of ``KernelSpec.params``, largest grid first.
GRID_MODES: tuple[str, ...] = ("full", "covering", "quick")


@functools.cache
def resolve(path: str) -> Callable:
    """The object a "module:attr.sub" path names (imported on first use, then cached)."""
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Param:
    """One point of a spec's test grid; ``id`` is the pytest id.

    Attributes:
        offs: the named offs layout (fp8ref.layouts.OFFS_LAYOUTS) for jagged ops, None otherwise.
        values: the input value distribution, "normal" or "special" (fp8ref.engine.values.VALUE_KINDS).
        layout: the input memory layout.
    """

    spec: KernelSpec
    shape: tuple[int, ...]
    groups: int | None
    offs: str | None
    dtype: torch.dtype
    fp8_dtype: torch.dtype
    round_scales_to_power_of_2: bool
    values: str
    layout: str
    kernel_kwargs: Mapping[str, object]

    @property
    def id(self) -> str:
        """E.g. ``per_group_colwise_scales-130x16-G7-random-bf16-e4m3fn-pow2-special``; defaults are left out."""
        parts = [self.spec.id, "x".join(map(str, self.shape))]
        if self.groups is not None:
            parts += [f"G{self.groups}", self.offs]
        parts += [dtype_id(self.dtype), dtype_id(self.fp8_dtype)]
        if self.round_scales_to_power_of_2:
            parts.append("pow2")
        if self.values != "normal":
            parts.append(self.values)
        if self.layout != self.spec.layouts[0]:
            parts.append(self.layout.replace("_major", "major"))
        parts += [str(v) for v in self.kernel_kwargs.values()]
        return "-".join(parts)

    def compare_kwargs(self) -> dict:
        """Keyword arguments for ``fp8ref.compare(self.spec, self.shape, **...)``."""
        kw = {
            "dtype": self.dtype,
            "fp8_dtype": self.fp8_dtype,
            "round_scales_to_power_of_2": self.round_scales_to_power_of_2,
            "values": self.values,
            "layout": self.layout,
            **self.kernel_kwargs,
        }
        if self.groups is not None:
            kw |= {"groups": self.groups, "offs": self.offs}
        return kw


@dataclass(frozen=True)
class KernelSpec:
    """A kernel paired with its reference and the grid it is tested and benchmarked on.

    Attributes:
        name: the op name, identical in fp8ref.ops and the kernel package (SPEC §5).
        kernel: the kernel, or a "module:attr" path resolved on first use (keeps discovery free of imports).
        reference: the reference, default the op row's (fp8ref.contracts).
        variant: a label when several specs share an op (e.g. "atomic"); part of ``id``.
        test_shapes: small shapes (the Triton interpreter runs ~ms per program instance on the CPU); default the op
            row's.
        bench_shapes: production shapes for benchmarks; default the op row's (the MoE configurations of SPEC §7).
        bench_groups: the group count of each bench shape (jagged ops; 1 elsewhere), same length as bench_shapes.
        group_counts: G values for jagged ops (ignored otherwise).
        offs_layouts: named group layouts to sweep (fp8ref.layouts.OFFS_LAYOUTS).
        dtypes, fp8_dtypes: input and output dtypes to sweep.
        round_scales_to_power_of_2: the values of the op's ``round_scales_to_power_of_2`` to sweep.
        values: input value distributions to sweep (fp8ref.engine.values.VALUE_KINDS); "special" puts NaN, +-inf,
            -0, subnormals, all-zero and near-pow2 slices in every input.
        kwargs_grid: extra kernel keyword arguments, one dict per variant of the launch (never semantic).
        layouts: input memory layouts the kernel accepts (default: the op contract's).
        tolerance: how outputs are judged; default the op row's (Exact() for every quantization op).
        supports: (device, fp8_dtype) -> None, or the reason the combination cannot run there (a skip reason).
    """

    name: str
    kernel: Callable | str
    reference: Callable | str | None = None
    variant: str = ""
    test_shapes: tuple[tuple[int, ...], ...] = ()
    bench_shapes: tuple[tuple[int, ...], ...] = ()
    bench_groups: tuple[int, ...] = ()
    group_counts: tuple[int, ...] = (1, 3, 7)
    offs_layouts: tuple[str, ...] = ("uniform", "random", "empty_middle", "size1", "dominant", "tail_past_end")
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)
    fp8_dtypes: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e5m2)
    round_scales_to_power_of_2: tuple[bool, ...] = (False, True)
    values: tuple[str, ...] = ("normal", "special")
    kwargs_grid: tuple[Mapping[str, object], ...] = field(default_factory=lambda: ({},))
    layouts: tuple[str, ...] = ()
    tolerance: Exact | Sqnr | None = None
    supports: Callable[[torch.device, torch.dtype], str | None] | None = None

    def __post_init__(self) -> None:
        contract(self.name)  # fail at definition time on a misspelt op
        unknown = set(self.offs_layouts) - set(OFFS_LAYOUTS)
        if unknown:
            raise ValueError(f"{self.id}: unknown offs layouts {sorted(unknown)}")
        row = self.contract
        if not self.layouts:
            object.__setattr__(self, "layouts", row.input_layouts)
        if self.tolerance is None:
            object.__setattr__(self, "tolerance", row.tolerance)
        # Axes the op does not take are dropped (e.g. the GEMM: e4m3 only, normal values, no pow2 knob).
        for axis, allowed in (
            ("fp8_dtypes", row.fp8_dtypes),
            ("values", row.value_kinds),
            ("round_scales_to_power_of_2", row.round_scales_options),
        ):
            kept = tuple(v for v in getattr(self, axis) if v in allowed)
            object.__setattr__(self, axis, kept or allowed[:1])
        if not self.test_shapes:
            object.__setattr__(self, "test_shapes", self.contract.test_shapes)
        if not self.bench_shapes:
            points = self.contract.bench_points
            object.__setattr__(self, "bench_shapes", tuple(shape for shape, _ in points))
            object.__setattr__(self, "bench_groups", self.bench_groups or tuple(groups for _, groups in points))
        if not self.bench_groups:
            object.__setattr__(self, "bench_groups", (1,) * len(self.bench_shapes))
        if len(self.bench_groups) != len(self.bench_shapes):
            raise ValueError(f"{self.id}: bench_groups needs one group count per bench shape")

    @property
    def id(self) -> str:
        """The op name, with the variant in brackets when there is one (``rowwise_3d_transpose_rhs[atomic]``)."""
        return f"{self.name}[{self.variant}]" if self.variant else self.name

    @property
    def contract(self) -> OpContract:
        """The op's row of the op table (fp8ref.contracts)."""
        return contract(self.name)

    @property
    def jagged_dim(self) -> int | None:
        """The input dim ``offs`` splits (None for ops without offs)."""
        return self.contract.jagged_dim

    def kernel_fn(self) -> Callable:
        """The kernel (a "module:attr" path is imported on first use)."""
        return resolve(self.kernel) if isinstance(self.kernel, str) else self.kernel

    def reference_fn(self) -> Callable:
        """The reference this spec is compared with (the op row's unless overridden)."""
        ref = self.reference or self.contract.reference
        return resolve(ref) if isinstance(ref, str) else ref

    @property
    def cases(self) -> tuple:
        """The op's named case table (the op row's); empty when none is defined."""
        return self.contract.cases

    def bytes_moved(self, xs: tuple[torch.Tensor, ...], groups: int = 1) -> int:
        """Ideal bytes (SPEC §7): every input read once, one fp8 byte written per element, f32 scales written."""
        shape = tuple(xs[0].shape) if len(xs) == 1 else (xs[0].shape[0], xs[0].shape[1], xs[1].shape[1])
        read = sum(x.numel() * x.element_size() for x in xs)
        return read + sum(x.numel() for x in xs) + 4 * self.contract.n_scales(shape, groups)

    def unsupported(self, device: torch.device | str, fp8_dtype: torch.dtype) -> str | None:
        """Why (device, fp8_dtype) cannot run, or None when it can."""
        return None if self.supports is None else self.supports(torch.device(device), fp8_dtype)

    def params(self, mode: str = "full", fp8_dtypes: Sequence[torch.dtype] | None = None) -> list[Param]:
        """The test grid: every case pytest, ``fp8ref bringup`` and the engine self-test run for this spec.

        Axes: (shape, group count) points; the layout class (the named offs layouts for jagged ops, the input memory
        layouts otherwise); fp8 dtype; and the free axes: input dtype, pow2, values, memory layout (jagged ops
        only) and kwargs variant.

        Modes:
            "full": the whole product (a GPU runs it in minutes).
            "covering": every (shape/groups, layout class, fp8 dtype) combination once, each point's free axes
                chosen by ``_pairwise`` so that every value of every axis appears and, grid size permitting, every
                pair of values of two axes meets (each fp8 dtype sees "special" inputs and pow2, each offs layout
                every input dtype, ...).
            "quick": as few points as show every shape/groups point, layout class and fp8 dtype once (point i
                takes index i of each, cyclically), free axes chosen as in "covering".

        Args:
            mode: one of GRID_MODES.
            fp8_dtypes: the fp8 dtypes to sweep instead of ``self.fp8_dtypes`` (e.g. those a backend stores).

        Raises:
            ValueError: on an unknown mode.
        """
        if mode not in GRID_MODES:
            raise ValueError(f"unknown grid mode {mode!r}; expected one of {GRID_MODES}")
        jagged = self.contract.jagged
        group_dim = self.contract.group_dim
        if group_dim is not None:
            points = [(shape, shape[group_dim]) for shape in self.test_shapes]
        else:
            points = list(itertools.product(self.test_shapes, self.group_counts if jagged else (None,)))
        formats = tuple(d for d in fp8_dtypes if d in self.contract.fp8_dtypes) if fp8_dtypes else self.fp8_dtypes
        covered = (points, self.offs_layouts if jagged else self.layouts, formats)
        free = (
            self.dtypes,
            self.round_scales_to_power_of_2,
            self.values,
            self.layouts if jagged else (None,),
            self.kwargs_grid,
        )
        if mode == "full":
            rows = list(itertools.product(*(range(len(axis)) for axis in covered + free)))
        else:
            if mode == "covering":
                base = list(itertools.product(*(range(len(axis)) for axis in covered)))
            else:
                n = max(map(len, covered))
                base = [tuple(i % len(axis) for axis in covered) for i in range(n)]
            rows = [b + f for b, f in zip(base, _pairwise(base, tuple(map(len, free))))]
        return [self._param(*(axis[i] for axis, i in zip(covered + free, row))) for row in rows]

    def _param(self, point, cls, fp8_dtype, dtype, pow2, values, memory_layout, kwargs) -> Param:
        shape, groups = point
        jagged = groups is not None
        return Param(
            self,
            shape,
            groups,
            offs=cls if jagged else None,
            dtype=dtype,
            fp8_dtype=fp8_dtype,
            round_scales_to_power_of_2=pow2,
            values=values,
            layout=memory_layout if jagged else cls,
            kernel_kwargs=dict(kwargs),
        )


def _pairwise(base: list[tuple[int, ...]], free_sizes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Free-axis indices for each base point, chosen greedily for 2-way coverage (the AETG idea).

    Each base point, in order, takes the free-axis combination that meets the most (axis a = i, axis b = j) value
    pairs not met by an earlier point, the first in product order on ties (so point 0 takes every free axis's first
    value). A value never seen brings a new pair with every other axis, so every value of every axis appears once
    there are enough points; pairs of base axes are all met by the covering product itself. Cost: points x
    combinations x axis pairs (the largest fp8moe covering grid: 108 x 24 x 25, ~9 ms).
    """
    choices = list(itertools.product(*map(range, free_sizes)))
    n_base = len(base[0]) if base else 0
    pairs = [(a, b) for a, b in itertools.combinations(range(n_base + len(free_sizes)), 2) if b >= n_base]
    met: set[tuple[int, int, int, int]] = set()
    picked = []
    for point in base:
        row = max((point + c for c in choices), key=lambda r: sum((a, r[a], b, r[b]) not in met for a, b in pairs))
        met.update((a, row[a], b, row[b]) for a, b in pairs)
        picked.append(row[n_base:])
    return picked


@functools.cache
def reference_specs() -> tuple[KernelSpec, ...]:
    """One spec per quantization op whose kernel is the reference itself: the contract any callable can be compared
    under (a grouped-GEMM reference returns more than its kernel, so it has none)."""
    return tuple(KernelSpec(name, kernel=contract(name).reference, variant="reference") for name in QUANTIZE_OPS)


def reference_spec(name: str) -> KernelSpec:
    """The reference spec of op ``name`` (KeyError for an unknown op)."""
    for s in reference_specs():
        if s.name == name:
            return s
    raise KeyError(f"no op named {name!r}; ops: {sorted(CONTRACTS)}")


@functools.cache
def specs() -> tuple[KernelSpec, ...]:
    """Every KernelSpec published through the ``fp8ref.specs`` entry point group.

    An entry point that fails to load (its package is broken or half-installed) is skipped with a warning and
    remembered: ``find_spec`` then refuses to stand the reference in for the missing kernels. With none installed
    the result is empty and callers fall back to ``reference_specs()``.
    """
    found: list[KernelSpec] = []
    for ep in entry_points(group="fp8ref.specs"):
        try:
            found.extend(ep.load())
        except Exception as exc:
            _LOAD_ERRORS[ep.name] = exc
            warnings.warn(f"fp8ref.specs entry point {ep.name!r} failed to load: {exc!r}", stacklevel=2)
    return tuple(found)


#: Entry point name -> the exception that stopped it loading (filled by ``specs()``).
_LOAD_ERRORS: dict[str, Exception] = {}


def load_errors() -> dict[str, Exception]:
    """Entry point name -> why it failed to load, after discovery (empty when every kernel package loaded)."""
    specs()
    return dict(_LOAD_ERRORS)


def find_spec(name: str) -> KernelSpec:
    """The first discovered spec with op name or id ``name``. Never the reference in a kernel's place.

    Raises:
        KeyError: when ``name`` is neither a spec id nor an op name.
        RuntimeError: when ``name`` is not found and a kernel package's entry point failed to load.
        LookupError: when ``name`` is an op that no installed kernel package publishes.
    """
    for s in specs():
        if name in (s.id, s.name):
            return s
    if _LOAD_ERRORS:
        # Falling back to the reference would compare the reference with itself: a check that cannot fail.
        failed = ", ".join(f"{ep}: {exc!r}" for ep, exc in _LOAD_ERRORS.items())
        raise RuntimeError(f"no kernel for {name!r}: kernel package(s) failed to load ({failed})")
    if name in CONTRACTS:
        # Standing the reference in would compare it with itself: a check that cannot fail.
        raise LookupError(
            f"no installed kernel package publishes {name!r} (entry point group fp8ref.specs); pass the kernel "
            f"itself (a callable with like={name!r}), or fp8ref.spec.reference_spec({name!r}) to test the reference"
        )
    raise KeyError(f"no spec named {name!r}; ops: {sorted(CONTRACTS)}, specs: {[s.id for s in specs()]}")
