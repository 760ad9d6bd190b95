"""Run independent work items on one device in this process, or spread over several GPUs, one process per GPU.

Work functions are named by "module:function" so spawned workers can import them; each takes (item, device) and
returns a picklable result. Items are dealt round-robin, so neighbouring (similar-cost) items land on different
GPUs. Results come back in item order, whatever order the workers finish in.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import queue
import traceback
from collections.abc import Callable, Sequence

import torch

from fp8ref.bringup.progress import Progress

__all__ = ["run_items"]


def _resolve(fn: str) -> Callable:
    module, name = fn.split(":")
    return getattr(importlib.import_module(module), name)


def _worker(fn: str, device_index: int, items: list[tuple[int, object]], out: mp.Queue) -> None:
    torch.cuda.set_device(device_index)
    device = torch.device("cuda", device_index)
    work = _resolve(fn)
    for i, item in items:
        try:
            out.put((i, work(item, device), None))
        except Exception:  # reported to the parent, which raises it with the worker's traceback
            out.put((i, None, traceback.format_exc()))


def run_items(
    fn: str, items: Sequence[object], device: torch.device, devices: Sequence[int], progress: Progress
) -> list[object]:
    """``[fn(item, device) for item in items]``, sharded over ``devices`` (CUDA indices) when there are several.

    Raises:
        RuntimeError: a worker's item raised; the message carries the worker's traceback.
    """
    if len(devices) <= 1:
        work = _resolve(fn)
        results = []
        for item in items:
            results.append(work(item, device))
            progress.advance()
        return results
    ctx = mp.get_context("spawn")  # CUDA cannot be re-initialised in a forked child
    out = ctx.Queue()
    indexed = list(enumerate(items))
    procs = [
        ctx.Process(target=_worker, args=(fn, d, indexed[k :: len(devices)], out), daemon=True)
        for k, d in enumerate(devices)
    ]
    for p in procs:
        p.start()
    results: list[object] = [None] * len(indexed)
    for _ in indexed:
        while True:
            try:
                i, result, error = out.get(timeout=5)
                break
            except queue.Empty:
                dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                if dead:
                    raise RuntimeError(f"bring-up worker died with exit code {dead[0].exitcode}") from None
        if error is not None:
            for p in procs:
                p.terminate()
            raise RuntimeError(f"bring-up worker failed on item {items[i]!r}:\n{error}")
        results[i] = result
        progress.advance()
    for p in procs:
        p.join()
    return results
