"""Output poisoning: find elements a kernel never writes.

Ops allocate and return their own outputs (STYLE: functional ops), so the caller cannot hand them a pre-filled buffer.
Instead, for the duration of one kernel call, every uninitialised allocator (``_ALLOCATORS``: torch.empty,
empty_like, empty_strided, empty_permuted, Tensor.new_empty, new_empty_strided) returns buffers whose every byte is a
poison byte. The engine calls the kernel twice, with two
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

from fp8ref.triton_env import use_interpreter_for_cpu

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


#: Every uninitialised allocator a kernel wrapper may call (fp8moe allocates strided fp8 outputs with
#: Tensor.new_empty_strided: missing it left 4 of the 6 ops unpoisoned, so an unwritten column passed as long as the
#: allocator handed back the previous call's correct bytes).
_ALLOCATORS: tuple[tuple[object, str], ...] = (
    (torch, "empty"),
    (torch, "empty_like"),
    (torch, "empty_strided"),
    (torch, "empty_permuted"),
    (torch.Tensor, "new_empty"),
    (torch.Tensor, "new_empty_strided"),
)


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
    saved = {(owner, name): getattr(owner, name) for owner, name in _ALLOCATORS}
    for (owner, name), alloc in saved.items():
        setattr(owner, name, _poisoning(alloc, byte))
    try:
        yield
    finally:
        for (owner, name), alloc in saved.items():
            setattr(owner, name, alloc)


def unwritten_mask(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Elements holding the poison of their own run in both runs (compared per byte, any element size).

    Args:
        first, second: the same output from the run poisoned with POISON_BYTES[0] and the one with POISON_BYTES[1].
    """
    size = first.element_size()
    a = first.contiguous().view(torch.uint8).reshape(*first.shape, size)
    b = second.contiguous().view(torch.uint8).reshape(*second.shape, size)
    return ((a == POISON_BYTES[0]) & (b == POISON_BYTES[1])).all(dim=-1)
