"""Golden vectors for stacks without Python, and the check of what such a stack produced from them.

File contract (all binary files little-endian, no header):

    GOLDEN/manifest.jsonl             one JSON object per check, see below
    GOLDEN/CONTRACT.md                this contract in words, for the vendor
    GOLDEN/inputs/<format>/<set>.f32.bin            encode inputs: n float32 bit patterns (uint32)
    GOLDEN/expected/<profile>/<format>/<set>.u8.bin expected fp8 codes: n bytes
    GOLDEN/expected/decode/<format>.f32.bin         expected decode of codes 0..255: 256 float32 patterns

A manifest line: {"kind": "encode" | "decode", "profile", "format", "set", "count", "input", "expected",
"result", "sha256"}; ``result`` is the path, relative to the vendor's RESULTS directory, where the vendor writes
its output: the same bytes layout as ``expected`` (n codes, or 256 float32 patterns for decode). ``sha256`` is the
expected file's digest. Decode results compare NaN as a class (any NaN pattern equals any NaN pattern); encode
results compare every byte, NaN codes included, because profiles define the NaN code.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fp8ref.formats import all_formats, fmt
from fp8ref.profiles import PROFILES, cast_codes
from fp8ref.vectors import all_bf16, all_fp16, fp32_edge_set, probe_vector

__all__ = ["GOLDEN_SETS", "FileCheck", "export_golden", "verify_results"]

#: Encode input sets exported: name -> (fp8 dtype -> float32 CPU tensor). 16-bit sources are widened to float32
#: (exact), so one input file format serves every set.
GOLDEN_SETS = {
    "bf16_all": lambda _: all_bf16().to(torch.float32),
    "fp16_all": lambda _: all_fp16().to(torch.float32),
    "fp32_edge": fp32_edge_set,
    "probe": probe_vector,
}

_MAX_REPORTED = 10

_CONTRACT = """# Golden vectors for FP8 cast conformance

Produced by `fp8ref export-golden`; checked by `fp8ref verify GOLDEN RESULTS`.

For every line of `manifest.jsonl`:
- kind "encode": read `input` ({count} float32 values as little-endian uint32 bit patterns), convert each value to
  the fp8 `format` with your stack's raw conversion (no scaling, no clamping), and write the {count} resulting codes,
  one byte each, to RESULTS/`result`. `expected` holds what the named `profile` produces.
- kind "decode": convert the codes 0..255 of `format` to float32 and write 256 little-endian float32 values to
  RESULTS/`result`. Any NaN bit pattern is accepted for a NaN code.

Implement the lines of the profile your stack claims; `verify` reports missing result files without failing on them,
and fails when a present file differs (it names the file, the index, the input and both outputs).
"""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return _digest(data)


def _f32_bytes(x: torch.Tensor) -> bytes:
    return x.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()


def export_golden(out: Path, profiles: list[str] | None = None, formats: list[str] | None = None) -> int:
    """Write golden vectors for ``profiles`` x ``formats`` (default: all) under ``out``; returns the manifest size."""
    out = Path(out)
    profiles = list(PROFILES) if profiles is None else profiles
    chosen = all_formats() if formats is None else tuple(fmt(f) for f in formats)
    lines = []
    for f in chosen:
        decode_rel = f"expected/decode/{f.name}.f32.bin"
        digest = _write(out / decode_rel, _f32_bytes(f.values))
        lines.append(
            {
                "kind": "decode",
                "profile": None,
                "format": f.name,
                "set": "decode_256",
                "count": 256,
                "input": None,
                "expected": decode_rel,
                "result": f"decode/{f.name}.f32.bin",
                "sha256": digest,
            }
        )
        for set_name, make in GOLDEN_SETS.items():
            x = make(f.dtype)
            input_rel = f"inputs/{f.name}/{set_name}.f32.bin"
            _write(out / input_rel, _f32_bytes(x))
            for profile in profiles:
                expected_rel = f"expected/{profile}/{f.name}/{set_name}.u8.bin"
                digest = _write(out / expected_rel, cast_codes(x, f.dtype, profile).numpy().tobytes())
                lines.append(
                    {
                        "kind": "encode",
                        "profile": profile,
                        "format": f.name,
                        "set": set_name,
                        "count": x.numel(),
                        "input": input_rel,
                        "expected": expected_rel,
                        "result": f"{profile}/{f.name}/{set_name}.u8.bin",
                        "sha256": digest,
                    }
                )
    (out / "manifest.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (out / "CONTRACT.md").write_text(_CONTRACT.format(count="n"))
    return len(lines)


@dataclass
class FileCheck:
    """Outcome of one manifest line: status "pass", "fail" or "missing", and the first differences."""

    result: str
    status: str
    count: int
    mismatches: int = 0
    first: tuple[str, ...] = ()
    error: str = ""

    def __str__(self) -> str:
        head = f"{self.status.upper():7s} {self.result}"
        if self.status == "fail":
            head += f": {self.error or f'{self.mismatches} of {self.count} differ'}"
        return "\n".join([head, *(f"    {line}" for line in self.first)])


def _check_encode(entry: dict, golden: Path, got: bytes) -> FileCheck:
    n = entry["count"]
    want = np.frombuffer((golden / entry["expected"]).read_bytes(), dtype=np.uint8)
    have = np.frombuffer(got, dtype=np.uint8)
    inputs = np.frombuffer((golden / entry["input"]).read_bytes(), dtype="<u4")
    bad = np.flatnonzero(want != have)
    first = tuple(
        f"index {i}: input {float(inputs[i : i + 1].view('<f4')[0])!r} (bits {int(inputs[i]):#010x}): "
        f"expected {int(want[i]):#04x}, got {int(have[i]):#04x}"
        for i in bad[:_MAX_REPORTED]
    )
    return FileCheck(entry["result"], "fail" if bad.size else "pass", n, int(bad.size), first)


def _check_decode(entry: dict, golden: Path, got: bytes) -> FileCheck:
    want = np.frombuffer((golden / entry["expected"]).read_bytes(), dtype="<f4")
    have = np.frombuffer(got, dtype="<f4")
    same = (want.view("<u4") == have.view("<u4")) | (np.isnan(want) & np.isnan(have))
    bad = np.flatnonzero(~same)
    first = tuple(
        f"code {int(c):#04x}: expected {float(want[c])!r}, got {float(have[c])!r}" for c in bad[:_MAX_REPORTED]
    )
    return FileCheck(entry["result"], "fail" if bad.size else "pass", 256, int(bad.size), first)


def verify_results(golden: Path, results: Path) -> list[FileCheck]:
    """Check every result file a vendor wrote under ``results`` against the golden vectors in ``golden``."""
    golden, results = Path(golden), Path(results)
    checks = []
    for line in (golden / "manifest.jsonl").read_text().splitlines():
        entry = json.loads(line)
        path = results / entry["result"]
        width = 4 if entry["kind"] == "decode" else 1
        if not path.is_file():
            checks.append(FileCheck(entry["result"], "missing", entry["count"]))
            continue
        expected = golden / entry["expected"]
        if not expected.is_file() or _digest(expected.read_bytes()) != entry["sha256"]:
            # A damaged golden set would make every verdict meaningless: say so instead of comparing against it.
            checks.append(
                FileCheck(
                    entry["result"],
                    "fail",
                    entry["count"],
                    error=f"golden file {entry['expected']} is missing or does not match its sha256",
                )
            )
            continue
        got = path.read_bytes()
        if len(got) != width * entry["count"]:
            checks.append(
                FileCheck(
                    entry["result"],
                    "fail",
                    entry["count"],
                    error=f"{len(got)} bytes, expected {width * entry['count']}",
                )
            )
            continue
        check = _check_decode if entry["kind"] == "decode" else _check_encode
        checks.append(check(entry, golden, got))
    return checks
