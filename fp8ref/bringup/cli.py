"""``fp8ref`` command line: ``bringup`` (the certificate), ``export-golden`` and ``verify`` (stacks without Python).

Exit status: 0 when nothing genuine failed (findings allowed), 1 when something did, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from fp8ref.formats import all_formats, fmt
from fp8ref.triton_env import interpreter_requested, use_interpreter_for_cpu

__all__ = ["main"]


def _formats(text: str) -> tuple[torch.dtype, ...]:
    try:
        return tuple(fmt(name.strip()).dtype for name in text.split(",") if name.strip())
    except TypeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _version() -> str:
    """The installed distribution's version (importlib.metadata), or a plain statement when it is not installed."""
    try:
        return importlib.metadata.version("fp8ref")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (fp8ref is not installed as a distribution)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fp8ref",
        description="FP8 reference toolkit: the bring-up certificate of a stack, golden cast vectors, their check.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("bringup", help="fingerprint this stack, check its casts and kernels, write a certificate")
    b.add_argument(
        "--device", default="auto", help="auto (cuda if available, else the CPU interpreter), cpu, cuda, cuda:N"
    )
    b.add_argument(
        "--devices",
        default=None,
        help="GPUs to shard the kernel matrix and the f32 sweep over: 'all' "
        "or a list like 0,1 (default: the --device GPU only)",
    )
    b.add_argument(
        "--formats",
        type=_formats,
        default=tuple(f.dtype for f in all_formats()),
        help="comma-separated fp8 formats (default: all four; each path keeps those its backend has)",
    )
    b.add_argument("--quick", action="store_true", help="a small kernel matrix (CPU: under 2 minutes)")
    b.add_argument(
        "--exhaustive",
        action="store_true",
        help="all 2^32 float32 inputs per format and cast path (GPU); on the CPU a labelled 2^20 sample",
    )
    b.add_argument("--out", type=Path, default=Path("bringup-out"), help="directory for certificate.json/.md")
    b.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    b.set_defaults(func=_bringup)

    g = sub.add_parser("export-golden", help="write golden cast vectors (.bin + manifest.jsonl) per profile/format")
    g.add_argument("--out", type=Path, required=True, help="directory to write the .bin files and manifest.jsonl into")
    g.add_argument("--profiles", default=None, help="comma-separated profile names (default: all)")
    g.add_argument("--formats", default=None, help="comma-separated fp8 formats (default: all four)")
    g.set_defaults(func=_export_golden)

    v = sub.add_parser("verify", help="check a vendor's outputs for golden vectors")
    v.add_argument("golden", type=Path, help="directory written by export-golden")
    v.add_argument("results", type=Path, help="directory holding the vendor's result files (manifest 'result')")
    v.set_defaults(func=_verify)
    return parser


def _resolve_device(text: str) -> torch.device:
    if text == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(text)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"fp8ref bringup: --device {text}, but torch sees no GPU")
        return torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())
    if device.type != "cpu":
        raise SystemExit(f"fp8ref bringup: unsupported --device {text!r} (auto, cpu, cuda, cuda:N)")
    if torch.cuda.is_available() and not interpreter_requested():
        # The interpreter must be chosen before any kernel is defined; the CLI does not flip it behind your back.
        raise SystemExit("fp8ref bringup: --device cpu on a machine with a GPU needs TRITON_INTERPRET=1 set")
    return device


def _resolve_devices(text: str | None, device: torch.device) -> list[int]:
    if device.type != "cuda":
        return []
    if text is None:
        return [device.index]
    count = torch.cuda.device_count()
    if text == "all":
        return list(range(count))
    indices = list(dict.fromkeys(int(i) for i in text.split(",")))
    bad = [i for i in indices if not 0 <= i < count]
    if bad:
        raise SystemExit(f"fp8ref bringup: --devices {text}: no GPU {bad} (this machine has {count})")
    return indices


def _guarded(name: str, run: Callable[[], list], load_bearing: bool) -> list:
    """Run one step; an exception becomes a StepResult (fail when load-bearing, else finding), never a crash."""
    from fp8ref.bringup.results import StepResult

    start = time.monotonic()
    try:
        return run()
    except Exception as e:
        tb = traceback.format_exc(limit=4)
        return [
            StepResult(
                step=name.split("/")[0],
                name=name,
                status="fail" if load_bearing else "finding",
                checked=1,
                mismatches=1,
                categories={"error": {"count": 1, "examples": [{"exception": repr(e), "traceback": tb}]}},
                duration_s=time.monotonic() - start,
                note=f"the step raised {type(e).__name__}",
            )
        ]


def _bringup(args: argparse.Namespace) -> int:
    device = _resolve_device(args.device)
    devices = _resolve_devices(args.devices, device)
    if len(devices) == 1:
        device = torch.device("cuda", devices[0])  # one GPU named: run there, and say so in the certificate
    start = time.monotonic()
    use_interpreter_for_cpu(cpu_requested=device.type == "cpu")  # before a kernel package imports triton
    from fp8ref.bringup import certificate
    from fp8ref.bringup.matrix import matrix_steps
    from fp8ref.bringup.steps import conformance_steps, fingerprint_steps

    show = not args.no_progress
    options = {
        "device": str(device),
        "devices": devices,
        "formats": [fmt(d).name for d in args.formats],
        "quick": args.quick,
        "exhaustive": args.exhaustive,
    }
    command = shlex.join(["fp8ref", *args.argv])

    def checkpoint(stage: str, complete: bool) -> tuple:
        """Log the stage and write the certificate so far: a run cut short (a job time limit) still leaves one,
        marked incomplete, with every step that finished."""
        elapsed = time.monotonic() - start
        print(f"fp8ref bringup: {stage} done after {elapsed:.0f} s ({len(steps)} steps)", file=sys.stderr, flush=True)
        doc = certificate.build_certificate(command, {**options, "complete": complete}, fingerprint, steps, elapsed)
        return doc, *certificate.write(doc, args.out)

    fingerprint, paths, profiles, steps = fingerprint_steps(device, args.formats)
    checkpoint("fingerprint", complete=False)
    steps += conformance_steps(
        paths, profiles, device, devices, exhaustive=args.exhaustive, show_progress=show, guard=_guarded
    )
    checkpoint("conformance", complete=False)
    steps += _guarded(
        "kernel_matrix",
        lambda: matrix_steps(device, devices, args.formats, quick=args.quick, show_progress=show),
        load_bearing=True,
    )
    doc, json_path, md_path = checkpoint("kernel matrix", complete=True)
    summary = doc["summary"]
    print(
        f"fp8ref bringup: {summary['status'].upper()} "
        + ", ".join(f"{v} {k}" for k, v in summary["counts"].items())
        + f" in {summary['duration_s']:.1f} s on {fingerprint['backend']['kind']}/{fingerprint['backend']['arch']}"
    )
    for step in doc["steps"]:
        if step["status"] == "fail":
            cats = ", ".join(f"{c} {e['count']}" for c, e in step["categories"].items())
            print(f"  FAIL {step['name']}: {cats}")
    print(f"  wrote {json_path} and {md_path}")
    return 1 if summary["status"] == "fail" else 0


def _export_golden(args: argparse.Namespace) -> int:
    from fp8ref.bringup.golden import export_golden

    profiles = args.profiles.split(",") if args.profiles else None
    formats = args.formats.split(",") if args.formats else None
    n = export_golden(args.out, profiles, formats)
    print(f"fp8ref export-golden: {n} checks written to {args.out / 'manifest.jsonl'}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from fp8ref.bringup.golden import verify_results

    checks = verify_results(args.golden, args.results)
    for check in checks:
        if check.status != "missing":
            print(check)
    counts = {s: sum(c.status == s for c in checks) for s in ("pass", "fail", "missing")}
    print(f"fp8ref verify: {counts['pass']} pass, {counts['fail']} fail, {counts['missing']} without a result file")
    if counts["pass"] + counts["fail"] == 0:
        print(f"fp8ref verify: no result files found under {args.results}")
        return 1
    return 1 if counts["fail"] else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fp8ref`` console script and ``python -m fp8ref``; returns the exit status."""
    args = _parser().parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    return args.func(args)
