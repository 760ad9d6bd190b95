"""Output poisoning: find elements a kernel never writes.

Ops allocate and return their own outputs (STYLE: functional ops), so the caller cannot hand them a pre-filled buffer.
Instead, for the duration of one kernel call, ``torch.empty``, ``torch.empty_like``, ``torch.empty_strided`` and
``Tensor.new_empty`` return buffers whose every byte is a poison byte. The engine calls the kernel twice, with two
different poison bytes (0xFF then 0x7E): an element that holds the poison of its own run both times was never
written. One run cannot tell: 0x7E is e4m3fn's 448 and 0xFF one of its NaNs, both values a kernel may legitimately
write; no value is written as 0xFF in one run and 0x7E in the other by a deterministic kernel.

Why not pre-fill the CUDA caching allocator: which cached block the next allocation gets is not specified, and the
CPU (interpreter) path has no caching allocator at all. Patching the allocation functions works on every device.
Limitation: a kernel that allocates through an alias bound before the call (``from torch import empty``) or with
``torch.zeros``/``torch.full`` is not poisoned; its unwritten elements then read as those values and are reported as
ordinary mismatches.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

from fp8ref.engine.triton_env import use_interpreter_for_cpu

__all__ = ["POISON_BYTES", "poisoned_allocations", "unwritten_mask"]

#: The poison byte of the first and of the second run.
POISON_BYTES: tuple[int, int] = (0xFF, 0x7E)


def _fill(t: object, byte: int) -> None:
    if isinstance(t, torch.Tensor) and t.device.type != "meta" and t.untyped_storage().nbytes() > 0:
        t.untyped_storage().fill_(byte)


def _poisoning(alloc, byte: int):
    @functools.wraps(alloc)
    def poisoned(*args, **kwargs):
        t = alloc(*args, **kwargs)
        _fill(t, byte)
        return t

    return poisoned


@functools.cache
def _index_torch_functions_for_dynamo() -> None:
    """Let Dynamo build its identity index of torch's functions before any patch window.

    Dynamo builds that index (torch._dynamo.trace_rules) lazily, the first time something asks for it; if that is
    inside a patch window it records the wrappers, and every later torch.compile in the process fails on the real
    function ("Unsupported: ... builtin torch._VariableFunctionsClass.empty_strided", torch 2.13, seen after an fp8moe
    custom op ran poisoned). A private API, so its absence only skips the warm-up.
    """
    use_interpreter_for_cpu()  # importing torch._dynamo imports triton
    try:
        from torch._dynamo.trace_rules import get_torch_obj_rule_map
    except ImportError:
        return
    get_torch_obj_rule_map()


@contextlib.contextmanager
def poisoned_allocations(byte: int) -> Iterator[None]:
    """Within the block, uninitialised allocations are filled with ``byte`` (0..255)."""
    _index_torch_functions_for_dynamo()
    saved = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)
    torch.empty = _poisoning(saved[0], byte)
    torch.empty_like = _poisoning(saved[1], byte)
    torch.empty_strided = _poisoning(saved[2], byte)
    torch.Tensor.new_empty = _poisoning(saved[3], byte)
    try:
        yield
    finally:
        torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty = saved


def unwritten_mask(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Elements holding the poison of their own run in both runs (compared per byte, any element size).

    Args:
        first, second: the same output from the run poisoned with POISON_BYTES[0] and the one with POISON_BYTES[1].
    """
    size = first.element_size()
    a = first.contiguous().view(torch.uint8).reshape(*first.shape, size)
    b = second.contiguous().view(torch.uint8).reshape(*second.shape, size)
    return ((a == POISON_BYTES[0]) & (b == POISON_BYTES[1])).all(dim=-1)
