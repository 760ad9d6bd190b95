"""Turn reference outputs and two poisoned kernel runs into a Report: structure, bytes, categories, SQNR, heatmap."""

from __future__ import annotations

from collections import Counter

import torch

from fp8ref.contracts import ElementMap, OpContract
from fp8ref.engine.categories import (
    CATEGORIES,
    STRUCTURAL,
    FailPolicy,
    classify_fp8,
    classify_scales,
    same_f32,
)
from fp8ref.engine.hypotheses import boundary_shift, division_explains
from fp8ref.engine.inputs import Inputs
from fp8ref.engine.kernel_call import Problem
from fp8ref.engine.poison import unwritten_mask
from fp8ref.engine.report import Call, Heatmap, Mismatch, Report
from fp8ref.formats import fmt
from fp8ref.metrics import code_distance, sqnr
from fp8ref.spec import Exact, Sqnr

__all__ = ["assess", "call_failed"]

_HEATMAP_BINS = 48
#: Categories an Sqnr tolerance still fails: they are not rounding differences.
_SQNR_FAILS = STRUCTURAL | {"unwritten", "nondeterministic", "nan_vs_number", "overflow_saturation_policy"}
#: Byte and scale categories a whole-pair hypothesis may replace: what they say is true of the one element, and the
#: hypothesis names the bug behind all of them. Tolerated and run-to-run categories are never replaced.
_BOUNDARY_OPEN = frozenset(
    {
        "unwritten",
        "overflow_saturation_policy",
        "nan_vs_number",
        "pow2_rounding_edge",
        "wrong_group_boundary",
        "scale_mismatch",
        "explained_by_scale",
        "rne_tie_flipped",
        "flush_to_zero",
        "layout_stride",
        "genuine",
    }
)
_DIVISION_OPEN = frozenset({"rne_tie_flipped", "flush_to_zero", "layout_stride", "genuine"})


def _structure(expected: tuple[torch.Tensor, ...], actual: tuple[torch.Tensor, ...]) -> list[Problem]:
    if len(expected) != len(actual):
        return [("wrong_return", f"kernel returned {len(actual)} tensors, the reference {len(expected)}")]
    diffs = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e.dtype != a.dtype:
            diffs.append(("shape_stride_dtype", f"output {i}: dtype {a.dtype}, expected {e.dtype}"))
        if e.shape != a.shape:
            diffs.append(("shape_stride_dtype", f"output {i}: shape {tuple(a.shape)}, expected {tuple(e.shape)}"))
        elif e.numel() > 0:
            # Strides of size-1 dims carry no meaning (torch picks them freely); compare the others.
            es = [s for s, n in zip(e.stride(), e.shape) if n > 1]
            as_ = [s for s, n in zip(a.stride(), a.shape) if n > 1]
            if es != as_:
                diffs.append(("shape_stride_dtype", f"output {i}: strides {a.stride()}, expected {e.stride()}"))
    return diffs


def _as_problem(p: str | Problem) -> Problem:
    return p if isinstance(p, tuple) else ("shape_stride_dtype", p)


def call_failed(call: Call, problems: list[Problem], traceback: str | None = None) -> Report:
    """The Report of a call whose outputs cannot be compared at all (it raised, or returned no readable tensors)."""
    counts = Counter(category for category, _ in problems)
    raised = [text for category, text in problems if category == "kernel_raised"]
    return Report(
        call,
        ok=False,
        error=raised[0] if raised else None,
        traceback=traceback,
        structure=tuple(text for category, text in problems if category != "kernel_raised"),
        problems=tuple(problems),
        categories=dict(counts),
        failing=tuple(sorted(counts, key=lambda k: -counts[k])),
    )


def _comparable(expected: torch.Tensor, actual: torch.Tensor) -> bool:
    return expected.dtype == actual.dtype and expected.shape == actual.shape


def _layout_candidates(ref_codes: torch.Tensor, coords: torch.Tensor, row_major: bool) -> torch.Tensor:
    """(n, 6) int16 reference codes at "other element" positions of each coordinate (-1 where out of range).

    Candidates: right/left/down/up neighbour, the transposed position, and the element the same storage offset
    holds under the other memory layout (row- vs column-major) of the (R, C) plane.
    """
    r_dim, c_dim = ref_codes.shape[-2], ref_codes.shape[-1]
    lead, i, j = coords[:, :-2], coords[:, -2], coords[:, -1]
    offset = i * c_dim + j if row_major else j * r_dim + i
    other = (offset % r_dim, offset // r_dim) if row_major else (offset // c_dim, offset % c_dim)
    positions = [(i, j + 1), (i, j - 1), (i + 1, j), (i - 1, j), (j, i), other]
    flat = ref_codes.to(torch.int16).reshape(-1, r_dim, c_dim)
    lead_index = torch.zeros_like(i)
    for d in range(lead.shape[1]):
        lead_index = lead_index * ref_codes.shape[d] + lead[:, d]
    columns = []
    for pi, pj in positions:
        ok = (pi >= 0) & (pi < r_dim) & (pj >= 0) & (pj < c_dim)
        codes = flat[lead_index, pi.clamp(0, max(r_dim - 1, 0)), pj.clamp(0, max(c_dim - 1, 0))]
        columns.append(torch.where(ok, codes, torch.full_like(codes, -1)))
    return torch.stack(columns, dim=1)


def _neighbours(em: ElementMap, index: torch.Tensor, n_groups: int, *tables: torch.Tensor) -> torch.Tensor:
    """(n, 2 * len(tables)) f32: each table's scale of the same row/col in group g-1 and g+1 (NaN where none)."""
    if em.group_stride is None:
        return torch.empty(index.numel(), 0)
    group = index // em.group_stride
    cols = []
    for delta in (-1, 1):
        ok = (group + delta >= 0) & (group + delta < n_groups)
        nidx = (index + delta * em.group_stride).clamp(0, max(n_groups * em.group_stride - 1, 0))
        for table in tables:
            cols.append(torch.where(ok, table[nidx], torch.full((index.numel(),), float("nan"))))
    return torch.stack(cols, dim=1)


def _heatmap(em: ElementMap, diff: torch.Tensor, offs: tuple[int, ...] | None, jagged_dim: int | None) -> Heatmap:
    c_dim = diff.shape[-1]
    plane = diff.reshape(-1, c_dim) if diff.numel() else diff.reshape(0, c_dim)
    r_dim = plane.shape[0]
    nr, nc = max(1, min(_HEATMAP_BINS, r_dim)), max(1, min(_HEATMAP_BINS, c_dim))
    ii, jj = plane.nonzero(as_tuple=True)
    bins = (ii * nr // max(r_dim, 1)) * nc + jj * nc // max(c_dim, 1)
    counts = torch.bincount(bins, minlength=nr * nc).reshape(nr, nc)
    boundaries: list[tuple[str, int]] = []
    if offs is not None:
        axis = "col" if jagged_dim == 1 else "row"
        boundaries = [(axis, o) for o in offs[:-1]]
    elif diff.dim() == 3:
        boundaries = [("row", e * diff.shape[1]) for e in range(1, diff.shape[0])]
    return Heatmap(
        rows=r_dim,
        cols=c_dim,
        row_edges=tuple(k * r_dim // nr for k in range(nr)),
        col_edges=tuple(k * c_dim // nc for k in range(nc)),
        counts=tuple(tuple(int(v) for v in row) for row in counts.tolist()),
        boundaries=tuple(boundaries),
    )


def _group_sqnr(em: ElementMap, q: torch.Tensor, scales: torch.Tensor, n_groups: int) -> tuple[float, ...]:
    deq = q.to(torch.float32) / scales[em.scale_index]
    out = []
    for g in range(n_groups):
        mask = em.group == g
        out.append(sqnr(em.x[mask], deq[mask]) if bool(mask.any()) else float("nan"))
    return tuple(out)


def _indices(names: frozenset[str]) -> torch.Tensor:
    return torch.tensor(sorted(CATEGORIES.index(n) for n in names))


def _whole_pair(
    c: OpContract,
    offs: tuple[int, ...] | None,
    x: torch.Tensor,
    actual_q: torch.Tensor,
    actual_scales: torch.Tensor,
    em: ElementMap,
    unwritten: torch.Tensor,
    s_cat: torch.Tensor,
    q_cat: torch.Tensor,
    fp8_dtype: torch.dtype,
    pow2: bool,
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Replace per-element categories by a bug that explains the whole pair (fp8ref.engine.hypotheses), if one does.

    Tried only when such categories are present, so a passing kernel pays nothing.
    """
    why = []
    boundary_open = _indices(_BOUNDARY_OPEN)
    s_open, q_open = torch.isin(s_cat, boundary_open), torch.isin(q_cat, boundary_open)
    if c.jagged and offs is not None and bool(s_open.any() or q_open.any()):
        shift = boundary_shift(
            x, c.jagged_dim, list(offs), actual_q, actual_scales, unwritten, em.valid, fp8_dtype, pow2
        )
        if shift is not None:
            boundary = CATEGORIES.index("wrong_group_boundary")
            s_cat = torch.where(s_open, boundary, s_cat)
            q_cat = torch.where(q_open, boundary, q_cat)
            why.append(f"wrong_group_boundary: recomputing with {shift} reproduces every scale word and byte")
    q_open = torch.isin(q_cat, _indices(_DIVISION_OPEN))
    if bool(q_open.any()):
        written = em.valid & ~unwritten
        if division_explains(x, actual_q, actual_scales[em.scale_index], written, fp8_dtype):
            q_cat = torch.where(q_open, CATEGORIES.index("scale_applied_by_division"), q_cat)
            why.append("scale_applied_by_division: x / (1/scale) with the kernel's scales reproduces every byte")
    return s_cat, q_cat, why


def assess(
    c: OpContract,
    inputs: Inputs,
    expected: tuple[torch.Tensor, ...],
    runs: list[tuple[torch.Tensor, ...]],
    call: Call,
    *,
    tolerance: Exact | Sqnr,
    check_determinism: bool,
    max_examples: int,
    side_effects: list[str | Problem] = (),
) -> Report:
    """Compare the kernel's first run with the reference, using the second run to find unwritten elements.

    ``side_effects``: what the runs did wrong besides their values (outputs on another device, inputs written), as
    (category, text) pairs (a bare text counts as shape_stride_dtype); each fails the report.
    """
    fp8_dtype = getattr(torch, call.fp8_dtype)
    f = fmt(fp8_dtype)
    strict_nan = call.strict_nan
    policy = FailPolicy.default(strict_nan)
    if isinstance(tolerance, Sqnr):
        policy = FailPolicy(_SQNR_FAILS)
    first, second = runs
    # Both runs are checked: a kernel whose second call returns another shape would otherwise skip every comparison.
    problems = _structure(expected, first)
    problems += [(k, f"second run: {d}") for k, d in _structure(expected, second) if (k, d) not in problems]
    problems += [_as_problem(p) for p in side_effects]
    structure = [text for _, text in problems]
    counts: Counter[str] = Counter(category for category, _ in problems)
    explained: list[str] = []
    mismatches: list[Mismatch] = []
    totals = {"n_fp8": 0, "n_fp8_mismatches": 0, "n_scales": 0, "n_scale_mismatches": 0}
    sqnr_k, sqnr_r, heatmaps = [], [], []
    n_pairs = len(expected) // 2 if len(expected) == len(first) == len(second) else 0
    n_groups_of = len(inputs.offs) if inputs.offs is not None else None
    for p in range(n_pairs):
        eq, es = expected[2 * p], expected[2 * p + 1]
        aq, as_ = first[2 * p], first[2 * p + 1]
        bq, bs = second[2 * p], second[2 * p + 1]
        if not (_comparable(eq, aq) and _comparable(es, as_) and _comparable(aq, bq) and _comparable(as_, bs)):
            continue
        x = inputs.xs[p]
        em = c.element_maps(inputs.xs, inputs.offs, expected)[p]
        ka = c.element_maps(inputs.xs, inputs.offs, first)[p].q
        kb = c.element_maps(inputs.xs, inputs.offs, second)[p].q
        e_s, a_s, b_s = es.reshape(-1), as_.reshape(-1), bs.reshape(-1)
        n_groups = n_groups_of if n_groups_of is not None else (x.shape[0] if x.dim() == 3 else 1)

        # Scale words.
        s_unwritten = unwritten_mask(a_s, b_s)
        s_diff = ~same_f32(e_s, a_s, strict_nan=True) | s_unwritten
        s_idx = s_diff.nonzero().flatten()
        s_cat = classify_scales(
            expected=e_s[s_idx],
            actual=a_s[s_idx],
            unwritten=s_unwritten[s_idx],
            neighbour_expected=_neighbours(em, s_idx, n_groups, e_s),
            round_scales_to_power_of_2=call.round_scales_to_power_of_2,
        )
        # fp8 bytes, in x's logical coordinates, over elements inside some group.
        e_b, a_b, b_b = em.q.view(torch.uint8), ka.view(torch.uint8), kb.view(torch.uint8)
        q_unwritten = unwritten_mask(ka, kb)
        diff = em.valid & ((e_b != a_b) | q_unwritten)
        coords = diff.nonzero()
        sel = tuple(coords.t())
        sidx = em.scale_index[sel]
        row_major = em.q.stride(-1) == 1
        q_cat = classify_fp8(
            x=x[sel],
            expected=e_b[sel],
            actual=a_b[sel],
            unwritten=q_unwritten[sel],
            ref_scale=e_s[sidx],
            kernel_scale=a_s[sidx],
            neighbour_scales=_neighbours(em, sidx, n_groups, a_s, e_s),
            layout_codes=_layout_candidates(e_b, coords, row_major) if coords.numel() else torch.empty(0, 6),
            fp8_dtype=fp8_dtype,
        )
        s_cat, q_cat, why = _whole_pair(
            c, inputs.offs, x, a_b, a_s, em, q_unwritten, s_cat, q_cat, fp8_dtype, call.round_scales_to_power_of_2
        )
        explained += [f"output {p}: {w}" for w in why]
        # Counted on tensors: a wholly wrong production-size output has ~1e8 mismatches, too many for Python ints.
        per_category = torch.bincount(torch.cat([s_cat, q_cat]), minlength=len(CATEGORIES))
        for k in per_category.nonzero().flatten().tolist():
            counts[CATEGORIES[k]] += int(per_category[k])
        if check_determinism:
            nondet = int((em.valid & (a_b != b_b) & ~q_unwritten).sum())
            nondet += int((~same_f32(a_s, b_s, strict_nan=True) & ~s_unwritten).sum())
            if nondet:
                counts["nondeterministic"] += nondet
        totals["n_fp8"] += int(em.valid.sum())
        totals["n_fp8_mismatches"] += int(diff.sum())
        totals["n_scales"] += e_s.numel()
        totals["n_scale_mismatches"] += int(s_diff.sum())

        # Examples only: at most 4 * max_examples per kind are ever gathered (the report keeps max_examples).
        for w, k in zip(s_idx[: 4 * max_examples].tolist(), s_cat[: 4 * max_examples].tolist()):
            g, r, col = em.scale_coords(w)
            ev, av = e_s[w].item(), a_s[w].item()
            eb, ab = e_s[w : w + 1].view(torch.int32).item() & 0xFFFFFFFF, a_s[w : w + 1].view(torch.int32).item()
            ab &= 0xFFFFFFFF
            dist = None if (ev != ev) or (av != av) else ab - eb  # f32 ulps when the signs agree
            name = CATEGORIES[k]
            mismatches.append(Mismatch("scale", p, g, r, col, None, eb, ab, ev, av, dist, name, policy.fails(name)))
        shown = coords[: 4 * max_examples]
        shown_sel = tuple(shown.t())
        e_shown, a_shown = e_b[shown_sel], a_b[shown_sel]
        dist_shown = code_distance(e_shown, a_shown, fp8_dtype)
        group_shown, x_shown = em.group[shown_sel], x[shown_sel]
        for n, k in enumerate(q_cat[: 4 * max_examples].tolist()):
            pos = shown[n].tolist()
            eb, ab = int(e_shown[n]), int(a_shown[n])
            d = int(dist_shown[n])
            name = CATEGORIES[k]
            mismatches.append(
                Mismatch(
                    "fp8",
                    p,
                    int(group_shown[n]),
                    pos[-2],
                    pos[-1],
                    float(x_shown[n]),
                    eb,
                    ab,
                    float(f.values[eb]),
                    float(f.values[ab]),
                    None if d == torch.iinfo(torch.int64).max else d,
                    name,
                    policy.fails(name),
                )
            )
        sqnr_k.append(_group_sqnr(em, ka, a_s, n_groups))
        sqnr_r.append(_group_sqnr(em, em.q, e_s, n_groups))
        heatmaps.append(_heatmap(em, diff, inputs.offs, c.jagged_dim))

    failing = tuple(sorted((k for k in counts if policy.fails(k)), key=lambda k: -counts[k]))
    sqnr_ok = True
    if isinstance(tolerance, Sqnr):
        sqnr_ok = all(v >= tolerance.min_db for pair in sqnr_k for v in pair if v == v)
    # Failing mismatches first, then scale words before bytes (a scale explains the bytes that use it).
    mismatches.sort(key=lambda m: (not m.fails, m.kind != "scale"))
    return Report(
        call,
        ok=not failing and not structure and sqnr_ok,
        structure=tuple(structure),
        problems=tuple(problems),
        explained=tuple(explained),
        categories=dict(counts),
        failing=failing,
        mismatches=tuple(mismatches[:max_examples]),
        sqnr_kernel=tuple(sqnr_k),
        sqnr_reference=tuple(sqnr_r),
        heatmaps=tuple(heatmaps),
        **totals,
    )
