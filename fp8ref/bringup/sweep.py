"""The float32 sweep: every one of the 2^32 patterns per (cast path, format) on a GPU, a labelled sample on the CPU.

The reference codes are computed on the same device as the cast (fp8ref.profiles.cast_codes is integer torch ops),
chunk by chunk; chunks are the work items sharded over GPUs.
"""

from __future__ import annotations

import time

import torch

from fp8ref.bringup.cast_paths import CastPath, cast_paths
from fp8ref.bringup.conformance import f32_chunk, f32_sweep_chunks, status_for
from fp8ref.bringup.progress import Progress
from fp8ref.bringup.results import StepResult, merge_categories
from fp8ref.bringup.shard import run_items
from fp8ref.formats import fmt

__all__ = ["GPU_CHUNK", "SAMPLE", "f32_sweep", "sweep_item"]

#: Patterns per chunk on a GPU: the reference's int64 temporaries (~15 live at once, 8 bytes each) stay near 16 GiB.
GPU_CHUNK = 1 << 27
#: Patterns sampled on the CPU: the interpreter and the reference encode 2^20 float32 in ~1 s here.
SAMPLE = 1 << 20


def sweep_item(item: tuple, device: torch.device) -> dict:
    """One chunk: item = (path name, format name, profile, (first, count, stride)); its result and wall time.

    Runs in shard workers, so the path is rebuilt here from its name (cast paths hold lambdas, which do not pickle).
    """
    path_name, format_name, profile, chunk = item
    start = time.monotonic()
    path = next(p for p in cast_paths(device, (fmt(format_name).dtype,)) if p.name == path_name)
    result = f32_chunk(path, fmt(format_name).dtype, profile, chunk, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {**result, "seconds": time.monotonic() - start}


def f32_sweep(
    paths: list[CastPath],
    profiles: dict[tuple[str, str], tuple[str, bool]],
    device: torch.device,
    devices: list[int],
    *,
    show_progress: bool,
) -> list[StepResult]:
    """One StepResult per (path, format): all 2^32 float32 patterns on a GPU, a strided sample of SAMPLE on the CPU.

    Args:
        paths: the cast paths to sweep, each over every fp8 format it offers (``path.fp8_dtypes``).
        profiles: (path name, format name) -> (profile to compare against, whether it was detected exactly).
        device: where the casts and the reference codes run; on a CUDA device the sweep covers all 2^32 patterns
            in chunks of GPU_CHUNK, elsewhere a strided sample of SAMPLE.
        devices: CUDA indices to shard over (empty or one: this process).
        show_progress: draw a progress bar over the chunks (on stderr).
    """
    on_gpu = device.type == "cuda"
    chunks = f32_sweep_chunks(GPU_CHUNK) if on_gpu else f32_sweep_chunks(SAMPLE, sample=SAMPLE)
    items, keys = [], []
    for path in paths:
        for fp8_dtype in path.fp8_dtypes:
            name = fmt(fp8_dtype).name
            profile, _ = profiles[(path.name, name)]
            for chunk in chunks:
                items.append((path.name, name, profile, chunk))
                keys.append((path, name))
    with Progress("f32 sweep", len(items), enabled=show_progress) as bar:
        results = run_items("fp8ref.bringup.sweep:sweep_item", items, device, devices, bar)
    merged: dict[tuple[str, str], dict] = {}
    for (path, name), r in zip(keys, results):
        m = merged.setdefault(
            (path.name, name), {"path": path, "categories": {}, "common": 0, "seconds": 0.0, "checked": 0}
        )
        merge_categories(m["categories"], r["categories"])
        m["checked"] += r["checked"]  # what the chunks really encoded, not what the sweep meant to
        m["common"] += r["common"]
        m["seconds"] += r["seconds"]
    steps = []
    check = "f32_all" if on_gpu else "f32_sample"
    for (path_name, name), m in merged.items():
        path = m["path"]
        profile, detected = profiles[(path_name, name)]
        n = sum(c["count"] for c in m["categories"].values())
        how = "detected" if detected else "nearest"
        scope = "all 2^32 float32 patterns" if on_gpu else f"a strided sample of {SAMPLE} of the 2^32 float32 patterns"
        steps.append(
            StepResult(
                step="conformance",
                name=f"conformance/{path_name}/{name}/{check}",
                status=status_for(path, n, m["common"]),
                checked=m["checked"],
                mismatches=n,
                categories=m["categories"],
                duration_s=m["seconds"],
                note=f"{scope}, against {profile!r} ({how})",
                params={"path": path_name, "format": name, "check": check, "profile": profile},
            )
        )
    return steps
