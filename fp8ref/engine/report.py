"""The result of one comparison: counts, explained mismatches, per-group SQNR, a heatmap and a repro snippet."""

from __future__ import annotations

import html
import json
import math
from dataclasses import asdict, dataclass, field

from fp8ref.engine.categories import CATEGORY_HELP, DERIVED
from fp8ref.formats import dtype_id

__all__ = ["Call", "Heatmap", "Mismatch", "Report", "jsonable"]


@dataclass(frozen=True)
class Call:
    """Everything needed to replay one comparison.

    Attributes:
        op: the op contract the kernel follows.
        kernel: a readable label of the kernel.
        kernel_expr: a Python expression that evaluates to the kernel (an op name or "module:attr" string that
            compare resolves, a mutant constructor, the name of an inlined function), or None when there is none.
        kernel_import: the code ``kernel_expr`` needs ("" when none): import statements, or the kernel's own
            source with its imports when it lives in ``__main__``, a notebook or a module not installed
            (fp8ref.engine.source); when that source cannot be retrieved, it says so.
        dtype, fp8_dtype: torch attribute names ("bfloat16", "float8_e4m3fn").
        offs: the resolved end offsets (jagged ops), whatever layout produced them.
        prelude: end offsets of earlier calls on the same shape and kernel object (``compare_sequence``).
        member: the battery member label of this call (fp8ref.engine.battery.member_label).
    """

    op: str
    kernel: str
    kernel_expr: str | None
    kernel_import: str
    shape: tuple[int, ...]
    offs: tuple[int, ...] | None
    dtype: str
    fp8_dtype: str
    round_scales_to_power_of_2: bool
    values: str
    layout: str
    seed: int
    device: str
    strict_nan: bool
    kernel_kwargs: dict = field(default_factory=dict)
    prelude: tuple[tuple[int, ...], ...] = ()
    member: str = ""

    @property
    def groups(self) -> int | None:
        """The group count (one per end offset); None for ops without offs."""
        return None if self.offs is None else len(self.offs)

    def label(self) -> str:
        """A short name of the call, e.g. ``per_group_rowwise_scales-1024x512-G4-bf16-e4m3fn-pow2``.

        Op, shape, group count (jagged ops), input and fp8 dtypes, and ``pow2`` when scales are rounded to powers
        of two.
        """
        dims = "x".join(str(s) for s in self.shape)
        parts = [self.op, dims]
        if self.offs is not None:
            parts.append(f"G{len(self.offs)}")
        parts += [dtype_id(self.dtype), dtype_id(self.fp8_dtype)]
        if self.round_scales_to_power_of_2:
            parts.append("pow2")
        return "-".join(parts)


@dataclass(frozen=True)
class Mismatch:
    """One differing fp8 byte or scale word.

    Attributes:
        kind: "fp8" or "scale".
        output: which (q, scales) pair (1 for the second tensor of the dual op).
        group, row, col: coordinates in the input (see fp8ref.contracts); None for the reduced dim of a scale.
        input: the input value (fp8 mismatches).
        expected, actual: the raw code (fp8) or f32 bit pattern (scale), as unsigned ints.
        expected_value, actual_value: what they decode to.
        distance: code distance in value order (fp8; None for NaN vs number) or f32 ulps (scale).
        category: see fp8ref.engine.categories.CATEGORIES.
        fails: whether the report's policy fails this category.
    """

    kind: str
    output: int
    group: int
    row: int | None
    col: int | None
    input: float | None
    expected: int
    actual: int
    expected_value: float
    actual_value: float
    distance: int | None
    category: str
    fails: bool
    member: str = ""

    def __str__(self) -> str:
        width = 2 if self.kind == "fp8" else 8
        where = f"out{self.output} g{self.group} r{_dash(self.row)} c{_dash(self.col)}"
        x = "" if self.input is None else f" x={self.input:.9g}"
        dist = "" if self.distance is None else f" d={self.distance:+d}"
        flag = "" if self.fails else " (tolerated)"
        return ("" if not self.member else f"[{self.member}] ") + (
            f"{self.kind:5s} {where}{x}: expected 0x{self.expected:0{width}X} ({self.expected_value:.9g}) "
            f"actual 0x{self.actual:0{width}X} ({self.actual_value:.9g}){dist} [{self.category}]{flag}"
        )


def _dash(v: int | None) -> str:
    return "-" if v is None else str(v)


@dataclass(frozen=True)
class Heatmap:
    """Mismatch counts of one output over the input's (rows, cols) plane, binned to at most 48 x 48 cells.

    Attributes:
        rows, cols: the plane's size (3-D inputs fold E into rows).
        row_edges, col_edges: bin starts along each axis.
        counts: counts[i][j] mismatching fp8 bytes in bin (i, j).
        boundaries: ("row" | "col", index) of group starts along the jagged dim or the expert dim.
    """

    rows: int
    cols: int
    row_edges: tuple[int, ...]
    col_edges: tuple[int, ...]
    counts: tuple[tuple[int, ...], ...]
    boundaries: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Report:
    """Outcome of ``fp8ref.compare``. ``bool(report)`` is ``report.ok``.

    Attributes:
        call: the replayable call.
        ok: no failing category occurred, no structural difference, no kernel error.
        error: the kernel's exception text ("ZeroDivisionError: division by zero"), if it raised.
        traceback: the kernel's traceback, if it raised (from the first frame outside the engine).
        structure: what the call did wrong besides its values, readable: shapes, strides, dtypes, output count or
            type, devices, outputs sharing memory with inputs, writes into inputs.
        problems: the same as (category, text) pairs, the kernel's exception included.
        explained: whole-output explanations that held (fp8ref.engine.hypotheses), e.g. a group boundary moved by
            one that reproduces every byte.
        n_fp8, n_fp8_mismatches: compared fp8 bytes and how many differ (any category).
        n_scales, n_scale_mismatches: compared scale words and how many differ.
        categories: mismatch count per category (fp8 bytes and scale words together).
        failing: the categories that failed under the policy, root causes first.
        mismatches: the first mismatches (scale words first: they explain data mismatches).
        sqnr_kernel, sqnr_reference: per output, per group: SQNR in dB of the dequantized output against the input
            in float64 (NaN for empty groups).
        heatmaps: one per output.
        members: when compare ran its battery (fp8ref.engine.battery): every member's own Report, in run order; the
            fields above are then merged (counts summed, texts and examples prefixed with the member label) and
            ``call`` is the first failing member's.
        notes: what the battery added and why (e.g. edge shapes derived from a too regular shape).
        sqnr_table: ops judged by SQNR (fp8ref.engine.gemm): (output, against what, per-group SQNR in dB) rows.
    """

    call: Call
    ok: bool
    error: str | None = None
    traceback: str | None = None
    structure: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()
    explained: tuple[str, ...] = ()
    n_fp8: int = 0
    n_fp8_mismatches: int = 0
    n_scales: int = 0
    n_scale_mismatches: int = 0
    categories: dict[str, int] = field(default_factory=dict)
    failing: tuple[str, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    sqnr_kernel: tuple[tuple[float, ...], ...] = ()
    sqnr_reference: tuple[tuple[float, ...], ...] = ()
    heatmaps: tuple[Heatmap, ...] = ()
    members: tuple[Report, ...] = ()
    notes: tuple[str, ...] = ()
    sqnr_table: tuple[tuple[str, str, tuple[float, ...]], ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def top_categories(self, n: int = 3) -> tuple[str, ...]:
        """The ``n`` most frequent failing root causes (derived categories only when nothing else failed)."""
        roots = [c for c in self.failing if c not in DERIVED] or list(self.failing)
        return tuple(sorted(roots, key=lambda c: -self.categories[c])[:n])

    def examples(self, category: str, n: int = 4) -> list[str]:
        """Up to ``n`` readable examples of ``category``: the problem texts of a structural category, else the
        listed mismatches of that category."""
        texts = [text for cat, text in self.problems if cat == category]
        texts += [str(m) for m in self.mismatches if m.category == category]
        return texts[:n]

    def __repr__(self) -> str:
        c = self.call
        head = f"Report({'OK' if self.ok else 'FAIL'} {c.label()} kernel={c.kernel} seed={c.seed} device={c.device}"
        lines = [head + (f" offs={list(c.offs)}" if c.offs is not None else "") + ")"]
        if self.members:
            failed = [m.call.member for m in self.members if not m.ok]
            replay = " (repro() replays the first)" if failed else ""
            lines.append(f"  battery: {len(self.members)} calls, {len(failed)} failing{replay}")
            lines += [f"    FAIL {label}" for label in failed]
        lines += [f"  note: {n}" for n in self.notes]
        if self.error:
            lines.append(f"  kernel raised: {self.error}")
            if self.traceback:
                lines += [f"    {line}" for line in self.traceback.rstrip().splitlines()]
        lines += [f"  structure: {s}" for s in self.structure]
        lines += [f"  explained: {e}" for e in self.explained]
        lines.append(
            f"  fp8 bytes: {self.n_fp8_mismatches}/{self.n_fp8} differ; scale words: "
            f"{self.n_scale_mismatches}/{self.n_scales} differ"
        )
        for name, count in sorted(self.categories.items(), key=lambda kv: -kv[1]):
            mark = "FAIL" if name in self.failing else "ok  "
            lines.append(f"  {mark} {name:28s} {count:7d}  {CATEGORY_HELP[name]}")
        lines += [f"  {m}" for m in self.mismatches]
        for i, (k, r) in enumerate(zip(self.sqnr_kernel, self.sqnr_reference)):
            lines.append(f"  out{i} SQNR dB per group, kernel: {_fmt_db(k)}; reference: {_fmt_db(r)}")
        for output, versus, per_group in self.sqnr_table:
            lines.append(f"  {output} SQNR dB per group, {versus}: {_fmt_db(per_group)}")
        return "\n".join(lines)

    __str__ = __repr__

    def to_dict(self) -> dict:
        """JSON-serialisable form (non-finite floats become strings "nan", "inf", "-inf")."""
        return jsonable(asdict(self))

    def to_json(self) -> str:
        """``to_dict`` as JSON text, indented by one space."""
        return json.dumps(self.to_dict(), indent=1)

    def repro(self) -> str:
        """A self-contained Python snippet that replays this comparison in a fresh interpreter, in any directory.

        It prints the new report, then raises AssertionError naming the failing categories unless the comparison
        passes: run as a script, exit status 1 means "still failing", 0 "fixed". Its first lines record the verdict
        seen here (and the kernel's traceback, when it raised). A kernel that is not importable from an installed
        package has its source inlined (fp8ref.engine.source); what could not be rebuilt is said in the snippet.
        """
        c = self.call
        verdict = "OK" if self.ok else "FAIL: " + ", ".join(self.failing or ("kernel_raised",))
        lines = [f"# fp8ref repro of {c.label()} (kernel {c.kernel}); recorded verdict: {verdict}"]
        if self.traceback:
            lines += ["# The kernel raised:", *(f"#   {line}" for line in self.traceback.rstrip().splitlines())]
        lines += ["import torch", "", "import fp8ref", ""]
        if c.kernel_import:
            lines += [c.kernel_import, "", ""]
        if c.kernel_expr is None:
            lines.append(f"kernel = None  # NOT REPRODUCED: {c.kernel} could not be named or inlined; define it here")
        else:
            lines.append(f"kernel = {c.kernel_expr}")
        kernel = "kernel"
        kwargs = "".join(f", {k}={v!r}" for k, v in c.kernel_kwargs.items())
        common = (
            f"like={c.op!r}, dtype=torch.{c.dtype}, fp8_dtype=torch.{c.fp8_dtype}, "
            f"round_scales_to_power_of_2={c.round_scales_to_power_of_2}, values={c.values!r}, layout={c.layout!r}, "
            f"seed={c.seed}, device={c.device!r}, strict_nan={c.strict_nan}{kwargs}"
        )
        if c.prelude:
            lines += [
                "# Earlier calls on the same shape: the failure needs the kernel's state after them.",
                f"for offs in {[list(p) for p in c.prelude]!r}:",
                f"    fp8ref.compare({kernel}, {c.shape!r}, offs=offs, {common})",
            ]
        offs = "" if c.offs is None else f"offs={list(c.offs)!r}, "
        lines += [
            f"report = fp8ref.compare({kernel}, {c.shape!r}, {offs}{common})",
            "print(report)",
            "if not report.ok:",
            '    raise AssertionError("fp8ref.compare: FAIL: " + ", ".join(report.failing))',
            "",
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        c = self.call
        status = "OK" if self.ok else "FAIL"
        color = "#1a7f37" if self.ok else "#cf222e"
        parts = [
            f"<div><b style='color:{color}'>{status}</b> <code>{html.escape(c.label())}</code> "
            f"kernel <code>{html.escape(c.kernel)}</code> seed {c.seed}</div>",
            f"<div>fp8 bytes {self.n_fp8_mismatches}/{self.n_fp8} differ; scale words "
            f"{self.n_scale_mismatches}/{self.n_scales} differ</div>",
        ]
        if self.members:  # a battery: each member's verdict, then what the battery added
            rows = "".join(
                f"<tr><td>{'ok' if m.ok else 'FAIL'}</td><td><code>{html.escape(m.call.member)}</code></td></tr>"
                for m in self.members
            )
            parts.append(f"<table>{rows}</table>")
        parts += [f"<div>note: {html.escape(n)}</div>" for n in self.notes]
        if self.error:
            parts.append(f"<pre>{html.escape(self.traceback or self.error)}</pre>")
        if self.structure or self.explained:
            items = [*self.structure, *self.explained]
            parts.append("<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in items) + "</ul>")
        if self.categories:
            rows = "".join(
                f"<tr><td>{'FAIL' if k in self.failing else 'ok'}</td><td>{k}</td><td>{v}</td>"
                f"<td>{html.escape(CATEGORY_HELP[k])}</td></tr>"
                for k, v in sorted(self.categories.items(), key=lambda kv: -kv[1])
            )
            parts.append(f"<table>{rows}</table>")
        if self.sqnr_table:
            rows = "".join(
                f"<tr><td>{html.escape(o)}</td><td>{html.escape(v)}</td><td>{html.escape(_fmt_db(g))}</td></tr>"
                for o, v, g in self.sqnr_table
            )
            parts.append(f"<table><tr><th>output</th><th>SQNR</th><th>dB per group</th></tr>{rows}</table>")
        if self.n_fp8_mismatches or self.n_scale_mismatches:  # a passing report's heatmap is all zeros
            parts += [_heatmap_html(i, h) for i, h in enumerate(self.heatmaps)]
        if self.mismatches:
            parts.append("<pre>" + html.escape("\n".join(str(m) for m in self.mismatches)) + "</pre>")
        return "<div style='font-family:monospace'>" + "".join(parts) + "</div>"


def _fmt_db(values: tuple[float, ...]) -> str:
    return "[" + ", ".join("-" if math.isnan(v) else f"{v:.1f}" for v in values) + "]"


def jsonable(obj):
    """JSON has no NaN/inf: such floats are written as strings ("nan", "inf"); dict keys become strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj


def _heatmap_html(index: int, h: Heatmap) -> str:
    """A CSS grid: one cell per bin, red intensity by mismatch count, thick borders at group starts."""
    peak = max((max(r) for r in h.counts if r), default=0)
    row_starts = {i for kind, i in h.boundaries if kind == "row"}
    col_starts = {i for kind, i in h.boundaries if kind == "col"}
    cells = []
    for i, row in enumerate(h.counts):
        for j, count in enumerate(row):
            alpha = 0.0 if peak == 0 else 0.15 + 0.85 * count / peak if count else 0.0
            top = "2px solid #000" if _starts_in(h.row_edges, i, row_starts) else "1px solid #eee"
            left = "2px solid #000" if _starts_in(h.col_edges, j, col_starts) else "1px solid #eee"
            cells.append(
                f"<div title='rows {h.row_edges[i]}.., cols {h.col_edges[j]}..: {count}' "
                f"style='background:rgba(207,34,46,{alpha:.2f});border-top:{top};border-left:{left}'></div>"
            )
    ncols = len(h.col_edges)
    return (
        f"<div>out{index}: {h.rows} x {h.cols} (rows x cols), mismatches per bin, group starts in bold</div>"
        f"<div style='display:grid;grid-template-columns:repeat({ncols},10px);grid-auto-rows:10px;"
        f"width:max-content;border:1px solid #888'>" + "".join(cells) + "</div>"
    )


def _starts_in(edges: tuple[int, ...], i: int, starts: set[int]) -> bool:
    hi = edges[i + 1] if i + 1 < len(edges) else math.inf
    return any(edges[i] <= s < hi for s in starts) and i > 0
