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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import torch

from fp8ref.engine.contracts import CONTRACTS, OpContract, contract
from fp8ref.engine.layouts import OFFS_LAYOUTS

__all__ = ["Exact", "KernelSpec", "Param", "Sqnr", "find_spec", "reference_specs", "resolve", "specs"]

_DTYPE_IDS = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}


@dataclass(frozen=True)
class Exact:
    """Raw bytes must match: fp8 codes via ``view(torch.uint8)``, scales via ``view(torch.int32)``."""

    def __str__(self) -> str:
        return "exact bytes"


@dataclass(frozen=True)
class Sqnr:
    """Every group's SQNR against float64 must be at least ``min_db``; ``why`` derives the number.

    Only for outputs that legitimately differ in bytes (e.g. a GEMM with a different accumulation order); the
    quantization ops of SPEC §5 are all Exact.
    """

    min_db: float
    why: str

    def __post_init__(self) -> None:
        if not self.why.strip():
            raise ValueError("Sqnr tolerance needs its derivation in `why`")

    def __str__(self) -> str:
        return f"SQNR >= {self.min_db} dB ({self.why})"


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
    """One point of a spec's test grid; ``id`` is the pytest id."""

    spec: KernelSpec
    shape: tuple[int, ...]
    groups: int | None
    dtype: torch.dtype
    fp8_dtype: torch.dtype
    round_scales_to_power_of_2: bool
    layout: str
    kernel_kwargs: Mapping[str, object]

    @property
    def id(self) -> str:
        parts = [self.spec.id, "x".join(map(str, self.shape))]
        if self.groups is not None:
            parts.append(f"G{self.groups}")
        parts += [_DTYPE_IDS[self.dtype], str(self.fp8_dtype).removeprefix("torch.float8_")]
        if self.round_scales_to_power_of_2:
            parts.append("pow2")
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
            "layout": self.layout,
            **self.kernel_kwargs,
        }
        if self.groups is not None:
            kw["groups"] = self.groups
        return kw


@dataclass(frozen=True)
class KernelSpec:
    """A kernel paired with its reference and the grid it is tested and benchmarked on.

    Attributes:
        name: the op name, identical in fp8ref.ops and the kernel package (SPEC §5).
        kernel: the kernel, or a "module:attr" path resolved on first use (keeps discovery free of imports).
        reference: the reference, default "fp8ref.ops:<name>".
        variant: a label when several specs share an op (e.g. "atomic"); part of ``id``.
        test_shapes: small shapes (the Triton interpreter runs ~ms per program instance on the CPU).
        bench_shapes: production shapes for benchmarks.
        group_counts: G values for jagged ops (ignored otherwise).
        offs_layouts: named group layouts to sweep (fp8ref.engine.layouts.OFFS_LAYOUTS).
        dtypes, fp8_dtypes: input and output dtypes to sweep.
        pow2: round_scales_to_power_of_2 values to sweep.
        kwargs_grid: extra kernel keyword arguments, one dict per variant of the launch (never semantic).
        layouts: input memory layouts the kernel accepts (default: the op contract's).
        tolerance: Exact() for every quantization op.
        supports: (device, fp8_dtype) -> None, or the reason the combination cannot run there (a skip reason).
    """

    name: str
    kernel: Callable | str
    reference: Callable | str | None = None
    variant: str = ""
    test_shapes: tuple[tuple[int, ...], ...] = ()
    bench_shapes: tuple[tuple[int, ...], ...] = ()
    group_counts: tuple[int, ...] = (1, 3, 7)
    offs_layouts: tuple[str, ...] = ("uniform", "random", "empty_middle", "size1", "dominant", "tail_past_end")
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)
    fp8_dtypes: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e5m2)
    pow2: tuple[bool, ...] = (False, True)
    kwargs_grid: tuple[Mapping[str, object], ...] = field(default_factory=lambda: ({},))
    layouts: tuple[str, ...] = ()
    tolerance: Exact | Sqnr = Exact()
    supports: Callable[[torch.device, torch.dtype], str | None] | None = None

    def __post_init__(self) -> None:
        contract(self.name)  # fail at definition time on a misspelt op
        unknown = set(self.offs_layouts) - set(OFFS_LAYOUTS)
        if unknown:
            raise ValueError(f"{self.id}: unknown offs layouts {sorted(unknown)}")
        if not self.layouts:
            object.__setattr__(self, "layouts", self.contract.input_layouts)

    @property
    def id(self) -> str:
        return f"{self.name}[{self.variant}]" if self.variant else self.name

    @property
    def contract(self) -> OpContract:
        return contract(self.name)

    @property
    def jagged_dim(self) -> int | None:
        """The input dim ``offs`` splits (None for ops without offs)."""
        return self.contract.jagged_dim

    def kernel_fn(self) -> Callable:
        return resolve(self.kernel) if isinstance(self.kernel, str) else self.kernel

    def reference_fn(self) -> Callable:
        ref = self.reference or f"fp8ref.ops:{self.name}"
        return resolve(ref) if isinstance(ref, str) else ref

    @property
    def cases(self) -> tuple:
        """The op's named case table (fp8ref.cases.CASES[name]); empty when none is defined."""
        try:
            from fp8ref.cases import CASES
        except ImportError:
            return ()
        return tuple(CASES.get(self.name, ()))

    def bytes_moved(self, xs: tuple[torch.Tensor, ...], groups: int = 1) -> int:
        """Ideal bytes (SPEC §7): every input read once, one fp8 byte written per element, f32 scales written."""
        shape = tuple(xs[0].shape) if len(xs) == 1 else (xs[0].shape[0], xs[0].shape[1], xs[1].shape[1])
        read = sum(x.numel() * x.element_size() for x in xs)
        return read + sum(x.numel() for x in xs) + 4 * self.contract.n_scales(shape, groups)

    def unsupported(self, device: torch.device | str, fp8_dtype: torch.dtype) -> str | None:
        """Why (device, fp8_dtype) cannot run, or None when it can."""
        return None if self.supports is None else self.supports(torch.device(device), fp8_dtype)

    def params(self) -> Iterator[Param]:
        """The test grid: shapes x groups x dtypes x fp8 dtypes x pow2 x layouts x kwargs variants."""
        groups = self.group_counts if self.contract.jagged else (None,)
        for shape, g, dt, f8, p2, lay, kw in itertools.product(
            self.test_shapes, groups, self.dtypes, self.fp8_dtypes, self.pow2, self.layouts, self.kwargs_grid
        ):
            yield Param(self, shape, g, dt, f8, p2, lay, dict(kw))


_REFERENCE_TEST_SHAPES: dict[str, tuple[tuple[int, ...], ...]] = {
    "rowwise_2d_scale_and_cast": ((1, 1), (7, 100), (64, 130)),
    "colwise_3d_scale_and_cast": ((1, 1, 1), (2, 7, 100), (3, 32, 17)),
    "rowwise_3d_transpose_rhs": ((1, 1, 1), (2, 7, 100), (3, 32, 17)),
    "per_group_rowwise_scales": ((1, 1), (7, 100), (16, 130)),
    "per_group_colwise_scales": ((1, 1), (100, 7), (130, 16)),
    "per_group_colwise_scales_dual": ((1, 1, 1), (100, 7, 3), (130, 16, 9)),
}


@functools.cache
def reference_specs() -> tuple[KernelSpec, ...]:
    """One spec per op whose kernel is the reference itself: the contract any callable can be compared under."""
    return tuple(
        KernelSpec(name, kernel=f"fp8ref.ops:{name}", variant="reference", test_shapes=shapes)
        for name, shapes in _REFERENCE_TEST_SHAPES.items()
    )


@functools.cache
def specs() -> tuple[KernelSpec, ...]:
    """Every KernelSpec published through the ``fp8ref.specs`` entry point group.

    An entry point that fails to load (its package is broken or half-installed) is skipped with a warning; with
    none installed the result is empty and callers fall back to ``reference_specs()``.
    """
    found: list[KernelSpec] = []
    for ep in entry_points(group="fp8ref.specs"):
        try:
            found.extend(ep.load())
        except Exception as exc:
            warnings.warn(f"fp8ref.specs entry point {ep.name!r} failed to load: {exc!r}", stacklevel=2)
    return tuple(found)


def find_spec(name: str) -> KernelSpec:
    """The first discovered spec with op name or id ``name``, else the reference spec of that op.

    Raises:
        KeyError: when ``name`` is neither a spec id nor an op name.
    """
    for s in specs():
        if name in (s.id, s.name):
            return s
    if name in CONTRACTS:
        return next(s for s in reference_specs() if s.name == name)
    raise KeyError(f"no spec named {name!r}; ops: {sorted(CONTRACTS)}, specs: {[s.id for s in specs()]}")
