"""Every ``SPEC §N`` citation in the repository names a section of docs/SPEC.md; every repo path named exists.

Citations are how code and docs point at the normative text ("Triton's default maximum drops NaN, SPEC §4"); a
renumbered or missing section turns them into dead ends silently. Paths are the same problem for files
("benchmarks/results/h200-host-overhead.txt" once named a log that was committed under two other names).
Scanned: every file ``git ls-files`` lists with a suffix in TEXT_SUFFIXES (notebooks through their JSON strings).
"""

from __future__ import annotations

import functools
import glob
import itertools
import json
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC_PATH = "docs/SPEC.md"
TEXT_SUFFIXES = (".py", ".md", ".ipynb", ".sh", ".toml")
#: This file: its examples of broken citations and paths are synthetic on purpose.
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()

# A section number, then any further numbers joined by a range dash ("§4-5", "§4.1–4.3") or listed with their own
# "§" ("§4, §5", "§4 and §6"). A bare number after a comma is prose ("SPEC §7, 5 points"), not a list.
_NUM = r"\d+(?:\.\d+)?"
_SECTIONS = rf"§\s*{_NUM}(?:\s*[-–]\s*§?\s*{_NUM}|\s*(?:,|and|or)\s*§\s*{_NUM})*"
CITATION = re.compile(rf"\bSPEC(?:\.md)?\s+({_SECTIONS})")
SPEC_INTERNAL = re.compile(rf"({_SECTIONS})")
HEADING = re.compile(r"^(#{2,3}) (\d+)\.(?:(\d+) )?(?:\s*)(\S.*)$")

REPO_PREFIXES = ("fp8ref", "fp8moe", "tests", "benchmarks", "docs", "notebooks")
REPO_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(REPO_PREFIXES)})/[\w./*{{}},<>-]*)")
#: Files whose backticked repo paths must exist, and the results README's log names (relative to its folder).
PATH_DOCS = ("README.md", "docs/*.md", "benchmarks/results/README.md")
RESULTS_README = "benchmarks/results/README.md"
RESULT_NAME = re.compile(r"^(?:h200|cpu)-[\w.*{},-]+$")
BACKTICKED = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)


# ----------------------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------------------


def _expand(first: str, last: str) -> list[str]:
    """Sections a range names: "4"-"6" -> 4, 5, 6; "4.1"-"4.3" -> 4.1, 4.2, 4.3; anything else its two ends."""
    a, b = first.split("."), last.split(".")
    if len(a) == len(b) == 1 and int(a[0]) <= int(b[0]):
        return [str(n) for n in range(int(a[0]), int(b[0]) + 1)]
    if len(a) == len(b) == 2 and a[0] == b[0] and int(a[1]) <= int(b[1]):
        return [f"{a[0]}.{n}" for n in range(int(a[1]), int(b[1]) + 1)]
    return [first, last]


def sections_named(group: str) -> list[str]:
    """Every section one citation names: "§4" -> ["4"]; "§4-5" -> ["4", "5"]; "§4.2, §6" -> ["4.2", "6"]."""
    out: list[str] = []
    for part in re.split(r"\s*(?:,|and|or)\s*(?=§)", group):
        ends = re.findall(_NUM, part)
        out += _expand(ends[0], ends[-1]) if len(ends) == 2 else ends
    return out


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, section) of every ``SPEC §N`` / ``SPEC.md §N.M`` citation in ``text``."""
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found += [(line, s) for s in sections_named(match.group(1))]
    return found


def spec_headings(text: str) -> list[tuple[int, int | None]]:
    """(section, subsection or None) of every ``## N. Title`` / ``### N.M Title`` heading, in order.

    Raises:
        ValueError: a ``##``/``###`` heading that is not numbered that way.
    """
    out = []
    for line in text.splitlines():
        if not line.startswith("## ") and not line.startswith("### "):
            continue
        match = HEADING.match(line)
        level = len(line.split(" ", 1)[0])
        if match is None or (level == 2) != (match.group(3) is None):
            want = "## N. Title" if level == 2 else "### N.M Title"
            raise ValueError(f"heading {line!r} is not numbered as {want!r}")
        out.append((int(match.group(2)), None if level == 2 else int(match.group(3))))
    return out


def numbering_problems(headings: list[tuple[int, int | None]]) -> list[str]:
    """Why the numbering is not 1, 2, 3, ... with each section's subsections N.1, N.2, ... directly under it."""
    problems, section, sub = [], 0, 0
    for major, minor in headings:
        if minor is None:
            if major != section + 1:
                problems.append(f"section {major} follows section {section}")
            section, sub = major, 0
        else:
            if major != section or minor != sub + 1:
                problems.append(f"subsection {major}.{minor} follows {section}.{sub} under section {section}")
            sub = minor
    return problems


def section_ids(headings: list[tuple[int, int | None]]) -> set[str]:
    return {str(a) if b is None else f"{a}.{b}" for a, b in headings}


def unresolved(text: str, ids: set[str]) -> list[tuple[int, str]]:
    """Citations in ``text`` whose section is not in ``ids``."""
    return [(line, s) for line, s in citations(text) if s not in ids]


def _placeholders_to_globs(path: str) -> list[str]:
    """Glob patterns for a path as written: ``{a,b}`` expands, ``{name}`` and ``<op>`` stand for anything."""
    path = re.sub(r"<[^<>/]*>", "*", path)
    parts = re.split(r"(\{[^{}]*\})", path)
    choices = [
        p[1:-1].split(",") if p.startswith("{") and "," in p else ["*"] if p.startswith("{") else [p] for p in parts
    ]
    return ["".join(c) for c in itertools.product(*choices)]


def path_exists(path: str, root: Path = REPO) -> bool:
    """Whether a path as written names at least one file or folder under ``root``.

    Globs and placeholders (``<op>``, ``{name}``, an all-capitals segment such as ``NAME``) stand for anything, and a
    path may be an output prefix (``--out benchmarks/results/battery-timing`` names ``battery-timing-cpu-*.md``).
    """
    path = re.sub(r"\b[A-Z]{2,}\b", "*", path)
    return any(
        glob.glob(pattern, root_dir=root) or glob.glob(pattern + "*", root_dir=root)
        for pattern in _placeholders_to_globs(path)
    )


def repo_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of every token that starts like a repo path (``fp8ref/...``, ``tests/...``, ...)."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1).rstrip(".,:;)")) for m in REPO_PATH.finditer(text)]


def backticked(text: str) -> list[tuple[int, str]]:
    """(line, content) of every inline code span and fenced block."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0).strip("`")) for m in BACKTICKED.finditer(text)]


# ----------------------------------------------------------------------------------------------------------------
# The repository
# ----------------------------------------------------------------------------------------------------------------


@functools.cache
def _tracked() -> tuple[str, ...]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout, nothing lists the tracked files: {exc}")
    return tuple(p for p in out.splitlines() if p.endswith(TEXT_SUFFIXES) and (REPO / p).is_file() and p != SELF)


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _text(path: str) -> str:
    raw = (REPO / path).read_text(encoding="utf-8")
    if path.endswith(".ipynb"):
        # Cell sources are lists of lines: joined, each cell's text reads as written (and "§" is unescaped).
        cells = json.loads(raw).get("cells", [])
        return "\n".join("".join(_strings(cell.get("source", ""))) for cell in cells)
    return raw


@functools.cache
def _spec() -> tuple[str, list[tuple[int, int | None]]]:
    text = (REPO / SPEC_PATH).read_text(encoding="utf-8")
    return text, spec_headings(text)


# ----------------------------------------------------------------------------------------------------------------
# Tests of the checker itself (synthetic text: these must fail where the repository checks must not)
# ----------------------------------------------------------------------------------------------------------------

SYNTHETIC_SPEC = """# Title
## 1. One
### 1.1 Sub
### 1.2 Sub
## 2. Two
"""


def test_checker_flags_a_made_up_section_and_subsection():
    ids = section_ids(spec_headings(SYNTHETIC_SPEC))
    text = "fine: SPEC §1, SPEC §1.2 and SPEC.md §2\nbroken: SPEC §42 (see SPEC §1.9)\n"
    assert unresolved(text, ids) == [(2, "42"), (2, "1.9")]


def test_checker_expands_ranges_and_lists():
    assert sections_named("§4-6") == ["4", "5", "6"]
    assert sections_named("§4.1–4.3") == ["4.1", "4.2", "4.3"]
    assert sections_named("§4, §6 and §7.2") == ["4", "6", "7.2"]
    assert [s for _, s in citations("SPEC §7, 5 points; SPEC §1-2")] == ["7", "1", "2"]
    assert unresolved("SPEC §1-3", section_ids(spec_headings(SYNTHETIC_SPEC))) == [(1, "3")]


def test_checker_rejects_gaps_and_misplaced_subsections():
    assert numbering_problems(spec_headings("## 1. A\n## 3. C\n")) == ["section 3 follows section 1"]
    assert numbering_problems(spec_headings("## 1. A\n### 2.1 X\n")) == ["subsection 2.1 follows 1.0 under section 1"]
    assert numbering_problems(spec_headings("## 1. A\n### 1.2 X\n")) == ["subsection 1.2 follows 1.0 under section 1"]
    with pytest.raises(ValueError, match="not numbered"):
        spec_headings("## Unnumbered\n")


def test_path_checker_flags_a_missing_file_and_accepts_globs_and_placeholders():
    assert not path_exists("tests/test_no_such_file.py")
    assert not path_exists("benchmarks/results/no-such-log-{before,after}.txt")
    assert path_exists("tests/conftest.py")
    assert path_exists("fp8moe/kernels/<op>.py")
    assert path_exists("benchmarks/results/h200-host-overhead-{before,after}.txt")
    assert path_exists("benchmarks/results/")
    assert [p for _, p in repo_paths("see `tests/x.py` and fp8ref/ops.py, not my_tests/y.py")] == [
        "tests/x.py",
        "fp8ref/ops.py",
    ]


# ----------------------------------------------------------------------------------------------------------------
# The repository's checks
# ----------------------------------------------------------------------------------------------------------------


def test_spec_sections_are_numbered_consecutively():
    _, headings = _spec()
    assert headings, f"{SPEC_PATH} has no numbered sections"
    assert numbering_problems(headings) == []


def test_every_spec_citation_in_the_repository_resolves():
    _, headings = _spec()
    ids = section_ids(headings)
    missing = [f"{path}:{line}: SPEC §{s}" for path in _tracked() for line, s in unresolved(_text(path), ids)]
    assert not missing, f"citations of sections {SPEC_PATH} does not have:\n" + "\n".join(missing)


def test_spec_cross_references_resolve():
    text, headings = _spec()
    ids = section_ids(headings)
    missing = [
        f"{SPEC_PATH}:{text.count(chr(10), 0, m.start()) + 1}: {s}"
        for m in SPEC_INTERNAL.finditer(text)
        for s in sections_named(m.group(1))
        if s not in ids
    ]
    assert not missing, "references to sections that do not exist:\n" + "\n".join(missing)


def test_every_repo_path_named_in_a_tracked_file_exists():
    missing = [
        f"{path}:{line}: {p}" for path in _tracked() for line, p in repo_paths(_text(path)) if not path_exists(p)
    ]
    assert not missing, "paths to files that do not exist:\n" + "\n".join(missing)


def test_every_backticked_path_in_the_docs_exists():
    docs = sorted({p for pattern in PATH_DOCS for p in glob.glob(pattern, root_dir=REPO)})
    assert RESULTS_README in docs
    assert "README.md" in docs
    missing = []
    for doc in docs:
        for line, span in backticked(_text(doc)):
            missing += [f"{doc}:{line}: {p}" for _, p in repo_paths(span) if not path_exists(p)]
            if doc == RESULTS_README and RESULT_NAME.match(span) and not path_exists(span, REPO / "benchmarks/results"):
                missing.append(f"{doc}:{line}: {span} (in benchmarks/results/)")
    assert not missing, "backticked paths to files that do not exist:\n" + "\n".join(missing)


def test_spec_lists_every_mismatch_category():
    from fp8ref.engine.categories import CATEGORIES

    text, _ = _spec()
    match = re.search(r"^## \d+\. Mismatch categories.*?(?=^## )", text, re.DOTALL | re.MULTILINE)
    assert match, f"{SPEC_PATH} has no 'Mismatch categories' section"
    missing = [c for c in CATEGORIES if f"`{c}`" not in match.group(0)]
    assert not missing, f"categories of fp8ref.engine.categories the spec does not describe: {missing}"
