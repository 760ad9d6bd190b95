"""What the probe scripts share when they time their variants on a GPU: check, then time, one variant at a time, and
the table cells every probe row carries (benchmarks/probe_one_read_gap.py, benchmarks/probe_long_slices.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


def check_and_time(label: str, prepare: Callable[[], tuple]) -> tuple[float, bool, tuple] | None:
    """``prepare()`` builds a variant and checks its bytes, returning (call, bitwise, *extra); then ``call`` is timed
    (CUDA-graph median, us). Returns (us, bitwise, extra), or None after printing ``label`` and the error to stderr
    when the variant cannot be built or run: one variant this Triton cannot build must not lose the others."""
    from triton.testing import do_bench_cudagraph

    try:
        call, bitwise, *extra = prepare()
        us = do_bench_cudagraph(call, rep=30, return_mode="median") * 1e3
    except Exception as exc:
        print(f"{label}: {type(exc).__name__}: {exc}"[:400], file=sys.stderr, flush=True)
        return None
    return us, bitwise, tuple(extra)


def timing_cells(us: float, ideal_bytes: int, copy_gbps: float, base_us: float | None) -> str:
    """``us | % of copy | x base`` for a probe row: ideal bytes over the run's copy bandwidth, and the time over the
    row's baseline (the ceiling, the op), ``-`` before the baseline has a time."""
    pct = 100 * ideal_bytes / (us * 1e-6) / 1e9 / copy_gbps
    ratio = f"{us / base_us:.2f}" if base_us else "-"
    return f"{us:.1f} | {pct:.0f}% | {ratio}"


def table_head(name: str, copy_gbps: float, detail: str, base: str, extra_columns: tuple[str, ...] = ()) -> list[str]:
    """The first lines of a probe's Markdown table, printed as they are made: ``# name: GPU, versions; copy
    bandwidth; detail``, then the header of :func:`time_variants`' rows (point, variant, ``extra_columns``, us, % of
    copy, ``x <base>``: the time over the base variant's, bitwise)."""
    import torch
    import triton

    columns = ("point", "variant", *extra_columns, "us", "% of copy", f"x {base}", "bitwise")
    aligns = ("---", "---", *("---:" for _ in extra_columns), "---:", "---:", "---:", "---")
    lines = [
        f"# {name}: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"copy bandwidth {copy_gbps:.0f} GB/s" + (f"; {detail}" if detail else ""),
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "|".join(aligns) + "|",
    ]
    print("\n".join(lines), flush=True)
    return lines


def time_variants(
    lines: list[str],
    point: str,
    variants: Sequence[str],
    prepare: Callable[[str], tuple],
    ideal_bytes: int,
    copy_gbps: float,
    extra_cells: Callable[[tuple], tuple] = lambda extra: (),
) -> int:
    """Check and time each variant of one point (``prepare(variant)`` as :func:`check_and_time` takes it), printing
    and appending one row each to ``lines``; the first variant is the base of the ``x base`` column, and
    ``extra_cells(extra)`` gives the cells between variant and time from what ``prepare`` returned past the
    bitwise flag. Returns 1 if some variant failed to run or was not bitwise, else 0."""
    status, base_us = 0, None
    for variant in variants:
        timed = check_and_time(f"{point} {variant}", lambda variant=variant: prepare(variant))
        if timed is None:
            status = 1
            continue
        us, ok, extra = timed
        status |= 0 if ok else 1
        base_us = us if variant == variants[0] else base_us
        cells = [point, variant, *map(str, extra_cells(extra)), timing_cells(us, ideal_bytes, copy_gbps, base_us)]
        row = "| " + " | ".join(cells) + f" | {'yes' if ok else 'NO'} |"
        print(row, flush=True)
        lines.append(row)
    return status


def write_table(lines: list[str], out: str | None) -> None:
    """Write the table's lines to ``out`` (nothing when None)."""
    if out:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")


def uniform_offs(ktot: int, group: int, device: str):
    """End offsets of Ktot // group groups of ``group`` tokens (int32 on ``device``).

    Raises:
        SystemExit: Ktot is not a multiple of the group size.
    """
    import torch

    if ktot % group:
        raise SystemExit(f"Ktot {ktot} is not a multiple of the group size {group}")
    return torch.arange(group, ktot + 1, group, dtype=torch.int32, device=device)


def uniform_group_probe(
    argv: list[str] | None,
    doc: str,
    name: str,
    variants: Sequence[str],
    default_shapes: str,
    prepare: Callable[..., Callable[[str], tuple]],
    extra_columns: tuple[str, ...] = (),
    scale_bytes: bool = False,
) -> int:
    """The main of the probes that time variants on x (Ktot, N) bf16 in uniform groups, on a CUDA GPU: options
    --out, --shapes (KtotxN, comma-separated), --group (tokens per group, the tile's token extent), --tile
    (columns/wWARPS) and --variants (the first is the base). ``prepare(x, offs, group, columns, warps)`` returns
    what :func:`time_variants` takes as its ``prepare``; its extra values fill ``extra_columns``. Ideal bytes: x read
    once, q written once, and where ``scale_bytes`` one f32 scale per (group, column). Returns the exit status."""
    import torch

    from fp8moe.bench import copy_bandwidth_gbps

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", help="also write the Markdown table here")
    parser.add_argument("--shapes", default=default_shapes, help="KtotxN, comma-separated")
    parser.add_argument("--group", type=int, default=256, help="tokens per group = the tile's token extent")
    parser.add_argument("--tile", default="64/w4", help="columns per program and warps, e.g. 64/w4")
    parser.add_argument("--variants", default=",".join(variants))
    args = parser.parse_args(argv)
    columns, warps = (int(v) for v in args.tile.split("/w"))
    bw = copy_bandwidth_gbps()
    detail = f"groups of {args.group} tokens, tile {args.group} tokens x {columns} columns, {warps} warps"
    chosen = args.variants.split(",")
    lines = table_head(name, bw, detail, chosen[0], extra_columns)
    gen = torch.Generator(device="cuda").manual_seed(0)
    status = 0
    for shape in args.shapes.split(","):
        ktot, n = (int(v) for v in shape.split("x"))
        x = torch.randn(ktot, n, device="cuda", generator=gen).to(torch.bfloat16)
        offs = uniform_offs(ktot, args.group, "cuda")
        ideal = 3 * ktot * n + (4 * n * offs.numel() if scale_bytes else 0)
        status |= time_variants(
            lines, shape, chosen, prepare(x, offs, args.group, columns, warps), ideal, bw,
            (lambda extra: extra) if extra_columns else (lambda extra: ()),
        )  # fmt: skip
        torch.cuda.empty_cache()
    write_table(lines, args.out)
    return status
