"""The case-table row type, the constants the tables are written with, and materialisation onto a device.

A :class:`Case` is frozen data: literal inputs and the expected output bits. The expectations in every table were
derived without :mod:`fp8ref.ops` (by hand from the format definitions of SPEC §2 and the rules of SPEC §4, checked
against an independent numpy + ml_dtypes computation), so running the tables through the reference can catch a
reference bug, and running them through a kernel needs nothing but the row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "BF16",
    "E4M3FN",
    "E4M3FNUZ",
    "E5M2",
    "E5M2FNUZ",
    "EPS_SCALE_E4M3FN",
    "EPS_SCALE_E4M3FNUZ",
    "EPS_SCALE_E4M3FNUZ_POW2",
    "EPS_SCALE_E4M3FN_POW2",
    "EPS_SCALE_E5M2",
    "EPS_SCALE_E5M2_POW2",
    "F16",
    "F32",
    "F32_NAN",
    "F32_ONE",
    "F32_ZERO",
    "INF",
    "NAN",
    "Case",
    "Input",
]

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
E4M3FN, E4M3FNUZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
E5M2, E5M2FNUZ = torch.float8_e5m2, torch.float8_e5m2fnuz
NAN, INF = math.nan, math.inf

# f32 bit patterns of the scales that recur across tables.
F32_ONE = 0x3F800000
F32_ZERO = 0x00000000  # the scale of a slice holding +-inf: fp8_max / inf
F32_NAN = 0x7FC00000  # NaN scales are compared as a class: any NaN pattern matches
# All-zero slice or empty group: amax 0 is clamped to 1e-12 and f64(fp8_max / 1e-12) is rounded once to f32.
EPS_SCALE_E4M3FN = 0x57CBBA10  # 447999985582080.0, the f32 nearest 4.48e14 (f32 spacing there is 2^25)
EPS_SCALE_E4M3FN_POW2 = 0x57800000  # 2^48: log2(447999985582080.0) = 48.67
EPS_SCALE_E4M3FNUZ = 0x575A475B  # 240000004259840.0
EPS_SCALE_E4M3FNUZ_POW2 = 0x57000000  # 2^47: log2(240000004259840.0) = 47.77
EPS_SCALE_E5M2 = 0x5B4BBA10  # 57343998154506240.0, e5m2 and e5m2fnuz (both max 57344 = 128 * 448)
EPS_SCALE_E5M2_POW2 = 0x5B000000  # 2^55: log2(5.7344e16) = 55.67


@dataclass(frozen=True)
class Input:
    """A literal input tensor.

    Attributes:
        shape: logical shape.
        dtype: bf16, f16 or f32; every value must be exactly representable in it (tests/test_case_tables.py checks).
        values: the elements in logical row-major order (``x.flatten()`` order), as Python floats.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    values: tuple[float, ...]

    def tensor(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """The values as a contiguous tensor of ``dtype`` on ``device`` (built on the CPU, then moved)."""
        return torch.tensor(self.values, dtype=torch.float64).to(self.dtype).reshape(self.shape).to(device)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One named edge case of one op, with the exact expected output.

    Attributes:
        name: unique within the op; a claim in snake case ("empty_group_middle").
        op: the op name of SPEC §5 (``fp8ref.ops.<op>``).
        x, x2: the input(s); ``x2`` only for the dual op.
        offs: the int32 end offsets, for the jagged ops.
        fp8_dtype, round_scales_to_power_of_2: the op's keyword arguments of the same names.
        q, q2: expected fp8 bytes in the output's logical index order (``q.flatten()`` of the returned tensor,
            whatever its strides). NaN is written as the canonical code (0x7F fn, 0x80 fnuz) and compared as a class.
        scales, scales2: expected f32 bit patterns of the scales in logical index order.
        why: the derivation of the expected values.
    """

    name: str
    op: str
    x: Input
    fp8_dtype: torch.dtype
    q: tuple[int, ...]
    scales: tuple[int, ...]
    why: str
    offs: tuple[int, ...] | None = None
    round_scales_to_power_of_2: bool = False
    x2: Input | None = None
    q2: tuple[int, ...] | None = None
    scales2: tuple[int, ...] | None = None

    @property
    def id(self) -> str:
        """A readable test id: ``<op>-<name>``."""
        return f"{self.op}-{self.name}"

    def args(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
        """The op's positional arguments on ``device``: ``(x[, x2][, offs])``."""
        tensors = [self.x.tensor(device)]
        if self.x2 is not None:
            tensors.append(self.x2.tensor(device))
        if self.offs is not None:
            tensors.append(torch.tensor(self.offs, dtype=torch.int32).to(device))
        return tuple(tensors)

    def kwargs(self) -> dict[str, object]:
        """The op's keyword arguments."""
        return {"fp8_dtype": self.fp8_dtype, "round_scales_to_power_of_2": self.round_scales_to_power_of_2}

    def expected(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """``((q, scales),)``, or ``((q, scales), (q2, scales2))`` for the dual op, matching the op's outputs."""
        if self.x2 is None:
            return ((self.q, self.scales),)
        return ((self.q, self.scales), (self.q2, self.scales2))
