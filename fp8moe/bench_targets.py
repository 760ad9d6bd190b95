"""``python -m fp8moe.bench_targets RUN.json [RUN.json ...]``: fp8moe's rows of a bench run against issue #11's targets.

``python -m fp8moe.bench`` writes the same section at the end of its Markdown; this reads committed runs, no GPU.

Semantics:
- the targets (docs/SPEC.md §7.6): GPU time (CUDA-graph replay, ``us``) at 85% of the copy bandwidth measured in
  the same run or more (``pct_of_copy_bw``), except ``colwise_3d_scale_and_cast`` on row-major input: 80%; 1.5x
  torch.compile of the reference or more, where the run timed torch.compile at the point (``--compile``); an eager
  call at most 10 us over its graph time (``eager_us - us``; an eager call faster than the graph meets it);
- only fp8moe's rows are judged (the targets are fp8moe's; torch.compile, the size-matched copies and a
  ``--kernel`` callable are not);
- a row that is not bitwise (``bitwise_ok`` False) misses every target: its time is not a result;
- a check the run could not make (no graph time, torch.compile not timed, no eager time) is ``-`` and neither
  meets nor misses; a row meets its targets when every check made is met;
- the gap is the distance to the target: points of copy bandwidth, times torch.compile, us of eager time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from fp8moe.bench import cell

__all__ = [
    "BANDWIDTH_TARGET_PCT",
    "COMPILE_SPEEDUP_TARGET",
    "EAGER_OVER_GRAPH_US",
    "ROW_MAJOR_COLWISE_3D_TARGET_PCT",
    "Standing",
    "bandwidth_target",
    "judge",
    "judged",
    "main",
    "target_lines",
    "verdict",
]

#: % of copy bandwidth every op and method must reach (issue #11, docs/SPEC.md §7.6).
BANDWIDTH_TARGET_PCT = 85.0
#: % of copy bandwidth for colwise_3d_scale_and_cast on row-major (E, K, N) input, read across its slices.
ROW_MAJOR_COLWISE_3D_TARGET_PCT = 80.0
#: fp8moe's speed-up over torch.compile of the fp8ref reference.
COMPILE_SPEEDUP_TARGET = 1.5
#: How far an eager call may run over its graph time, us.
EAGER_OVER_GRAPH_US = 10.0

#: The implementation whose rows are judged.
JUDGED_IMPL = "fp8moe"


def bandwidth_target(row: dict) -> float:
    """The % of copy bandwidth ``row``'s op and layout must reach."""
    if row["op"] == "colwise_3d_scale_and_cast" and row["layout"] == "row_major":
        return ROW_MAJOR_COLWISE_3D_TARGET_PCT
    return BANDWIDTH_TARGET_PCT


@dataclass(frozen=True)
class Standing:
    """One fp8moe row against the targets: each gap is the measured value minus the target (eager: the target minus
    the excess), so a negative gap is a miss; None where the run could not check it."""

    row: dict
    bitwise: bool
    bandwidth_gap: float | None
    compile_gap: float | None
    eager_gap: float | None

    @property
    def checks(self) -> tuple[float | None, ...]:
        """The three gaps: bandwidth, torch.compile, eager."""
        return self.bandwidth_gap, self.compile_gap, self.eager_gap

    @property
    def met(self) -> bool:
        """Bitwise, and every check the run made at or past its target."""
        return self.bitwise and all(gap >= 0 for gap in self.checks if gap is not None)


def judge(row: dict) -> Standing:
    """``row`` (an fp8moe row of ``python -m fp8moe.bench``'s JSON) against the targets."""
    pct, speedup = row.get("pct_of_copy_bw"), row.get("speedup_vs_compile")
    us, eager = row.get("us"), row.get("eager_us")
    return Standing(
        row=row,
        bitwise=row.get("bitwise_ok") is True,
        bandwidth_gap=None if pct is None else pct - bandwidth_target(row),
        compile_gap=None if speedup is None else speedup - COMPILE_SPEEDUP_TARGET,
        eager_gap=None if us is None or eager is None else EAGER_OVER_GRAPH_US - (eager - us),
    )


def judged(rows: Sequence[dict]) -> list[Standing]:
    """Each fp8moe row of ``rows`` against the targets, in order (the other implementations' rows are not judged)."""
    return [judge(r) for r in rows if r["impl"] == JUDGED_IMPL]


def verdict(s: Standing) -> str:
    """The verdict on ``s``: met, NOT BITWISE, or missed and the checks missed (bandwidth, compile, eager)."""
    if not s.bitwise:
        return "NOT BITWISE"
    missed = [
        name
        for name, gap in zip(("bandwidth", "compile", "eager"), s.checks, strict=True)
        if gap is not None and gap < 0
    ]
    return "met" if not missed else "missed: " + ", ".join(missed)


def target_lines(rows: Sequence[dict]) -> list[str]:
    """A Markdown section: each fp8moe row of ``rows`` against the targets, then how many meet them. Empty where
    ``rows`` has no fp8moe row."""
    return _section(judged(rows))


def _section(standings: Sequence[Standing]) -> list[str]:
    if not standings:
        return []
    lines = [
        "",
        "## Against issue #11's targets",
        "",
        f"{BANDWIDTH_TARGET_PCT:.0f}% of copy bandwidth ({ROW_MAJOR_COLWISE_3D_TARGET_PCT:.0f}% for "
        f"colwise_3d_scale_and_cast on row-major input), {COMPILE_SPEEDUP_TARGET}x torch.compile where it was timed, "
        f"an eager call at most {EAGER_OVER_GRAPH_US:.0f} us over its graph time (`python -m fp8moe.bench_targets`).",
        "",
        "| op | shape | G | variant | layout | % of copy | target | gap (points) | vs compile | eager over graph us "
        "| verdict |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for s in standings:
        r = s.row
        eager_over = None if s.eager_gap is None else EAGER_OVER_GRAPH_US - s.eager_gap
        lines.append(
            f"| {r['op']} | {'x'.join(map(str, r['shape']))} | {r['groups']} | {r['variant']} | {r['layout']} | "
            f"{cell(r.get('pct_of_copy_bw'), '.1f', '%')} | {bandwidth_target(r):.0f}% | "
            f"{cell(s.bandwidth_gap, '+.1f')} | {cell(r.get('speedup_vs_compile'), '.2f', 'x')} | "
            f"{cell(eager_over, '+.1f')} | {verdict(s)} |"
        )
    met = sum(s.met for s in standings)
    bandwidth_met = sum(s.bitwise and s.bandwidth_gap is not None and s.bandwidth_gap >= 0 for s in standings)
    lines += [
        "",
        f"{met} of {len(standings)} rows meet every target checked; {bandwidth_met} of {len(standings)} meet their "
        "bandwidth target.",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: prints each run's env line and its section; 0 when every judged row of every run meets every
    target it was checked against, 1 otherwise (a run with no fp8moe row: 2)."""
    p = argparse.ArgumentParser(prog="python -m fp8moe.bench_targets", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="<out>.json files of python -m fp8moe.bench")
    p.add_argument(
        "--only", default=None, help="substring filters on the op name, comma-separated (any), as the bench's"
    )
    p.add_argument("--out", default=None, help="also write the Markdown to this file")
    args = p.parse_args(argv)
    ops = args.only.split(",") if args.only else None
    lines, status = [], 0
    for path in args.runs:
        with open(path) as f:
            run = json.load(f)
        standings = judged([r for r in run["rows"] if ops is None or any(o in r["op"] for o in ops)])
        section = _section(standings)
        if not section:
            print(f"bench_targets: {path} has no {JUDGED_IMPL} row of the ops asked for", file=sys.stderr)
            return 2
        lines += [f"# {path}: {run['env']}", *section, ""]
        if not all(s.met for s in standings):
            status = 1
    text = "\n".join(lines)
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
