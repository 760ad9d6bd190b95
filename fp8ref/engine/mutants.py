"""Deliberately broken kernels: the engine's self-test. Each must be flagged, with the category it is annotated with.

Every mutant is a small pure-PyTorch kernel following one op contract, carrying one bug seen in (or easy to make in)
real Triton kernels. They allocate outputs with ``torch.empty`` like real wrappers do, so output poisoning applies,
and read offsets on the host (allowed here: they are test doubles, not kernel paths).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp8ref import ops
from fp8ref.contracts import CONTRACTS, contract
from fp8ref.engine.battery import output_names
from fp8ref.formats import fmt
from fp8ref.scaling import EPS, amax_to_scale, round_scale_to_power_of_2, to_fp8_saturated

__all__ = ["MUTANTS", "OUTPUT_MUTANTS", "Mutant", "mutant"]

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
        formats: the fp8 formats the bug shows in (None: every format); a device storing none of them cannot show it.
    """

    name: str
    op: str
    category: str
    why: str
    make: Callable[[], Callable]
    needs_sequence: bool = False
    formats: tuple[torch.dtype, ...] | None = None


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


# --- realistic bugs of issue #10 -----------------------------------------------------------------------------------


def _codes_into(reference: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """A fresh output with ``reference``'s shape and strides holding ``codes`` (uint8, same logical shape)."""
    out = _empty_like_ref(reference)
    out.view(torch.uint8).copy_(codes)
    return out


def _nan_dropped_running_max(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    # Row amax over N in tiles of _BLOCK: each tile's max keeps NaN, but the running combine is a NaN-ignoring
    # maximum (like tl.maximum), so a NaN in any tile is lost.
    e, k, n = x.shape
    running = torch.zeros(e, k, device=x.device)
    for t in range(0, n, _BLOCK):
        running = torch.fmax(running, x[:, :, t : t + _BLOCK].abs().to(torch.float32).amax(dim=2))
    scale = amax_to_scale(running, fp8_dtype, round_scales_to_power_of_2)
    ref_q, _ = ops.rowwise_3d_transpose_rhs(x, fp8_dtype, round_scales_to_power_of_2)
    codes = to_fp8_saturated(x.to(torch.float32) * scale.view(e, k, 1), fp8_dtype).view(torch.uint8)
    return _codes_into(ref_q, codes.transpose(1, 2)), scale


def _atomic_input_stride(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False, **kwargs):
    # The store of the transposed output addresses it with the input's strides: right for a row-major input (the
    # output's bytes are a contiguous (E, K, N) tensor), scrambled for a column-major one.
    q, s = ops.rowwise_3d_transpose_rhs(x, fp8_dtype, round_scales_to_power_of_2)
    out = _empty_like_ref(q)
    out.as_strided(x.shape, x.stride(), out.storage_offset()).copy_(q.transpose(1, 2))
    return out, s


def _no_saturation_clamp(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    # The cast without the clamp to +-fp8_max, on a conversion that turns anything above the max into NaN (or inf
    # where the format has it) before rounding, as torch's eager cast did up to 2.11 (SPEC §3). The slice's amax
    # times a scale rounded up lands one f32 ulp above the max (448.00003 in e4m3fn) and overflows.
    q, s = ops.colwise_3d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    f = fmt(fp8_dtype)
    y = x.to(torch.float32) * s
    overflow = f.inf_codes[0] if f.inf_codes else f.canonical_nan
    sign = torch.where(torch.signbit(y) & torch.tensor(not f.fnuz), 0x80, 0).to(torch.uint8)
    codes = torch.where(torch.isfinite(y) & (y.abs() > f.max), overflow | sign, q.view(torch.uint8))
    return _codes_into(q, codes), s


def _fnuz_negative_zero(x1, x2, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    # A negative product that rounds to zero keeps its sign bit: 0x80, which in fnuz formats is NaN, not -0.
    outs = list(ops.per_group_colwise_scales_dual(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2))
    if fmt(fp8_dtype).fnuz:
        for i, x in ((0, x1), (2, x2)):
            q, s = outs[i], outs[i + 1]
            group = _row_groups(offs, x.shape[0], x.device)
            y = x.to(torch.float32) * s.view(-1, x.shape[1])[group.clamp(min=0)]
            codes = q.view(torch.uint8)
            negative_zero = (codes == 0) & torch.signbit(y) & (group >= 0).view(-1, 1)
            outs[i] = _codes_into(q, torch.where(negative_zero, torch.full_like(codes, 0x80), codes))
    return tuple(outs)


def _row_groups(offs: torch.Tensor, length: int, device) -> torch.Tensor:
    """(length,) group of each index along the jagged dim, -1 past offs[-1] (host-side: mutants are test doubles)."""
    g = torch.searchsorted(offs.to(torch.int64), torch.arange(length, device=device), right=True)
    return torch.where(g < offs.numel(), g, torch.full_like(g, -1))


def _jagged_rows(x_rows, offs, fp8_dtype, pow2, *, amax_end=None, store_end=None, scale_fn=None):
    """Per-group scale+cast of an (R, Ktot) view jagged along its columns, written as a loop over groups.

    Returns q (R, Ktot) and s (G * R,) with s[g * R + r]. Hooks: ``amax_end(g, end, ends, length)`` and
    ``store_end(...)`` move a group's end for the amax / the store; ``scale_fn(amax)`` replaces amax_to_scale.
    """
    r, length = x_rows.shape
    ends = offs.tolist()
    q = torch.zeros(r, length, dtype=torch.uint8, device=x_rows.device)
    s = torch.empty(len(ends) * r, dtype=torch.float32, device=x_rows.device)
    start = 0
    for g, end in enumerate(ends):
        a_end = amax_end(g, end, ends, length) if amax_end else end
        part = x_rows[:, start:a_end].to(torch.float32)
        amax = part.abs().amax(dim=1) if part.shape[1] else torch.zeros(r, device=x_rows.device)
        scale = scale_fn(amax) if scale_fn else amax_to_scale(amax, fp8_dtype, pow2)
        s[g * r : (g + 1) * r] = scale
        w_end = store_end(g, end, ends, length) if store_end else end
        q[:, start:w_end] = to_fp8_saturated(
            x_rows[:, start:w_end].to(torch.float32) * scale.view(r, 1), fp8_dtype
        ).view(torch.uint8)
        start = end
    return q, s


def _per_group_rowwise_mutant(hooks: Callable) -> Callable:
    """per_group_rowwise_scales through ``_jagged_rows`` with the hooks ``hooks(fp8_dtype, pow2)`` returns."""

    def kernel(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q_ref, _ = ops.per_group_rowwise_scales(x, offs, fp8_dtype, round_scales_to_power_of_2)
        codes, s = _jagged_rows(
            x, offs, fp8_dtype, round_scales_to_power_of_2, **hooks(fp8_dtype, round_scales_to_power_of_2)
        )
        return _codes_into(q_ref, codes), s

    return kernel


def _per_group_colwise_mutant(hooks: Callable) -> Callable:
    """per_group_colwise_scales through ``_jagged_rows`` on x.t(), hooks as in ``_per_group_rowwise_mutant``."""

    def kernel(x, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q_ref, _ = ops.per_group_colwise_scales(x, offs, fp8_dtype, round_scales_to_power_of_2)
        codes, s = _jagged_rows(
            x.t(), offs, fp8_dtype, round_scales_to_power_of_2, **hooks(fp8_dtype, round_scales_to_power_of_2)
        )
        return _codes_into(q_ref, codes.t()), s

    return kernel


def _pow2_off_by_one(fp8_dtype, pow2):
    # exp2(floor(log2 s)) - 1 binade: the "round down" applied twice (once by floor, once by a stray -1).
    def scale_fn(amax):
        s = amax_to_scale(amax, fp8_dtype, pow2)
        return s / 2 if pow2 else s

    return {"scale_fn": scale_fn}


def _inclusive_group_mask(fp8_dtype, pow2):
    # `cols <= end` instead of `cols < end` in the amax loop: each group's amax also sees the next group's first
    # element (or, for the last group, the first element past offs[-1]).
    return {"amax_end": lambda g, end, ends, length: min(end + 1, length)}


def _unclamped_tail(fp8_dtype, pow2):
    # The last group's end taken as the data's end instead of offs[-1]: the unspecified tail past offs[-1] enters
    # its amax (and its store, which nobody checks there).
    last = lambda g, end, ends, length: length if g == len(ends) - 1 else end
    return {"amax_end": last, "store_end": last}


def _dual_second_half_first_width(x1, x2, offs, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    # The second tensor's programs run with N1 (the first half's width) instead of N2: with N1 > N2 they store past
    # q2 and s2 (what crashed the Triton interpreter, issue #10); with N1 < N2 they leave columns unwritten. Its
    # scales land at s2[g * N1 + n]. Columns of x2 past N2 are read as zeros here (memory past the tensor).
    q1, s1, _, _ = ops.per_group_colwise_scales_dual(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2)
    ktot, n1 = x1.shape
    n2 = x2.shape[1]
    wide = torch.zeros(ktot, n1, dtype=x2.dtype, device=x2.device)
    wide[:, : min(n1, n2)] = x2[:, : min(n1, n2)]
    qw, sw = ops.per_group_colwise_scales(wide, offs, fp8_dtype, round_scales_to_power_of_2)
    q2 = torch.empty_strided((ktot, n2), (1, ktot), dtype=fp8_dtype, device=x2.device)
    s2 = torch.empty(offs.numel() * n2, dtype=torch.float32, device=x2.device)
    # Raw stores through the first half's geometry; outside q2's storage torch refuses them (a RuntimeError), inside
    # the engine's redzones they land in the redzone.
    q2.as_strided((ktot, n1), (1, ktot), q2.storage_offset()).copy_(qw)
    s2.as_strided(sw.shape, (1,), s2.storage_offset()).copy_(sw)
    return q1, s1, q2, s2


# --- one mutant per output: the engine must compare every output of every op ------------------------------------


def _corrupting(op: str, index: int) -> Callable:
    """A kernel returning the reference's outputs with output ``index`` corrupted: fp8 data with bit 0 of every
    code flipped (one code away), scales one f32 ulp up. Nothing else differs, so only that output's check sees it."""
    reference = contract(op).reference

    def kernel(*args, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False, **kwargs):
        outs = list(reference(*args, fp8_dtype, round_scales_to_power_of_2))
        t = outs[index]
        if index % 2 == 0:
            outs[index] = _codes_into(t, t.view(torch.uint8) ^ 1)
        else:
            bumped = torch.nextafter(t, torch.full_like(t, float("inf")))
            outs[index] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(bumped)
        return tuple(outs)

    kernel.__name__ = f"_{op}_output{index}_corrupted"
    return kernel


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
        Mutant(
            "nan_dropped_running_max",
            "rowwise_3d_transpose_rhs",
            "nan_vs_number",
            "row amax combined across tiles with a NaN-ignoring maximum: a NaN in any tile is lost",
            lambda: _nan_dropped_running_max,
        ),
        Mutant(
            "atomic_input_stride",
            "rowwise_3d_transpose_rhs",
            "layout_stride",
            "the transposed store addresses the output with the input's strides (wrong for column-major inputs)",
            lambda: _atomic_input_stride,
        ),
        Mutant(
            "no_saturation_clamp",
            "colwise_3d_scale_and_cast",
            "overflow_saturation_policy",
            "cast without the clamp to +-fp8_max on a conversion that overflows above the max before rounding",
            lambda: _no_saturation_clamp,
        ),
        Mutant(
            "fnuz_negative_zero",
            "per_group_colwise_scales_dual",
            "nan_vs_number",
            "a negative product rounding to zero is written 0x80, which is NaN in the fnuz formats",
            lambda: _fnuz_negative_zero,
            formats=(torch.float8_e4m3fnuz, torch.float8_e5m2fnuz),
        ),
        Mutant(
            "pow2_off_by_one",
            "per_group_rowwise_scales",
            "pow2_rounding_edge",
            "power-of-two scale one binade too small",
            lambda: _per_group_rowwise_mutant(_pow2_off_by_one),
        ),
        Mutant(
            "inclusive_group_mask",
            "per_group_colwise_scales",
            "wrong_group_boundary",
            "group mask `<= end` instead of `< end` in the amax loop: each amax sees one element of the next group",
            lambda: _per_group_colwise_mutant(_inclusive_group_mask),
        ),
        Mutant(
            "unclamped_tail",
            "per_group_rowwise_scales",
            "scale_mismatch",
            "the last group runs to the data's end instead of offs[-1]: the unspecified tail enters its amax",
            lambda: _per_group_rowwise_mutant(_unclamped_tail),
        ),
        Mutant(
            "dual_second_half_first_width",
            "per_group_colwise_scales_dual",
            "out_of_bounds_write",
            "the second tensor's programs run with the first tensor's width N1: stores past q2 and s2 when N1 > N2",
            lambda: _dual_second_half_first_width,
        ),
    )
}


def _output_mutants() -> tuple[Mutant, ...]:
    """One mutant per output of every op (issue #10: nothing failed when only the dual op's q2, s2 were wrong)."""
    found = []
    for op, c in CONTRACTS.items():
        if c.kind != "quantize":
            continue  # (q, scales) pairs only; a GEMM's result is judged by SQNR
        for i, name in enumerate(output_names(c)):
            data = i % 2 == 0
            found.append(
                Mutant(
                    f"{op}.{name}_corrupted",
                    op,
                    "genuine" if data else "scale_mismatch",
                    f"{name} corrupted ({'bit 0 of every code flipped' if data else 'every scale one ulp up'}), "
                    "every other output right",
                    functools.partial(_corrupting, op, i),
                )
            )
    return tuple(found)


#: The names of the per-output mutants, e.g. "per_group_colwise_scales_dual.s2_corrupted".
OUTPUT_MUTANTS: tuple[str, ...] = tuple(m.name for m in _output_mutants())
MUTANTS.update({m.name: m for m in _output_mutants()})


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
