"""Input value distributions (SPEC §6). Every distribution is a pure function of (shape, dtype, generator).

Special values are placed per *slice* (a line along the op's amax dim), because what matters is what a slice holds:
one NaN poisons its scale, an all-zero slice gets the EPS scale, a near-power-of-two amax sits on a pow2 rounding
edge.
"""

from __future__ import annotations

import torch

from fp8ref.formats import fmt

__all__ = ["VALUE_KINDS", "make_values"]

#: "normal": N(0,1) times 2^u per slice, u in [-8, 8]. "outliers": normal plus ~1% of elements x 2^10, pushing the
#: rest of their slice into the fp8 subnormal range. "ties": every scaled element an exact midpoint between two fp8
#: codes (slice amax = fp8_max * 2^k, so the scale 2^-k is exact). "near_pow2": slice amax within 2 input ulps of
#: fp8_max * 2^k. "special": per slice one of NaN, +-inf, all-zero (mixed +-0), -0/subnormal inputs, near-pow2
#: amax, ties, or normal. "zeros": all +0.
VALUE_KINDS: tuple[str, ...] = ("normal", "outliers", "ties", "near_pow2", "special", "zeros")

_INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def _normal(lines: int, length: int, gen: torch.Generator) -> torch.Tensor:
    spread = torch.exp2(torch.randint(-8, 9, (lines, 1), generator=gen).to(torch.float32))
    return torch.randn(lines, length, generator=gen) * spread


def _max_exponent(dtype: torch.dtype, fp8_dtype: torch.dtype) -> int:
    """Largest k <= 4 with fp8_max * 2^k finite in ``dtype`` (f16 holds e5m2's 57344 only for k <= 0)."""
    k = 4
    while fmt(fp8_dtype).max * 2.0**k > torch.finfo(dtype).max / 2:
        k -= 1
    return k


def _ties(lines: int, length: int, dtype: torch.dtype, fp8_dtype: torch.dtype, gen: torch.Generator):
    f = fmt(fp8_dtype)
    grid = torch.unique(f.values[torch.isfinite(f.values) & (f.values >= 0)].to(torch.float32))  # ascending
    pick = torch.randint(0, len(grid) - 1, (lines, length), generator=gen)
    mid = (grid[pick] + grid[pick + 1]) / 2  # exact: one more mantissa bit than fp8 has, fits bf16/f16/f32
    sign = torch.where(torch.rand(lines, length, generator=gen) < 0.5, -1.0, 1.0)
    k = torch.randint(-4, _max_exponent(dtype, fp8_dtype) + 1, (lines, 1), generator=gen).to(torch.float32)
    x = sign * mid * torch.exp2(k)
    top = torch.randint(0, length, (lines,), generator=gen)
    x[torch.arange(lines), top] = f.max * torch.exp2(k[:, 0])
    return x


def _near_pow2(lines: int, length: int, dtype: torch.dtype, fp8_dtype: torch.dtype, gen: torch.Generator):
    f = fmt(fp8_dtype)
    k = torch.randint(-4, _max_exponent(dtype, fp8_dtype) + 1, (lines,), generator=gen).to(torch.float32)
    top = (f.max * torch.exp2(k)).to(dtype)
    steps = torch.randint(-2, 3, (lines,), generator=gen).to(_INT_VIEW[dtype])
    top = (top.view(_INT_VIEW[dtype]) + steps).view(dtype).to(torch.float32)  # +-2 ulps in the input dtype
    x = (torch.rand(lines, length, generator=gen) * 2 - 1) * top.view(lines, 1)
    x[torch.arange(lines), torch.randint(0, length, (lines,), generator=gen)] = top
    return x


def _special(lines: int, length: int, dtype: torch.dtype, fp8_dtype: torch.dtype, gen: torch.Generator):
    x = _normal(lines, length, gen)
    # Kinds 0-5 are special, 6-7 plain normal lines. Dealt as a shuffled cycle, not drawn independently: with 8 or
    # more lines every kind appears (independent draws missed NaN entirely in 34% of 8-line inputs).
    kind = (torch.arange(lines) % 8)[torch.randperm(lines, generator=gen)]
    pos = torch.randint(0, length, (lines,), generator=gen)
    rows = torch.arange(lines)
    sign = torch.where(torch.rand(lines, length, generator=gen) < 0.5, -1.0, 1.0)
    x[rows[kind == 0], pos[kind == 0]] = float("nan")
    x[rows[kind == 1], pos[kind == 1]] = torch.where(pos[kind == 1] % 2 == 0, float("inf"), float("-inf"))
    x[kind == 2] = 0.0 * sign[kind == 2]  # all-zero slice, +0 and -0 mixed
    tiny = torch.finfo(dtype).smallest_normal / 8  # a subnormal of the input dtype
    small = torch.rand(lines, length, generator=gen) < 0.5
    sub = (kind == 3).view(lines, 1) & small
    x[sub] = torch.where(torch.rand(lines, length, generator=gen)[sub] < 0.5, -0.0, tiny * sign[sub])
    x[kind == 4] = _near_pow2(int((kind == 4).sum()), length, dtype, fp8_dtype, gen)
    x[kind == 5] = _ties(int((kind == 5).sum()), length, dtype, fp8_dtype, gen)
    return x


def make_values(
    kind: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    fp8_dtype: torch.dtype,
    reduce_dim: int,
    gen: torch.Generator,
) -> torch.Tensor:
    """A CPU tensor of ``shape`` and ``dtype`` drawn from distribution ``kind`` (one of VALUE_KINDS).

    Args:
        kind: the distribution, one of VALUE_KINDS.
        shape: the tensor's shape (a zero-size shape gives an empty tensor).
        dtype: the input dtype the values are rounded to (bf16, f16 or f32).
        fp8_dtype: the target format (ties and near-pow2 amax are defined relative to its grid and max).
        reduce_dim: the dim the op takes amax over; special values are arranged per line along it.
        gen: the CPU generator every draw comes from: the same generator state gives the same tensor.

    Raises:
        ValueError: ``kind`` is not one of VALUE_KINDS (checked only when the shape is not empty).
    """
    length = shape[reduce_dim]
    moved = [*(s for i, s in enumerate(shape) if i != reduce_dim), length]
    lines = 1
    for s in moved[:-1]:
        lines *= s
    if lines == 0 or length == 0:
        return torch.zeros(shape, dtype=dtype)
    if kind == "normal":
        x = _normal(lines, length, gen)
    elif kind == "outliers":
        x = _normal(lines, length, gen)
        x = torch.where(torch.rand(lines, length, generator=gen) < 0.01, x * 1024, x)
    elif kind == "ties":
        x = _ties(lines, length, dtype, fp8_dtype, gen)
    elif kind == "near_pow2":
        x = _near_pow2(lines, length, dtype, fp8_dtype, gen)
    elif kind == "special":
        x = _special(lines, length, dtype, fp8_dtype, gen)
    elif kind == "zeros":
        x = torch.zeros(lines, length)
    else:
        raise ValueError(f"unknown values kind {kind!r}; known: {VALUE_KINDS}")
    return x.to(dtype).reshape(moved).movedim(-1, reduce_dim).contiguous()
