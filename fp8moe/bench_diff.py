"""``python -m fp8moe.bench_diff OLD.json NEW.json``: two runs of ``fp8moe.bench`` side by side, point by point.

What a kernel change did to the benchmark: per point and implementation present in both runs, the CUDA-graph time of
each, NEW over OLD, the % of copy bandwidth of each, the eager time of each and the config each ran. No GPU.

Semantics:
- rows match on (op, impl, shape, groups, variant, layout); a row in one run only is listed after the table;
- the ratio is of graph times (``us``); a row without one (no capture) gets ``-``;
- a row that was not bitwise in either run is marked ``NO`` in the bitwise column: its time is not a result;
- a size-matched copy row (``fp8moe.bench.copy_row``) is no implementation of the op: ``-`` there;
- the two runs must come from the same device model (the part of ``env`` before the first comma): times of an H100
  and an H200 are not comparable, so :func:`diff_lines` raises unless ``cross_device`` is set, and then says so;
- two runs on one model still differ by run-to-run noise: forced and autotuned times of one tile were up to 3% apart
  between two runs of one H200 (``benchmarks/results/h200-s31-summary.md``), so ratios within 0.97-1.03 say little.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from fp8moe.bench import bitwise_cell, cell, row_key

#: The row fields that name a point and implementation.
ROW_KEY = ("op", "impl", "shape", "groups", "variant", "layout")


def device_model(env: str) -> str:
    """The device name a bench's ``env`` line starts with (``fp8moe.bench`` writes it first, comma-terminated)."""
    return env.split(",", 1)[0].strip()


def _key(row: dict) -> tuple:
    return row_key(row, ROW_KEY)


def diff_lines(old: dict, new: dict, cross_device: bool = False) -> list[str]:
    """The Markdown lines comparing two bench JSON documents (``{"env", "copy_gbps", "rows"}``), in NEW's row order.

    Raises:
        ValueError: the runs come from different device models and ``cross_device`` is not set.
    """
    old_model, new_model = device_model(old["env"]), device_model(new["env"])
    if old_model != new_model and not cross_device:
        raise ValueError(
            f"the runs come from different devices ({old_model!r} against {new_model!r}): their times are not "
            "comparable (pass cross_device / --cross-device to list them anyway)"
        )
    lines = [
        f"OLD: {old['env']}",
        f"NEW: {new['env']}",
    ]
    if old_model != new_model:
        lines.append("**Different devices: the ratios compare two machines, not two versions of the code.**")
    lines += [
        "",
        "| op | impl | shape | G | variant | layout | old us | new us | new / old | old % | new % | old eager us "
        "| new eager us | bitwise | old config | new config |",
        "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    old_rows = {_key(r): r for r in old["rows"]}
    new_keys = set()
    for n in new["rows"]:
        key = _key(n)
        new_keys.add(key)
        o = old_rows.get(key)
        if o is None:
            continue
        ratio = n["us"] / o["us"] if n["us"] and o["us"] else None
        if o["bitwise_ok"] is None and n["bitwise_ok"] is None:  # a size-matched copy row (fp8moe.bench.copy_row)
            bitwise = bitwise_cell(None)
        else:
            bitwise = bitwise_cell(bool(o["bitwise_ok"] and n["bitwise_ok"]))
        lines.append(
            f"| {n['op']} | {n['impl']} | {'x'.join(map(str, n['shape']))} | {n['groups']} | {n['variant']} | "
            f"{n['layout']} | {cell(o['us'], '.1f')} | {cell(n['us'], '.1f')} | {cell(ratio, '.3f')} | "
            f"{cell(o['pct_of_copy_bw'], '.0f', '%')} | {cell(n['pct_of_copy_bw'], '.0f', '%')} | "
            f"{cell(o['eager_us'], '.1f')} | {cell(n['eager_us'], '.1f')} | {bitwise} | {o.get('config') or '-'} | "
            f"{n.get('config') or '-'} |"
        )
    only_old = [k for k in old_rows if k not in new_keys]
    only_new = [_key(n) for n in new["rows"] if _key(n) not in old_rows]
    for label, keys in (("only in OLD", only_old), ("only in NEW", only_new)):
        if keys:
            lines += ["", f"{label}:"] + [f"- {' '.join(map(str, k))}" for k in keys]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; prints the table (and writes it to ``--out``); 2 when the devices differ without --cross-device."""
    p = argparse.ArgumentParser(prog="python -m fp8moe.bench_diff", description=__doc__.splitlines()[0])
    p.add_argument("old", help="the earlier run's <out>.json")
    p.add_argument("new", help="the later run's <out>.json")
    p.add_argument("--cross-device", action="store_true", help="list runs of different device models anyway")
    p.add_argument("--out", default=None, help="also write the Markdown to this file")
    args = p.parse_args(argv)
    with open(args.old) as f_old, open(args.new) as f_new:
        old, new = json.load(f_old), json.load(f_new)
    try:
        lines = diff_lines(old, new, args.cross_device)
    except ValueError as exc:
        print(f"bench_diff: {exc}", file=sys.stderr)
        return 2
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
