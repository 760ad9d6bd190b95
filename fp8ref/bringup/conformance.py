"""Conformance of each raw cast path against fp8ref under the profile the path was observed to follow.

Checks per (path, format): decode all 256 codes; encode every bf16 and every fp16 pattern, the float32 edge set and
the named tie/special probe (fp8ref.vectors); optionally every float32 pattern (GPU), in chunks. Mismatches are
classified, and each is marked as inside or outside the *common domain*: the inputs on which every named profile
(fp8ref.profiles.PROFILES) gives the same code, i.e. everything but overflow, infinities and NaN. A mismatch in the
common domain is a rounding error no stack is allowed; outside it the path is an unnamed profile.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from fp8ref.bringup.cast_paths import CastPath
from fp8ref.bringup.results import MAX_EXAMPLES, StepResult
from fp8ref.formats import fmt
from fp8ref.profiles import PROFILES, cast_codes
from fp8ref.vectors import all_bf16, all_fp16, fp32_edge_set, probe_vector

__all__ = [
    "ENCODE_SETS",
    "F32_PATTERNS",
    "check_decode",
    "check_encode",
    "classify_encode",
    "f32_chunk",
    "f32_sweep_chunks",
    "status_for",
]

F32_PATTERNS = 1 << 32

#: Named encode input sets: name -> (fp8_dtype -> CPU tensor).
ENCODE_SETS: dict[str, Callable[[torch.dtype], torch.Tensor]] = {
    "encode_bf16": lambda _: all_bf16(),
    "encode_fp16": lambda _: all_fp16(),
    "encode_fp32_edge": fp32_edge_set,
    "encode_probe": probe_vector,
}

_INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def _bits_hex(x: torch.Tensor) -> list[str]:
    width = 8 * x.element_size()
    return [f"{b % (1 << width):#0{width // 4 + 2}x}" for b in x.view(_INT_VIEW[x.dtype]).tolist()]


def _grid(fp8_dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Ascending distinct finite values of the format (float64)."""
    v = fmt(fp8_dtype).values
    return torch.unique(v[torch.isfinite(v)]).to(device)


def classify_encode(
    x: torch.Tensor, got: torch.Tensor, want: torch.Tensor, fp8_dtype: torch.dtype
) -> tuple[dict[str, dict], int]:
    """Categories of the inputs where two encodings differ, and how many of them lie in the common domain.

    Categories, first match wins: nan_input, inf_input, overflow (finite |x| > max), signed_zero,
    spurious_nan (a NaN code for a value that has a finite code), rne_tie_flipped (x is the exact midpoint of two
    neighbouring codes and the other one was chosen), adjacent_code (off by one code, not a tie), wrong_code.

    Args:
        x: inputs (float32/bfloat16/float16), any device.
        got: the path's uint8 codes, x's shape and device.
        want: the reference's uint8 codes, same shape and device.
        fp8_dtype: the format the codes belong to.
    """
    f = fmt(fp8_dtype)
    idx = (got != want).flatten().nonzero().flatten()
    if idx.numel() == 0:
        return {}, 0
    xs = x.flatten()[idx]
    g = got.flatten()[idx].long()
    w = want.flatten()[idx].long()
    v = xs.to(torch.float64)
    rank = f.code_rank.to(x.device)
    grid = _grid(fp8_dtype, x.device)
    pos = torch.searchsorted(grid, v.nan_to_num(0.0).clamp(-f.max, f.max)).clamp(1, grid.numel() - 1)
    tie = (grid[pos - 1] + grid[pos]) / 2 == v
    off_by_one = (rank[g] - rank[w]).abs() == 1
    nan_code = torch.zeros(256, dtype=torch.bool, device=x.device)
    nan_code[list(f.nan_codes)] = True
    rules = [
        ("nan_input", v.isnan()),
        ("inf_input", v.isinf()),
        ("overflow", v.abs() > f.max),
        ("signed_zero", ((g ^ w) == 0x80) & ((w & 0x7F) == 0)),
        ("spurious_nan", nan_code[g]),
        ("rne_tie_flipped", tie & off_by_one & (rank[g] >= 0)),
        ("adjacent_code", off_by_one & (rank[g] >= 0)),
        ("wrong_code", torch.ones_like(tie)),
    ]
    profile_codes = torch.stack([cast_codes(xs, fp8_dtype, p) for p in PROFILES])
    common = (profile_codes == profile_codes[0]).all(dim=0)
    categories: dict[str, dict] = {}
    taken = torch.zeros_like(tie)
    for name, hit in rules:
        hit = hit & ~taken
        taken |= hit
        count = int(hit.sum())
        if not count:
            continue
        first = hit.nonzero().flatten()[:MAX_EXAMPLES]
        examples = [
            {"input": val, "bits": bits, "expected": f"{e:#04x}", "got": f"{a:#04x}", "common_domain": c}
            for val, bits, e, a, c in zip(
                v[first].tolist(),
                _bits_hex(xs[first].cpu()),
                w[first].tolist(),
                g[first].tolist(),
                common[first].tolist(),
            )
        ]
        categories[name] = {"count": count, "examples": examples}
    return categories, int(common.sum())


def status_for(path: CastPath, mismatches: int, common_mismatches: int) -> str:
    """pass without mismatches; fail when a load-bearing path errs where every profile agrees, or anywhere when the
    kernels require a profile of it (CastPath.required_profile); else finding."""
    if mismatches == 0:
        return "pass"
    if path.required_profile is not None:
        return "fail"
    return "fail" if path.load_bearing and common_mismatches else "finding"


def _profile_note(path: CastPath, profile: str, detected: bool) -> str:
    if path.required_profile is not None:
        how = "the profile the kernels require"
    else:
        how = "the detected profile" if detected else "the nearest profile (the path matches no named profile)"
    return f"against {profile!r}, {how}; {path.name} is {'' if path.load_bearing else 'not '}load-bearing: {path.why}"


def check_decode(path: CastPath, fp8_dtype: torch.dtype, device: torch.device) -> StepResult:
    """Decode all 256 codes and compare the float32 bits with fp8ref.formats (any NaN equals any NaN).

    Decoding has one meaning per code, so every mismatch is in the common domain.
    """
    f = fmt(fp8_dtype)
    start = time.monotonic()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = path.decode(codes.to(device), fp8_dtype).cpu()
    want = f.values.to(torch.float32)
    both_nan = got.isnan() & want.isnan()
    differ = (got.view(torch.int32) != want.view(torch.int32)) & ~both_nan
    categories: dict[str, dict] = {}
    rules = [
        ("nan_code_decoded_as_number", want.isnan()),
        ("inf_code_decoded_as_finite", want.isinf()),
        ("signed_zero", want == 0),
        ("wrong_value", torch.ones_like(differ)),
    ]
    taken = torch.zeros_like(differ)
    for name, hit in rules:
        hit = hit & differ & ~taken
        taken |= hit
        if hit.any():
            first = hit.nonzero().flatten()[:MAX_EXAMPLES].tolist()
            examples = [
                {"code": f"{c:#04x}", "expected": repr(want[c].item()), "got": repr(got[c].item())} for c in first
            ]
            categories[name] = {"count": int(hit.sum()), "examples": examples}
    n = int(differ.sum())
    return StepResult(
        step="conformance",
        name=f"conformance/{path.name}/{f.name}/decode_256",
        status=status_for(path, n, n),
        checked=256,
        mismatches=n,
        categories=categories,
        duration_s=time.monotonic() - start,
        note=f"against fp8ref.formats; {path.name} is {'' if path.load_bearing else 'not '}load-bearing: {path.why}",
        params={"path": path.name, "format": f.name, "check": "decode_256"},
    )


def check_encode(
    path: CastPath, fp8_dtype: torch.dtype, set_name: str, profile: str, detected: bool, device: torch.device
) -> StepResult:
    """Encode one named input set (ENCODE_SETS) with ``path`` and compare codes with cast_codes under ``profile``."""
    f = fmt(fp8_dtype)
    start = time.monotonic()
    x = ENCODE_SETS[set_name](fp8_dtype).to(device)
    got = path.encode(x, fp8_dtype)
    want = cast_codes(x, fp8_dtype, profile)
    categories, common = classify_encode(x, got, want, fp8_dtype)
    n = sum(c["count"] for c in categories.values())
    return StepResult(
        step="conformance",
        name=f"conformance/{path.name}/{f.name}/{set_name}",
        status=status_for(path, n, common),
        checked=x.numel(),
        mismatches=n,
        categories=categories,
        duration_s=time.monotonic() - start,
        note=_profile_note(path, profile, detected),
        params={"path": path.name, "format": f.name, "check": set_name, "profile": profile},
    )


def f32_sweep_chunks(chunk: int, sample: int | None = None) -> list[tuple[int, int, int]]:
    """(first pattern, count, stride) work items covering all 2^32 float32 patterns, or a strided sample of them.

    Args:
        chunk: patterns per item (2^27 on a GPU: the reference's int64 temporaries then stay under ~20 GiB).
        sample: None for all patterns; else this many, evenly strided so every exponent and sign is visited.
    """
    if sample is None:
        return [(lo, min(chunk, F32_PATTERNS - lo), 1) for lo in range(0, F32_PATTERNS, chunk)]
    stride = F32_PATTERNS // sample
    # An odd offset so the sample is not just mantissa multiples of the stride (all of which are exact codes).
    offset = stride // 2 + 1
    return [(offset + lo * stride, min(chunk, sample - lo), stride) for lo in range(0, sample, chunk)]


def f32_chunk(path: CastPath, fp8_dtype: torch.dtype, profile: str, item: tuple[int, int, int], device) -> dict:
    """Encode one chunk of float32 patterns on ``device`` and classify mismatches; returns a mergeable dict."""
    first, count, stride = item
    patterns = first + stride * torch.arange(count, dtype=torch.int64, device=device)
    signed = torch.where(patterns >= 1 << 31, patterns - F32_PATTERNS, patterns)
    x = signed.to(torch.int32).view(torch.float32)
    got = path.encode(x, fp8_dtype)
    want = cast_codes(x, fp8_dtype, profile)
    categories, common = classify_encode(x, got, want, fp8_dtype)
    return {"checked": count, "categories": categories, "common": common}
