"""The fingerprint and conformance steps of ``fp8ref bringup``, in the order the certificate lists them."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from fp8ref.bringup.cast_paths import CastPath, cast_paths
from fp8ref.bringup.conformance import ENCODE_SETS, check_decode, check_encode, classify_encode
from fp8ref.bringup.fingerprint import cast_profiles, environment
from fp8ref.bringup.results import StepResult
from fp8ref.bringup.sweep import f32_sweep
from fp8ref.formats import fmt
from fp8ref.profiles import cast_codes
from fp8ref.vectors import probe_vector

__all__ = ["conformance_steps", "fingerprint_steps"]

Profiles = dict[tuple[str, str], tuple[str, bool]]


def _divergence_step(path: CastPath, fp8_dtype: torch.dtype, observed: dict, device: torch.device) -> StepResult:
    """The profile detection as a step: pass on a named profile, else the probe differences, categorised.

    A path that matches no profile is a finding here; whether it is also a failure is decided by the conformance
    checks, which know the common domain.
    """
    name = fmt(fp8_dtype).name
    start = time.monotonic()
    x = probe_vector(fp8_dtype).to(device)
    categories, _ = classify_encode(
        x, path.encode(x, fp8_dtype), cast_codes(x, fp8_dtype, observed["nearest"]), fp8_dtype
    )
    kind = "native_cast_divergence" if path.name == "triton.native" else "torch_cast_divergence"
    categories = {f"{kind}: {cat}": entry for cat, entry in categories.items()}
    n = sum(c["count"] for c in categories.values())
    if observed["profile"]:
        note = f"matches profile {observed['profile']!r} on every probe"
    else:
        note = f"matches no named profile; nearest {observed['nearest']!r}. {path.name}: {path.why}"
    status = "pass" if observed["profile"] else "finding"
    required = path.required_profile
    if required is not None and observed["profile"] != required:
        status = "fail"
        note += f"; the kernels require {required!r} ({path.why})"
    return StepResult(
        step="fingerprint",
        name=f"fingerprint/{path.name}/{name}/cast_profile",
        status=status,
        checked=x.numel(),
        mismatches=n,
        categories=categories,
        duration_s=time.monotonic() - start,
        note=note,
        params={"path": path.name, "format": name, "profile": observed["profile"] or observed["nearest"]},
    )


def fingerprint_steps(
    device: torch.device, fp8_dtypes: tuple[torch.dtype, ...]
) -> tuple[dict, list[CastPath], Profiles, list[StepResult]]:
    """The fingerprint document, the cast paths, the profile each (path, format) is checked against, and steps."""
    paths = cast_paths(device, fp8_dtypes)
    observed = cast_profiles(paths, device)
    fingerprint = {**environment(device), "cast_profiles": observed}
    profiles: Profiles = {}
    steps = []
    for path in paths:
        for fp8_dtype in path.fp8_dtypes:
            obs = observed[path.name][fmt(fp8_dtype).name]
            checked_against = path.required_profile or obs["profile"] or obs["nearest"]
            profiles[(path.name, fmt(fp8_dtype).name)] = (checked_against, obs["profile"] == checked_against)
            steps.append(_divergence_step(path, fp8_dtype, obs, device))
    return fingerprint, paths, profiles, steps


def conformance_steps(
    paths: list[CastPath],
    profiles: Profiles,
    device: torch.device,
    devices: list[int],
    *,
    exhaustive: bool,
    show_progress: bool,
    guard: Callable[[str, Callable[[], list], bool], list],
) -> list[StepResult]:
    """Decode, the named encode sets, and the float32 sweep (or a skipped entry without --exhaustive)."""
    steps: list[StepResult] = []
    for path in paths:
        for fp8_dtype in path.fp8_dtypes:
            name = fmt(fp8_dtype).name
            profile, detected = profiles[(path.name, name)]
            prefix = f"conformance/{path.name}/{name}"
            steps += guard(
                f"{prefix}/decode_256", lambda p=path, d=fp8_dtype: [check_decode(p, d, device)], path.load_bearing
            )
            for set_name in ENCODE_SETS:
                steps += guard(
                    f"{prefix}/{set_name}",
                    lambda p=path, d=fp8_dtype, s=set_name, pr=profile, det=detected: [
                        check_encode(p, d, s, pr, det, device)
                    ],
                    path.load_bearing,
                )
            if not exhaustive:
                steps.append(
                    StepResult(
                        step="conformance",
                        name=f"{prefix}/f32_all",
                        status="skipped",
                        note="all 2^32 float32 inputs run with --exhaustive",
                        params={"path": path.name, "format": name, "check": "f32_all", "profile": profile},
                    )
                )
    if exhaustive:
        any_load_bearing = any(p.load_bearing for p in paths)
        steps += guard(
            "conformance/f32_sweep",
            lambda: f32_sweep(paths, profiles, device, devices, show_progress=show_progress),
            any_load_bearing,
        )
    return steps
