"""Deliberately broken kernels: the engine's self-test. Each must be flagged, with the category it is annotated with.

Every mutant is a small pure-PyTorch kernel following one op contract, carrying one bug seen in (or easy to make in)
real Triton kernels. They allocate outputs with ``torch.empty`` like real wrappers do, so output poisoning applies,
and read offsets on the host (allowed here: they are test doubles, not kernel paths).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp8ref import ops
from fp8ref.formats import fmt
from fp8ref.scaling import EPS, amax_to_scale, round_scale_to_power_of_2, to_fp8_saturated

__all__ = ["MUTANTS", "Mutant", "mutant"]

_BLOCK = 16  # the column tile the tiled mutants pretend to use


@dataclass(frozen=True)
class Mutant:
    """A broken kernel and what the engine must say about it.

    Attributes:
        name: registry key.
        op: the op contract it follows.
        category: the category the engine must put among the report's top categories.
        why: the bug, in kernel terms.
        make: returns a fresh kernel (a new object per call, so stateful mutants start empty).
        needs_sequence: the bug shows only when one kernel object is called on one shape with several group counts.
    """

    name: str
    op: str
    category: str
    why: str
    make: Callable[[], Callable]
    needs_sequence: bool = False


def _empty_like_ref(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


# --- rowwise_2d_scale_and_cast mutants -------------------------------------------------------------------------


def _wrong_tail_mask(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    out = _empty_like_ref(q)
    full = (x.shape[1] // _BLOCK) * _BLOCK  # store mask `cols < K // BLOCK * BLOCK`: the partial tile is dropped
    out[:, :full] = q[:, :full]
    return out, s


def _approx_division(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    amax = x.abs().to(torch.float32).amax(dim=1, keepdim=True).clamp(min=EPS)
    scale = fmt(fp8_dtype).max * (1.0 / amax)  # f32 reciprocal, then f32 multiply: two roundings
    if round_scales_to_power_of_2:
        scale = round_scale_to_power_of_2(scale)
    return to_fp8_saturated(x.to(torch.float32) * scale, fp8_dtype).contiguous(), scale


def _round_half_away(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    _, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    f = fmt(fp8_dtype)
    y = torch.clamp(x.to(torch.float32) * s, -f.max, f.max)
    up = torch.nextafter(y, torch.full_like(y, float("inf"))).to(fp8_dtype)
    down = torch.nextafter(y, torch.full_like(y, float("-inf"))).to(fp8_dtype)
    exact = y.to(fp8_dtype).to(torch.float32) == y
    tie = ~exact & (up.view(torch.uint8) != down.view(torch.uint8))  # y is the midpoint of two codes
    away = torch.where(y > 0, up.view(torch.uint8), down.view(torch.uint8))
    q = torch.where(tie, away, y.to(fp8_dtype).view(torch.uint8)).view(fp8_dtype)
    return q.contiguous(), s


def _overlapping_stores(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    out = _empty_like_ref(q)
    k = x.shape[1]
    for t in range((k + _BLOCK - 1) // _BLOCK):
        # Tile t>0 stored from column 16t-1 instead of 16t: it overwrites the previous tile's last column.
        start, width = _BLOCK * t - (1 if t else 0), min(_BLOCK, k - _BLOCK * t)
        out[:, start : start + width] = q[:, _BLOCK * t : _BLOCK * t + width]
    return out, s


# --- jagged mutants ------------------------------------------------------------------------------------------------


def _wrong_group_start(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    m, _ = x.shape
    ends = offs.tolist()
    q = torch.empty(x.shape, dtype=fp8_dtype, device=x.device)
    s = torch.empty(len(ends) * m, dtype=torch.float32, device=x.device)
    start = 0
    for g, end in enumerate(ends):
        lo = max(start - 1, 0) if g else 0  # `offs[g-1] - 1`: each group also claims its left neighbour's last column
        part = x[:, lo:end].to(torch.float32)
        scale = amax_to_scale(
            part.abs().amax(dim=1) if end > lo else torch.zeros(m, device=x.device),
            fp8_dtype,
            round_scales_to_power_of_2,
        )
        s[g * m : (g + 1) * m] = scale
        q[:, lo:end] = to_fp8_saturated(part * scale.view(m, 1), fp8_dtype)
        start = end
    return q, s


def _colwise_groups(x, offs, fp8_dtype, pow2, *, amax_fn, groups=None, max_rows=None):
    """Per-group colwise scale+cast written as a loop over groups, with hooks for the bugs below."""
    ktot, n = x.shape
    ends = offs.tolist()
    q = torch.empty_strided((ktot, n), (1, ktot), dtype=fp8_dtype, device=x.device)
    s = torch.empty(len(ends) * n, dtype=torch.float32, device=x.device)
    start = 0
    for g, end in enumerate(ends[: groups if groups is not None else len(ends)]):
        part = x[start:end].to(torch.float32)
        reduced = part if max_rows is None else part[:max_rows]
        amax = amax_fn(reduced) if reduced.shape[0] else torch.zeros(n, device=x.device)
        scale = amax_to_scale(amax, fp8_dtype, pow2)
        s[g * n : (g + 1) * n] = scale
        q[start:end] = to_fp8_saturated(part * scale.view(1, n), fp8_dtype)
        start = end
    return q, s


def _nan_ignoring_amax(part: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(part), 0.0, part.abs()).amax(dim=0)  # like tl.maximum: NaN silently dropped


def _nan_dropped(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    return _colwise_groups(x, offs, fp8_dtype, round_scales_to_power_of_2, amax_fn=_nan_ignoring_amax)


def _truncated_groups(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    # One 64-row tile per group for the amax (the loop over further tiles is missing); every row is stored.
    return _colwise_groups(
        x, offs, fp8_dtype, round_scales_to_power_of_2, amax_fn=lambda p: p.abs().amax(dim=0), max_rows=64
    )


class _ShapeCachedGrid:
    """Caches the launch grid (the group count) per input shape: a later call with more groups skips the rest."""

    op = "per_group_colwise_scales"

    def __init__(self) -> None:
        self.grid: dict[tuple[int, ...], int] = {}

    def __call__(self, x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        groups = self.grid.setdefault(tuple(x.shape), offs.numel())
        return _colwise_groups(
            x, offs, fp8_dtype, round_scales_to_power_of_2, amax_fn=lambda p: p.abs().amax(dim=0), groups=groups
        )


def _flush_subnormals(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    tiny = q.to(torch.float32).abs() < fmt(fp8_dtype).min_normal
    return torch.where(tiny, torch.zeros_like(q.view(torch.uint8)), q.view(torch.uint8)).view(fp8_dtype), s


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "wrong_tail_mask",
            "rowwise_2d_scale_and_cast",
            "unwritten",
            "store mask drops the partial last tile when K is not a multiple of 16",
            lambda: _wrong_tail_mask,
        ),
        Mutant(
            "wrong_group_start",
            "per_group_rowwise_scales",
            "wrong_group_boundary",
            "group g starts at offs[g-1] - 1 and overwrites its neighbour's last column",
            lambda: _wrong_group_start,
        ),
        Mutant(
            "approx_division",
            "rowwise_2d_scale_and_cast",
            "scale_mismatch",
            "scale = fp8_max * (1 / amax) in f32, like Triton's approximate `/` (SPEC §4)",
            lambda: _approx_division,
        ),
        Mutant(
            "nan_dropped",
            "per_group_colwise_scales",
            "nan_vs_number",
            "amax with a NaN-ignoring max: a NaN slice gets a finite scale and numbers",
            lambda: _nan_dropped,
        ),
        Mutant(
            "round_half_away",
            "rowwise_2d_scale_and_cast",
            "rne_tie_flipped",
            "cast rounds ties away from zero (the Triton interpreter's conversion, SPEC §3)",
            lambda: _round_half_away,
        ),
        Mutant(
            "overlapping_stores",
            "rowwise_2d_scale_and_cast",
            "layout_stride",
            "tile t>0 is stored one column early: tiles overlap, the last column is never written",
            lambda: _overlapping_stores,
        ),
        Mutant(
            "shape_cached_grid",
            "per_group_colwise_scales",
            "unwritten",
            "launch grid cached per shape: a later call with more groups leaves them unwritten",
            _ShapeCachedGrid,
            needs_sequence=True,
        ),
        Mutant(
            "truncated_groups",
            "per_group_colwise_scales",
            "scale_mismatch",
            "amax over the first 64 rows of each group only",
            lambda: _truncated_groups,
        ),
        Mutant(
            "flush_subnormals",
            "rowwise_2d_scale_and_cast",
            "flush_to_zero",
            "fp8 subnormal results flushed to +0",
            lambda: _flush_subnormals,
        ),
    )
}


def mutant(name: str) -> Callable:
    """A fresh instance of mutant ``name``, tagged with its op and a repro recipe."""
    m = MUTANTS[name]
    kernel = m.make()
    if not isinstance(kernel, _ShapeCachedGrid):
        kernel = _tagged(kernel)
    kernel.op = m.op
    kernel.fp8ref_repro = ("from fp8ref.engine.mutants import mutant", f"mutant({name!r})")
    return kernel


def _tagged(fn: Callable) -> Callable:
    def kernel(*args, **kwargs):
        return fn(*args, **kwargs)

    kernel.__qualname__ = kernel.__name__ = fn.__name__.lstrip("_")
    return kernel
