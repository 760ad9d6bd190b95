"""Op contracts: for each of the six ops of SPEC §5, how to build its arguments and where each output element lives.

A contract is what makes any callable comparable: ``compare(kernel, shape, like="per_group_rowwise_scales")`` needs
to know the argument order, which input is jagged along which dim, and, for every fp8 output element, which input
element it quantizes and which scale word it used. The engine works on that element map, never on op names.

Coordinates: every element is reported as (group, row, col) of the input it quantizes. ``row, col`` are the last
two input dims; ``group`` is the jagged group (per-group ops), the expert ``e`` (3-D ops) or 0 (2-D rowwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["CONTRACTS", "ElementMap", "OpContract", "contract", "group_ids"]


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
        return self.group >= 0


def group_ids(offs: Sequence[int], length: int) -> torch.Tensor:
    """(length,) int64: the group of each index along the jagged dim; -1 past ``offs[-1]``.

    Group g is [offs[g-1], offs[g]) with offs[-1] := 0 (SPEC §4); empty groups own no index.
    """
    ends = torch.tensor(list(offs), dtype=torch.int64)
    idx = torch.arange(length, dtype=torch.int64)
    g = torch.searchsorted(ends, idx, right=True)
    return torch.where(g < len(ends), g, torch.full_like(g, -1))


@dataclass(frozen=True)
class OpContract:
    """The calling convention and element geometry of one op.

    Attributes:
        name: the op name, identical in fp8ref.ops and fp8moe.ops.
        dims: names of the ``shape`` tuple ``compare`` takes, e.g. ("M", "K").
        jagged_dim: the input dim split by ``offs`` (None for ops without offs).
        reduce_dim: the input dim each amax reduces over (where "all-zero slice" and "outlier" values are placed).
        n_inputs: 1, or 2 for the dual op.
        input_layouts: layouts the op accepts, first the one it is usually fed.
    """

    name: str
    dims: tuple[str, ...]
    jagged_dim: int | None
    reduce_dim: int
    n_inputs: int = 1
    input_layouts: tuple[str, ...] = ("row_major", "col_major")

    @property
    def jagged(self) -> bool:
        return self.jagged_dim is not None

    def input_shapes(self, shape: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """Shapes of the inputs for a ``shape`` tuple: the dual op's (Ktot, N1, N2) gives (Ktot, N1), (Ktot, N2)."""
        if len(shape) != len(self.dims):
            raise ValueError(f"{self.name} takes a shape {self.dims}, got {tuple(shape)}")
        if self.n_inputs == 2:
            return (shape[0], shape[1]), (shape[0], shape[2])
        return (tuple(shape),)

    def jagged_length(self, shape: Sequence[int]) -> int:
        return self.input_shapes(shape)[0][self.jagged_dim]

    def call(self, kernel: Callable, xs: Sequence[torch.Tensor], offs: torch.Tensor | None, **kwargs):
        """Call ``kernel`` with this op's positional convention: ``(x[, x2][, offs], **kwargs)``."""
        args = list(xs) + ([offs] if self.jagged else [])
        return kernel(*args, **kwargs)

    def n_scales(self, shape: Sequence[int], groups: int) -> int:
        """Number of f32 scale words the op writes (all pairs together)."""
        total = 0
        for s in self.input_shapes(shape):
            total += _scale_count(self.name, s, groups)
        return total

    def element_maps(
        self, xs: Sequence[torch.Tensor], offs: Sequence[int] | None, outputs: Sequence[torch.Tensor]
    ) -> list[ElementMap]:
        """One ElementMap per (q, scales) pair of ``outputs`` (CPU tensors) for inputs ``xs``."""
        pairs = [(outputs[2 * i], outputs[2 * i + 1]) for i in range(len(outputs) // 2)]
        return [_element_map(self.name, x, q, offs) for x, (q, _) in zip(xs, pairs)]


def _scale_count(name: str, shape: tuple[int, ...], groups: int) -> int:
    if name == "rowwise_2d_scale_and_cast":
        return shape[0]
    if name == "colwise_3d_scale_and_cast":
        return shape[0] * shape[2]
    if name == "rowwise_3d_transpose_rhs":
        return shape[0] * shape[1]
    if name == "per_group_rowwise_scales":
        return groups * shape[0]
    return groups * shape[1]  # per_group_colwise_scales[_dual]: one scale per (group, column)


def _element_map(name: str, x: torch.Tensor, q: torch.Tensor, offs: Sequence[int] | None) -> ElementMap:
    if name == "rowwise_2d_scale_and_cast":
        m, k = x.shape
        idx = torch.arange(m).view(m, 1).expand(m, k)
        return ElementMap(x, q, idx, torch.zeros(m, k, dtype=torch.int64), None, lambda i: (0, i, None))
    if name == "colwise_3d_scale_and_cast":
        e, k, n = x.shape
        idx = (torch.arange(e).view(e, 1, 1) * n + torch.arange(n).view(1, 1, n)).expand(e, k, n)
        grp = torch.arange(e).view(e, 1, 1).expand(e, k, n)
        return ElementMap(x, q, idx, grp, None, lambda i: (i // n, None, i % n) if n else (0, None, 0))
    if name == "rowwise_3d_transpose_rhs":
        e, k, n = x.shape
        idx = (torch.arange(e).view(e, 1, 1) * k + torch.arange(k).view(1, k, 1)).expand(e, k, n)
        grp = torch.arange(e).view(e, 1, 1).expand(e, k, n)
        # q is (E, N, K); its transpose is in x's (E, K, N) coordinates.
        coords = lambda i: (i // k, i % k, None) if k else (0, 0, None)
        return ElementMap(x, q.transpose(-1, -2), idx, grp, None, coords)
    if name == "per_group_rowwise_scales":
        m, ktot = x.shape
        g = group_ids(offs, ktot).view(1, ktot).expand(m, ktot)
        idx = g.clamp(min=0) * m + torch.arange(m).view(m, 1)
        return ElementMap(x, q, idx, g, m, lambda i: (i // m, i % m, None) if m else (0, 0, None))
    ktot, n = x.shape  # per_group_colwise_scales and each half of the dual op
    g = group_ids(offs, ktot).view(ktot, 1).expand(ktot, n)
    idx = g.clamp(min=0) * n + torch.arange(n).view(1, n)
    return ElementMap(x, q, idx, g, n, lambda i: (i // n, None, i % n) if n else (0, None, 0))


CONTRACTS: dict[str, OpContract] = {
    c.name: c
    for c in (
        OpContract("rowwise_2d_scale_and_cast", ("M", "K"), None, reduce_dim=1),
        # (E, K, N) col-major is how expert weights B_t arrive (SPEC §5); row-major is accepted too.
        OpContract(
            "colwise_3d_scale_and_cast", ("E", "K", "N"), None, reduce_dim=1, input_layouts=("col_major", "row_major")
        ),
        OpContract("rowwise_3d_transpose_rhs", ("E", "K", "N"), None, reduce_dim=2),
        OpContract("per_group_rowwise_scales", ("M", "Ktot"), jagged_dim=1, reduce_dim=1),
        OpContract("per_group_colwise_scales", ("Ktot", "N"), jagged_dim=0, reduce_dim=0),
        OpContract("per_group_colwise_scales_dual", ("Ktot", "N1", "N2"), jagged_dim=0, reduce_dim=0, n_inputs=2),
    )
}


def contract(name: str) -> OpContract:
    """The contract of op ``name``.

    Raises:
        KeyError: with the known names, when ``name`` is not one of the six ops.
    """
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {sorted(CONTRACTS)}") from None
