"""The unit of a certificate: one step's outcome, its mismatch categories with counts and examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["MAX_EXAMPLES", "STATUSES", "Status", "StepResult", "merge_categories"]

Status = Literal["pass", "fail", "finding", "skipped"]
#: pass: no mismatch. fail: a genuine failure (exit status 1). finding: a divergence recorded and explained that
#: cannot reach the project's results (e.g. the interpreter's own cast, which the kernels do not use). skipped: not
#: run here (the reason says why).
STATUSES: tuple[str, ...] = ("pass", "fail", "finding", "skipped")

#: Examples kept per category: enough to reproduce by hand, few enough to read in certificate.md.
MAX_EXAMPLES = 5


@dataclass
class StepResult:
    """One checked item of the bring-up.

    Attributes:
        step: the step family: "fingerprint", "conformance" or "kernel_matrix".
        name: unique id within the certificate, e.g. "conformance/triton.native/e4m3fn/encode_bf16".
        status: see STATUSES.
        checked: number of elements (conformance) or cases (matrix) compared.
        mismatches: number of those that differed.
        categories: category -> {"count": int, "examples": [dict, ...]}.
        duration_s: wall time of the step.
        note: why the status is what it is (profile compared against, reason for skipping or for a finding).
        params: the step's coordinates (path, format, profile, op, shape, ...), for the Markdown matrix.
    """

    step: str
    name: str
    status: Status
    checked: int = 0
    mismatches: int = 0
    categories: dict[str, dict] = field(default_factory=dict)
    duration_s: float = 0.0
    note: str = ""
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The step as the certificate's JSON stores it."""
        return {
            "step": self.step,
            "name": self.name,
            "status": self.status,
            "checked": self.checked,
            "mismatches": self.mismatches,
            "categories": self.categories,
            "duration_s": round(self.duration_s, 3),
            "note": self.note,
            "params": self.params,
        }


def merge_categories(into: dict[str, dict], other: dict[str, dict]) -> dict[str, dict]:
    """Add ``other``'s counts to ``into`` and keep up to MAX_EXAMPLES examples per category; returns ``into``."""
    for cat, entry in other.items():
        mine = into.setdefault(cat, {"count": 0, "examples": []})
        mine["count"] += entry["count"]
        room = MAX_EXAMPLES - len(mine["examples"])
        mine["examples"].extend(entry["examples"][:room])
    return into
