"""The certificate: one JSON document (versioned schema, checked before writing) and its Markdown rendering."""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fp8ref.bringup.results import STATUSES, StepResult
from fp8ref.engine.report import jsonable

__all__ = [
    "SCHEMA_VERSION",
    "Certificate",
    "build_certificate",
    "overall_status",
    "render_markdown",
    "validate",
    "write",
]

SCHEMA_VERSION = 1

# Required keys and their JSON types, per object; a dict value is a nested object, a 1-list a list of that.
_STEP = {
    "step": str,
    "name": str,
    "status": str,
    "checked": int,
    "mismatches": int,
    "categories": dict,
    "duration_s": float,
    "note": str,
    "params": dict,
}
_SCHEMA = {
    "schema": str,
    "schema_version": int,
    "command": str,
    "options": dict,
    "fingerprint": {
        "python": str,
        "torch": str,
        "triton": str,
        "device": dict,
        "backend": dict,
        "interpreter": bool,
        "cast_profiles": dict,
    },
    "summary": {"status": str, "counts": dict, "duration_s": float},
    "steps": [_STEP],
}
_CATEGORY = {"count": int, "examples": list}


def _kernel_cast(be: dict) -> str:
    if be["exact_encode"]:
        return "exact integer encoder"
    if be.get("cast_saturates"):
        return "native saturating conversion, no clamp (requires profile `satfinite`)"
    return "native conversion after saturation"


def _check(doc, schema, where: str, errors: list[str]) -> None:
    if isinstance(schema, dict):
        if not isinstance(doc, dict):
            errors.append(f"{where}: expected an object, got {type(doc).__name__}")
            return
        for key, sub in schema.items():
            if key not in doc:
                errors.append(f"{where}.{key}: missing")
            else:
                _check(doc[key], sub, f"{where}.{key}", errors)
    elif isinstance(schema, list):
        if not isinstance(doc, list):
            errors.append(f"{where}: expected a list, got {type(doc).__name__}")
            return
        for i, item in enumerate(doc):
            _check(item, schema[0], f"{where}[{i}]", errors)
    else:
        # JSON has one number type: an int is a valid float; a bool is not an int.
        ok = isinstance(doc, schema) and not (schema is int and isinstance(doc, bool))
        ok = ok or (schema is float and isinstance(doc, int) and not isinstance(doc, bool))
        if not ok:
            errors.append(f"{where}: expected {schema.__name__}, got {type(doc).__name__}")


def validate(doc: dict) -> list[str]:
    """Schema errors of a certificate document (empty when valid): required keys, types, status values, counts."""
    errors: list[str] = []
    _check(doc, _SCHEMA, "$", errors)
    if errors:
        return errors
    if doc["schema_version"] != SCHEMA_VERSION:
        errors.append(f"$.schema_version: expected {SCHEMA_VERSION}, got {doc['schema_version']}")
    if doc["summary"]["status"] not in ("pass", "pass_with_findings", "fail"):
        errors.append(f"$.summary.status: unknown value {doc['summary']['status']!r}")
    for i, step in enumerate(doc["steps"]):
        if step["status"] not in STATUSES:
            errors.append(f"$.steps[{i}].status: unknown value {step['status']!r}")
        for cat, entry in step["categories"].items():
            _check(entry, _CATEGORY, f"$.steps[{i}].categories[{cat!r}]", errors)
        total = sum(entry.get("count", 0) for entry in step["categories"].values())
        if total != step["mismatches"]:
            errors.append(f"$.steps[{i}]: category counts sum to {total}, mismatches is {step['mismatches']}")
    counts = Counter(step["status"] for step in doc["steps"])
    if {k: v for k, v in doc["summary"]["counts"].items() if v} != dict(counts):
        errors.append(f"$.summary.counts: {doc['summary']['counts']} disagrees with the steps {dict(counts)}")
    return errors


def overall_status(steps: list[StepResult]) -> str:
    """The run's verdict: "fail" if any step failed, else "pass_with_findings" if any has a finding, else "pass"."""
    statuses = {s.status for s in steps}
    if "fail" in statuses:
        return "fail"
    return "pass_with_findings" if "finding" in statuses else "pass"


def build_certificate(
    command: str, options: dict, fingerprint: dict, steps: list[StepResult], duration_s: float
) -> dict:
    """The certificate document of a run (JSON-ready; ``validate`` checks it against the schema).

    Args:
        command: the command line that produced it.
        options: the run's options (device, devices, formats, ...).
        fingerprint: the stack's fingerprint (versions, device, backend, interpreter, cast profiles).
        steps: every step's result, in run order.
        duration_s: wall time of the run so far, in seconds (rounded to the millisecond).

    Returns:
        The document: schema name and version, the inputs above, a summary (``overall_status`` and the number of
        steps per status, every status listed) and the steps as ``StepResult.to_dict`` gives them.
    """
    counts = Counter(s.status for s in steps)
    return jsonable(
        {
            "schema": "fp8ref.bringup.certificate",
            "schema_version": SCHEMA_VERSION,
            "command": command,
            "options": options,
            "fingerprint": fingerprint,
            "summary": {
                "status": overall_status(steps),
                "counts": {status: counts.get(status, 0) for status in STATUSES},
                "duration_s": round(duration_s, 3),
            },
            "steps": [s.to_dict() for s in steps],
        }
    )


_CELL = {"pass": "PASS", "fail": "**FAIL**", "finding": "finding", "skipped": "skipped"}


def _cell(step: dict | None) -> str:
    if step is None:
        return "-"
    if step["status"] in ("fail", "finding"):
        return f"{_CELL[step['status']]} ({step['mismatches']}/{step['checked']})"
    return _CELL[step["status"]]


def _fingerprint_md(fp: dict) -> list[str]:
    dev, be = fp["device"], fp["backend"]
    rows = [
        ("device", f"{dev.get('name')} ({dev.get('arch')})"),
        ("backend", f"{be['kind']} / {be['arch']}" + (" (Triton interpreter, CPU)" if fp["interpreter"] else "")),
        ("backend fp8 dtypes", ", ".join(be["fp8_dtypes"])),
        ("kernel cast", _kernel_cast(be)),
        ("python / torch / triton", f"{fp['python']} / {fp['torch']} / {fp['triton']}"),
        ("CUDA / HIP / driver", f"{fp.get('cuda')} / {fp.get('hip')} / {fp.get('driver')}"),
    ]
    lines = ["## Environment", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    lines += ["## Observed cast profiles", "", "| path | format | profile |", "|---|---|---|"]
    for path, per_format in fp["cast_profiles"].items():
        for name, obs in per_format.items():
            if obs["profile"]:
                text = f"`{obs['profile']}`"
            else:
                text = f"none: nearest `{obs['nearest']}` differs on {len(obs['differences'])} probes"
            lines.append(f"| {path} | {name} | {text} |")
    return [*lines, ""]


def _matrix_md(steps: list[dict]) -> list[str]:
    conf = [s for s in steps if s["step"] == "conformance" and "check" in s["params"]]
    checks = list(dict.fromkeys(s["params"]["check"] for s in conf))
    rows = list(dict.fromkeys((s["params"]["path"], s["params"]["format"]) for s in conf))
    by_key = {(s["params"]["path"], s["params"]["format"], s["params"]["check"]): s for s in conf}
    lines = [
        "## Conformance (cells: status, mismatches/checked)",
        "",
        "| path | format | " + " | ".join(checks) + " |",
        "|---|---|" + "---|" * len(checks),
    ]
    for path, name in rows:
        lines.append(f"| {path} | {name} | " + " | ".join(_cell(by_key.get((path, name, c))) for c in checks) + " |")
    lines.append("")
    kern = [s for s in steps if s["step"] == "kernel_matrix" and "op" in s["params"]]
    if kern:
        table: dict[tuple[str, str], Counter] = {}
        fp8s = sorted({s["params"]["fp8_dtype"] for s in kern})
        for s in kern:
            table.setdefault((s["params"]["op"], s["params"]["fp8_dtype"]), Counter())[s["status"]] += 1
        ops = list(dict.fromkeys(s["params"]["op"] for s in kern))
        lines += [
            "## Kernel differential matrix (cells: cases passed / run)",
            "",
            "| op | " + " | ".join(fp8s) + " |",
            "|---|" + "---|" * len(fp8s),
        ]
        for op in ops:
            cells = []
            for f in fp8s:
                c = table.get((op, f), Counter())
                run = sum(c.values()) - c["skipped"]
                cells.append("-" if not run else f"{c['pass']}/{run}" + (" **FAIL**" if c["fail"] else ""))
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


#: A caveat is stated once when at least this long: shorter repeated phrases read fine where they are.
_MIN_CAVEAT = 30
_BOUNDARIES = ("; ", ". ", ": ")


def _suffixes(note: str) -> list[str]:
    """The note and each tail of it that starts after a clause boundary ("; ", ". ", ": ")."""
    tails = [note]
    for i in range(len(note)):
        for b in _BOUNDARIES:
            if note.startswith(b, i):
                tails.append(note[i + len(b) :])
    return [t for t in tails if len(t) >= _MIN_CAVEAT]


def shared_caveats(notes: list[str]) -> list[str]:
    """Clause tails that end two or more of ``notes``, to be stated once: the one ending the most notes first
    (the longest among equals), then again over the notes it did not cover."""
    caveats: list[str] = []
    open_notes = list(notes)
    while True:
        ends: dict[str, int] = {}
        for note in open_notes:
            for tail in set(_suffixes(note)):
                ends[tail] = ends.get(tail, 0) + 1
        best = max((t for t, n in ends.items() if n >= 2), key=lambda t: (ends[t], len(t)), default=None)
        if best is None:
            return caveats
        caveats.append(best)
        open_notes = [n for n in open_notes if not n.endswith(best)]


def _with_references(note: str, caveats: list[str]) -> str:
    for i, caveat in enumerate(caveats, 1):
        if note.endswith(caveat):
            return note[: len(note) - len(caveat)] + f"[note {i}]"
    return note


def _notes_md(caveats: list[str]) -> list[str]:
    if not caveats:
        return []
    lines = ["## Notes (each shared by several steps below, stated once)", ""]
    lines += [f"{i}. {caveat}" for i, caveat in enumerate(caveats, 1)]
    return [*lines, ""]


def _details_md(steps: list[dict], status: str, title: str, caveats: list[str]) -> list[str]:
    chosen = [s for s in steps if s["status"] == status]
    if not chosen:
        return []
    lines = [f"## {title}", ""]
    for s in chosen:
        note = _with_references(s["note"], caveats)
        if s["status"] == "skipped" or s["checked"] == 0:
            lines.append(f"- `{s['name']}`: not run. {note}".rstrip())
        else:
            lines.append(f"- `{s['name']}`: {s['mismatches']} of {s['checked']} differ. {note}".rstrip())
        for cat, entry in sorted(s["categories"].items(), key=lambda kv: -kv[1]["count"]):
            shown = _example_text(entry["examples"][0]) if entry["examples"] else ""
            lines.append(f"  - {cat}: {entry['count']}" + (f" (e.g. `{shown}`)" if shown else ""))
        if "repro" in s["params"]:
            lines += ["", "  ```python", *(f"  {line}" for line in s["params"]["repro"].splitlines()), "  ```"]
    return [*lines, ""]


def _example_text(example: dict | str) -> str:
    """One example on one line: engine mismatches are already text; the traceback of a crashed step stays in JSON."""
    if isinstance(example, str):
        return example
    return ", ".join(f"{k}={v}" for k, v in example.items() if k != "traceback")


def render_markdown(doc: dict) -> str:
    """The certificate as Markdown: summary, environment, tables, then the steps that failed, found or were skipped
    (a caveat several of them share is stated once, under Notes, and referenced)."""
    s = doc["summary"]
    caveats = shared_caveats([st["note"] for st in doc["steps"] if st["status"] in ("fail", "finding", "skipped")])
    counts = ", ".join(f"{v} {k}" for k, v in s["counts"].items())
    lines = [
        "# FP8 bring-up certificate",
        "",
        f"**Status: {s['status'].upper().replace('_', ' ')}** ({counts}; {s['duration_s']:.1f} s)",
        "",
        f"Command: `{doc['command']}`",
        "",
        *(
            []
            if doc["options"].get("complete", True)
            else ["**INCOMPLETE: the run stopped before its last stage; this lists only the steps that finished.**", ""]
        ),
        "A *finding* is a divergence that cannot reach the project's results (its note says why); a **FAIL** is a",
        "genuine failure and makes the command exit non-zero.",
        "",
        *_fingerprint_md(doc["fingerprint"]),
        *_matrix_md(doc["steps"]),
        *_notes_md(caveats),
        *_details_md(doc["steps"], "fail", "Failures", caveats),
        *_details_md(doc["steps"], "finding", "Findings", caveats),
        *_details_md(doc["steps"], "skipped", "Skipped", caveats),
    ]
    return "\n".join(lines)


def write(doc: dict, out: Path) -> tuple[Path, Path]:
    """Validate ``doc`` and write certificate.json and certificate.md under ``out``.

    Raises:
        ValueError: the document violates the schema (a bug in the bring-up, never a vendor problem).
    """
    errors = validate(doc)
    if errors:
        raise ValueError("certificate violates its schema:\n" + "\n".join(errors))
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "certificate.json", out / "certificate.md"
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    md_path.write_text(render_markdown(doc) + "\n")
    return json_path, md_path


_STATUS_COLOR = {"pass": "#1a7f37", "pass_with_findings": "#9a6700", "fail": "#cf222e"}


@dataclass(frozen=True)
class Certificate:
    """A written certificate read back, for a vendor's notebook: ``Certificate.load(out_dir)``.

    Its HTML view (Jupyter) gives the status, the counts and every failing step and finding with its note; the text
    view is the status line. ``doc`` is the JSON document (``validate`` checks it on load).

    Attributes:
        doc: the certificate's JSON document.
    """

    doc: dict

    @classmethod
    def load(cls, path: str | Path) -> Certificate:
        """Read ``certificate.json`` from a file or from the directory ``fp8ref bringup --out`` wrote.

        Raises:
            ValueError: when the document does not follow the certificate schema.
        """
        path = Path(path)
        doc = json.loads((path / "certificate.json" if path.is_dir() else path).read_text())
        errors = validate(doc)
        if errors:
            raise ValueError(f"{path}: not a bring-up certificate: {'; '.join(errors[:3])}")
        return cls(doc)

    @property
    def status(self) -> str:
        """The overall status: "pass", "pass_with_findings" or "fail"."""
        return self.doc["summary"]["status"]

    def steps(self, status: str) -> list[dict]:
        """The steps with ``status`` ("pass", "fail", "finding", "skipped")."""
        return [s for s in self.doc["steps"] if s["status"] == status]

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.doc["summary"]["counts"].items())
        return f"Certificate({self.status.upper()}: {counts}; {self.doc['command']})"

    def _repr_html_(self) -> str:
        summary = self.doc["summary"]
        color = _STATUS_COLOR.get(self.status, "#57606a")
        counts = "".join(f"<td>{n} {html.escape(k)}</td>" for k, n in summary["counts"].items())
        parts = [
            f"<div><b style='color:{color}'>{html.escape(self.status.upper())}</b> "
            f"<code>{html.escape(self.doc['command'])}</code>, {summary['duration_s']:.0f} s</div>",
            f"<table><tr>{counts}</tr></table>",
        ]
        for status in ("fail", "finding"):
            rows = "".join(
                f"<tr><td>{html.escape(s['name'])}</td><td>{html.escape(s.get('note', ''))}</td></tr>"
                for s in self.steps(status)
            )
            if rows:
                parts.append(f"<b>{status}</b><table>{rows}</table>")
        return "<div style='font-family:monospace'>" + "".join(parts) + "</div>"
