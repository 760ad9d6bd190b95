"""Deterministic inputs: (seed, op, shape, groups, offs, dtype, fp8_dtype, values, layout) names one set of tensors.

Tensors are drawn from a CPU ``torch.Generator`` and only then moved to the device, so a CPU run, a GPU run and a
repro snippet all see the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fp8ref.contracts import OpContract
from fp8ref.engine.values import make_values
from fp8ref.layouts import make_offs, to_memory_layout, validate_offs

__all__ = ["Inputs", "derive_seed", "make_inputs"]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the ``repr`` of ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@dataclass(frozen=True)
class Inputs:
    """The arguments of one op call, on the CPU.

    Attributes:
        xs: the input tensor(s), in the requested memory layout.
        offs: the end offsets (jagged ops) or None.
    """

    xs: tuple[torch.Tensor, ...]
    offs: tuple[int, ...] | None

    def offs_tensor(self, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """The end offsets as the kernel receives them, an int32 tensor on ``device``; None for ops without offs.

        Args:
            device: where the tensor is made.
        """
        if self.offs is None:
            return None
        return torch.tensor(self.offs, dtype=torch.int32, device=device)


def make_inputs(
    contract: OpContract,
    shape: Sequence[int],
    *,
    groups: int,
    offs: str | Sequence[int] | None,
    dtype: torch.dtype,
    fp8_dtype: torch.dtype,
    values: str,
    layout: str,
    seed: int,
) -> Inputs:
    """Build the inputs of one call of ``contract``'s op (see ``fp8ref.compare`` for the arguments)."""
    shape = tuple(int(s) for s in shape)
    # Values and offsets come from separate generators, so replaying a named layout with its resolved explicit
    # offsets (as repro snippets do) gives the same input values.
    gen = torch.Generator().manual_seed(
        derive_seed(seed, contract.name, shape, str(dtype), str(fp8_dtype), values, layout)
    )
    offs_ends = None
    if contract.jagged:
        length = contract.jagged_length(shape)
        if offs is None or isinstance(offs, str):
            offs_gen = torch.Generator().manual_seed(derive_seed(seed, contract.name, shape, groups, offs))
            offs_ends = make_offs(offs or "uniform", length, groups, offs_gen)
        else:
            offs_ends = validate_offs(offs, length)
    elif offs is not None:
        raise ValueError(f"{contract.name} takes no offs, got {offs!r}")
    xs = tuple(
        to_memory_layout(make_values(values, s, dtype, fp8_dtype, contract.reduce_dim, gen), layout)
        for s in contract.input_shapes(shape)
    )
    return Inputs(xs, offs_ends)
