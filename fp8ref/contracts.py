"""The op table: one row per op of SPEC §5, with how to call it and where each output element lives.

A contract is what makes any callable comparable: ``compare(kernel, shape, like="per_group_rowwise_scales")`` needs
to know the argument order, which input is jagged along which dim, and, for every fp8 output element, which input
element it quantizes and which scale word it used. The engine works on that element map, never on op names.

Coordinates: every element is reported as (group, row, col) of the input it quantizes. ``row, col`` are the last
two input dims; ``group`` is the jagged group (per-group ops), the expert ``e`` (3-D ops) or 0 (2-D rowwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from fp8ref import grouped_mm as grouped_mm_path
from fp8ref import ops
from fp8ref.cases import colwise_3d_scale_and_cast as cases_colwise_3d
from fp8ref.cases import per_group_colwise_scales as cases_per_group_colwise
from fp8ref.cases import per_group_colwise_scales_dual as cases_per_group_colwise_dual
from fp8ref.cases import per_group_rowwise_scales as cases_per_group_rowwise
from fp8ref.cases import rowwise_2d_scale_and_cast as cases_rowwise_2d
from fp8ref.cases import rowwise_3d_transpose_rhs as cases_transpose_rhs
from fp8ref.cases._table import Case
from fp8ref.formats import FP8_DTYPES
from fp8ref.tolerances import Exact, Sqnr

__all__ = [
    "CONTRACTS",
    "MOE_CONFIGS",
    "OP_NAMES",
    "QUANTIZE_OPS",
    "ElementMap",
    "OpContract",
    "all_cases",
    "contract",
    "group_ids",
]


@dataclass(frozen=True)
class ElementMap:
    """Where the elements of one (q, scales) output pair come from, all in the input's logical shape.

    Attributes:
        x: the input tensor the pair quantizes (CPU, input dtype, logical shape).
        q: the fp8 output permuted to ``x``'s logical shape (a view; the stored layout is checked separately).
        scale_index: int64, ``x``'s shape: index into the flattened scales of the scale each element uses.
        group: int64, ``x``'s shape: the element's group, -1 where the element is excluded (past ``offs[-1]``).
        group_stride: distance in the flattened scales between the same row/col of neighbouring groups
            (jagged ops), or None when groups have no neighbours to be confused with.
        scale_coords: flattened scale index -> (group, row, col), None for the reduced dim.
    """

    x: torch.Tensor
    q: torch.Tensor
    scale_index: torch.Tensor
    group: torch.Tensor
    group_stride: int | None
    scale_coords: Callable[[int], tuple[int, int | None, int | None]]

    @property
    def valid(self) -> torch.Tensor:
        """Bool, ``x``'s shape: True where the element belongs to a group (is compared)."""
        return self.group >= 0


def group_ids(offs: Sequence[int], length: int) -> torch.Tensor:
    """(length,) int64: the group of each index along the jagged dim; -1 past ``offs[-1]``.

    Group g is [offs[g-1], offs[g]) with offs[-1] := 0 (SPEC §4); empty groups own no index.
    """
    g = grouped_mm_path.group_ids(torch.tensor(list(offs), dtype=torch.int32), length)  # one rule, on the device there
    return torch.where(g < len(offs), g, torch.full_like(g, -1))


#: The four MoE grouped-GEMM configurations of SPEC §7, (M tokens, K, N, E experts). Every op's bench shapes are
#: derived from them (``OpContract.bench``): forward A (M,K) rowwise and B_t (E,K,N) colwise-3D; backward grad_out
#: (M,N) rowwise, B transposed rowwise, and the per-group ops over M for grad_B.
MOE_CONFIGS: tuple[tuple[int, int, int, int], ...] = (
    (16384, 7168, 2048, 8),
    (16640, 2048, 1408, 64),
    (32768, 5120, 8192, 16),
    (65536, 4096, 14336, 8),
)

Shape = tuple[int, ...]

#: How the engine compares an op's outputs: byte for byte through element maps, or a GEMM path by SQNR.
KINDS: tuple[str, ...] = ("quantize", "grouped_gemm")


@dataclass(frozen=True)
class OpContract:
    """One row of the op table: everything that is per op, in one place.

    Engine, cases, spec, plugin, bring-up, benchmarks and tests read the row; none of them branches on op names.
    Adding an op means a reference function, a kernel, a row here, and (optionally) a case table.

    Attributes:
        name: the op name, identical in fp8ref.ops and the kernel packages (SPEC §5).
        dims: names of the ``shape`` tuple ``compare`` takes, e.g. ("M", "K").
        reference: the reference function (fp8ref.ops.<name>; fp8ref.grouped_mm.grouped_mm for the GEMM).
        reduce_dim: quantization ops: the input dim each amax reduces over (where "all-zero slice" and "outlier"
            values are placed).
        scale_count: quantization ops: (input shape, groups) -> number of f32 scale words written for that input.
        element_map: quantization ops: (x, q, offs) -> ElementMap: where every fp8 element comes from and which
            scale it used.
        test_shapes: small shapes every implementation is tested on (tails, sub-block dims, non-multiples of 16).
        bench: one MOE_CONFIGS entry (M, K, N, E) -> this op's benchmark (shape, groups).
        cases: the op's named case table (fp8ref.cases.<name>.CASES).
        jagged_dim: the input dim split by ``offs`` (None for ops without offs).
        n_inputs: 1, or 2 for the dual op.
        input_layouts: layouts the op accepts, first the one it is usually fed.
        kind: how the engine compares it: "quantize" (every fp8 byte and scale word through the element maps) or
            "grouped_gemm" (results by SQNR, operands bitwise: fp8ref.engine.gemm).
        tolerance: Exact() for quantization ops; Sqnr(min_db, why) for results that may differ in bytes.
        fp8_dtypes: the fp8 formats the op takes (all four unless restricted, e.g. e4m3 only for the GEMM).
        jagged_unit: group sizes of generated offs are multiples of this (16 for the GEMM's alignment).
        value_kinds: input distributions that make sense (fp8ref.engine.values.VALUE_KINDS).
        round_scales_options: the values of ``round_scales_to_power_of_2`` the op takes.
        example_shape: the shape the README's examples use for this op (or one of the same size class): compare's
            default battery is timed and its mutant self-test run at it.
        group_dim: the ``shape`` entry that fixes the group count (the GEMM's E: one group per expert), or None
            when any group count goes (the per-group quantization ops).
    """

    name: str
    dims: tuple[str, ...]
    reference: Callable
    test_shapes: tuple[Shape, ...]
    bench: Callable[[int, int, int, int], tuple[Shape, int]]
    reduce_dim: int | None = None
    scale_count: Callable[[Shape, int], int] | None = None
    element_map: Callable[[torch.Tensor, torch.Tensor, Sequence[int] | None], ElementMap] | None = None
    cases: tuple[Case, ...] = ()
    jagged_dim: int | None = None
    n_inputs: int = 1
    input_layouts: tuple[str, ...] = ("row_major", "col_major")
    kind: str = "quantize"
    tolerance: Exact | Sqnr = field(default_factory=Exact)
    fp8_dtypes: tuple[torch.dtype, ...] = FP8_DTYPES
    jagged_unit: int = 1
    value_kinds: tuple[str, ...] = ("normal", "special")
    round_scales_options: tuple[bool, ...] = (False, True)
    group_dim: int | None = None
    example_shape: Shape = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        needed = ("reduce_dim", "scale_count", "element_map")
        if self.kind == "quantize" and any(getattr(self, f) is None for f in needed):
            raise ValueError(f"{self.name}: a quantization op's row needs {needed}")

    @property
    def jagged(self) -> bool:
        """Whether the op takes ``offs`` (its slices are jagged groups)."""
        return self.jagged_dim is not None

    @property
    def bench_points(self) -> tuple[tuple[Shape, int], ...]:
        """(shape, groups) of every MoE configuration (SPEC §7)."""
        return tuple(self.bench(*cfg) for cfg in MOE_CONFIGS)

    def input_shapes(self, shape: Sequence[int]) -> tuple[Shape, ...]:
        """Shapes of the inputs for a ``shape`` tuple: the dual op's (Ktot, N1, N2) gives (Ktot, N1), (Ktot, N2)."""
        if len(shape) != len(self.dims):
            raise ValueError(f"{self.name} takes a shape {self.dims}, got {tuple(shape)}")
        if self.n_inputs == 2:
            return (shape[0], shape[1]), (shape[0], shape[2])
        return (tuple(shape),)

    def jagged_length(self, shape: Sequence[int]) -> int:
        """Length of the jagged dim for a ``shape`` tuple."""
        return self.input_shapes(shape)[0][self.jagged_dim]

    def call(self, kernel: Callable, xs: Sequence[torch.Tensor], offs: torch.Tensor | None, **kwargs):
        """Call ``kernel`` with this op's positional convention: ``(x[, x2][, offs], **kwargs)``."""
        args = list(xs) + ([offs] if self.jagged else [])
        return kernel(*args, **kwargs)

    def n_scales(self, shape: Sequence[int], groups: int) -> int:
        """Number of f32 scale words the op writes (all pairs together)."""
        return sum(self.scale_count(s, groups) for s in self.input_shapes(shape))

    def element_maps(
        self, xs: Sequence[torch.Tensor], offs: Sequence[int] | None, outputs: Sequence[torch.Tensor]
    ) -> list[ElementMap]:
        """One ElementMap per (q, scales) pair of ``outputs`` (CPU tensors) for inputs ``xs``."""
        pairs = [(outputs[2 * i], outputs[2 * i + 1]) for i in range(len(outputs) // 2)]
        return [self.element_map(x, q, offs) for x, (q, _) in zip(xs, pairs)]

    def specified(self, case: Case, output: int = 0) -> torch.Tensor:
        """Bool mask over a case's q (logical flat order): False where the op leaves q unspecified (past offs[-1]).

        Kernels may leave those bytes unwritten; the reference writes 0x00 there and the case tables expect 0x00.
        """
        source = case.x if output == 0 else case.x2
        mask = torch.ones(source.shape, dtype=torch.bool)
        if self.jagged:
            end = case.offs[-1] if case.offs else 0
            length = source.shape[self.jagged_dim]
            mask.narrow(self.jagged_dim, end, length - end).fill_(False)
        return mask.flatten()


def _rowwise_2d_map(x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    m, k = x.shape
    idx = torch.arange(m).view(m, 1).expand(m, k)
    return ElementMap(x, q, idx, torch.zeros(m, k, dtype=torch.int64), None, lambda i: (0, i, None))


def _colwise_3d_map(x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    e, k, n = x.shape
    idx = (torch.arange(e).view(e, 1, 1) * n + torch.arange(n).view(1, 1, n)).expand(e, k, n)
    grp = torch.arange(e).view(e, 1, 1).expand(e, k, n)
    return ElementMap(x, q, idx, grp, None, lambda i: (i // n, None, i % n) if n else (0, None, 0))


def _transpose_rhs_map(x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    e, k, n = x.shape
    idx = (torch.arange(e).view(e, 1, 1) * k + torch.arange(k).view(1, k, 1)).expand(e, k, n)
    grp = torch.arange(e).view(e, 1, 1).expand(e, k, n)
    # q is (E, N, K); its transpose is in x's (E, K, N) coordinates.
    coords = lambda i: (i // k, i % k, None) if k else (0, 0, None)
    return ElementMap(x, q.transpose(-1, -2), idx, grp, None, coords)


def _per_group_rowwise_map(x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    m, ktot = x.shape
    g = group_ids(offs, ktot).view(1, ktot).expand(m, ktot)
    idx = g.clamp(min=0) * m + torch.arange(m).view(m, 1)
    return ElementMap(x, q, idx, g, m, lambda i: (i // m, i % m, None) if m else (0, 0, None))


def _per_group_colwise_map(x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    ktot, n = x.shape  # also each half of the dual op
    g = group_ids(offs, ktot).view(ktot, 1).expand(ktot, n)
    idx = g.clamp(min=0) * n + torch.arange(n).view(1, n)
    return ElementMap(x, q, idx, g, n, lambda i: (i // n, None, i % n) if n else (0, None, 0))


#: The op table (SPEC §5), one row per op.
CONTRACTS: dict[str, OpContract] = {
    c.name: c
    for c in (
        OpContract(
            "rowwise_2d_scale_and_cast",
            ("M", "K"),
            ops.rowwise_2d_scale_and_cast,
            reduce_dim=1,
            scale_count=lambda s, g: s[0],
            element_map=_rowwise_2d_map,
            example_shape=(4096, 512),
            test_shapes=((1, 1), (7, 100), (33, 130)),
            bench=lambda m, k, n, e: ((m, k), 1),
            cases=cases_rowwise_2d.CASES,
        ),
        OpContract(
            "colwise_3d_scale_and_cast",
            ("E", "K", "N"),
            ops.colwise_3d_scale_and_cast,
            reduce_dim=1,
            scale_count=lambda s, g: s[0] * s[2],
            element_map=_colwise_3d_map,
            example_shape=(4, 256, 128),
            test_shapes=((1, 1, 1), (2, 7, 100), (3, 33, 17)),
            bench=lambda m, k, n, e: ((e, k, n), 1),
            cases=cases_colwise_3d.CASES,
            # (E, K, N) col-major is how expert weights B_t arrive (SPEC §5); row-major is accepted too.
            input_layouts=("col_major", "row_major"),
        ),
        OpContract(
            "rowwise_3d_transpose_rhs",
            ("E", "K", "N"),
            ops.rowwise_3d_transpose_rhs,
            reduce_dim=2,
            scale_count=lambda s, g: s[0] * s[1],
            element_map=_transpose_rhs_map,
            example_shape=(4, 256, 128),
            test_shapes=((1, 1, 1), (2, 7, 100), (3, 33, 17)),
            bench=lambda m, k, n, e: ((e, k, n), 1),
            cases=cases_transpose_rhs.CASES,
        ),
        OpContract(
            "per_group_rowwise_scales",
            ("M", "Ktot"),
            ops.per_group_rowwise_scales,
            reduce_dim=1,
            scale_count=lambda s, g: g * s[0],
            element_map=_per_group_rowwise_map,
            example_shape=(100, 1000),
            test_shapes=((1, 1), (7, 100), (16, 130)),
            # grad_out^T (N, M) for grad_B, jagged along the tokens.
            bench=lambda m, k, n, e: ((n, m), e),
            cases=cases_per_group_rowwise.CASES,
            jagged_dim=1,
        ),
        OpContract(
            "per_group_colwise_scales",
            ("Ktot", "N"),
            ops.per_group_colwise_scales,
            reduce_dim=0,
            scale_count=lambda s, g: g * s[1],
            element_map=_per_group_colwise_map,
            example_shape=(1000, 100),
            test_shapes=((1, 1), (100, 7), (130, 16)),
            bench=lambda m, k, n, e: ((m, k), e),
            cases=cases_per_group_colwise.CASES,
            jagged_dim=0,
        ),
        OpContract(
            "per_group_colwise_scales_dual",
            ("Ktot", "N1", "N2"),
            ops.per_group_colwise_scales_dual,
            reduce_dim=0,
            scale_count=lambda s, g: g * s[1],
            element_map=_per_group_colwise_map,
            example_shape=(1000, 100, 64),
            test_shapes=((1, 1, 1), (100, 7, 3), (130, 16, 9)),
            # grad_out (M, N) and A (M, K) for grad_B, one launch.
            bench=lambda m, k, n, e: ((m, n, k), e),
            cases=cases_per_group_colwise_dual.CASES,
            jagged_dim=0,
            n_inputs=2,
        ),
        OpContract(
            "grouped_mm",
            ("M", "K", "N", "E"),
            grouped_mm_path.grouped_mm,
            # K and N multiples of 16 (the GEMM's alignment); E experts, one token group each.
            example_shape=(64, 32, 48, 4),
            test_shapes=((64, 32, 48, 4), (48, 16, 16, 3)),
            bench=lambda m, k, n, e: ((m, k, n, e), e),
            kind="grouped_gemm",
            jagged_dim=0,
            input_layouts=("col_major", "row_major"),  # of B_t: col-major per expert is how weights arrive
            tolerance=grouped_mm_path.SQNR_VS_REFERENCE,
            fp8_dtypes=grouped_mm_path.GEMM_DTYPES,
            jagged_unit=grouped_mm_path.GROUP_MULTIPLE,
            value_kinds=("normal",),
            round_scales_options=(False,),
            group_dim=3,
        ),
    )
}

#: Op names in table order.
OP_NAMES: tuple[str, ...] = tuple(CONTRACTS)

#: The quantization ops (kind "quantize"): compared byte for byte through their element maps; their reference follows
#: the kernels' calling convention, so it can be compared with itself.
QUANTIZE_OPS: tuple[str, ...] = tuple(name for name, c in CONTRACTS.items() if c.kind == "quantize")


def all_cases() -> tuple[Case, ...]:
    """Every case-table row of every op, in table order."""
    return tuple(case for c in CONTRACTS.values() for case in c.cases)


def contract(name: str) -> OpContract:
    """The contract of op ``name``.

    Raises:
        KeyError: with the known names, when ``name`` is not one of the six ops.
    """
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {sorted(CONTRACTS)}") from None
