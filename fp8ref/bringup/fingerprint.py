"""The environment fingerprint: software versions, device, Triton backend, and the observed profile of each cast path.

Everything here is read, never set: the certificate must describe the stack as the user runs it.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys

import torch

from fp8ref.backends import CastPath, kernel_backend
from fp8ref.formats import fmt

__all__ = ["cast_profiles", "environment"]


def _driver_version() -> str | None:
    """The GPU driver version from nvidia-smi / rocm-smi, or None (no GPU, or the tool is absent)."""
    for cmd in (
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        ["rocm-smi", "--showdriverversion", "--csv"],
    ):
        if shutil.which(cmd[0]) is None:
            continue
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        if lines:
            return lines[-1].split(",")[-1].strip()
    return None


def _device_info(device: torch.device) -> dict:
    if device.type == "cpu":
        return {
            "type": "cpu",
            "name": platform.processor() or platform.machine(),
            "arch": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        }
    props = torch.cuda.get_device_properties(device)
    arch = props.gcnArchName if torch.version.hip else f"sm_{props.major}{props.minor}"
    return {
        "type": device.type,
        "index": device.index,
        "name": props.name,
        "arch": arch,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "count": torch.cuda.device_count(),
    }


def environment(device: torch.device) -> dict:
    """Versions, device and kernel backend of this process (the backend through fp8ref.backends)."""
    backend = kernel_backend().describe(device)
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        **dict(backend.versions),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "driver": _driver_version() if device.type == "cuda" else None,
        "device": _device_info(device),
        "backend": backend.as_json(),
        "interpreter": backend.interpreter,
    }


def cast_profiles(paths: list[CastPath], device: torch.device) -> dict[str, dict[str, dict]]:
    """{path name: {format name: observed profile}} via fp8ref.profiles.detect_profile on each path's encoder.

    An observed profile is ``{"profile", "matching", "nearest", "differences", "summary"}`` (fp8ref.profiles.
    ProfileMatch as JSON): ``profile`` is None when the path matches no named profile, and ``nearest`` then names
    the closest one.
    """
    from fp8ref.profiles import detect_profile

    observed: dict[str, dict[str, dict]] = {}
    for path in paths:
        observed[path.name] = {}
        for fp8_dtype in path.fp8_dtypes:
            match = detect_profile(lambda x, p=path, d=fp8_dtype: p.encode(x, d).view(d), fp8_dtype, device=device)
            observed[path.name][fmt(fp8_dtype).name] = {
                "profile": match.name,
                "matching": list(match.matching),
                "nearest": match.nearest,
                "differences": [str(d) for d in match.differences],
                "summary": str(match),
            }
    return observed
