"""Output poisoning: find elements a kernel never writes, and writes that land outside its outputs.

Ops allocate and return their own outputs (STYLE: functional ops), so the caller cannot hand them a pre-filled buffer.
Instead, for the duration of one kernel call, every uninitialised allocator (``_ALLOCATORS``: torch.empty,
empty_like, empty_strided, empty_permuted, Tensor.new_empty, new_empty_strided) returns a tensor whose every byte is
a poison byte. The engine calls the kernel twice, with two different poison bytes (0xFF then 0x7E): an element that
holds the poison of its own run both times was never written. One run cannot tell: 0x7E is e4m3fn's 448 and 0xFF
one of its NaNs, both values a kernel may legitimately write; no value is written as 0xFF in one run and 0x7E in the
other by a deterministic kernel.

Redzones: each such tensor is a window in the middle of a larger buffer, with poisoned redzones before and after it
(``redzone_bytes``). A kernel that stores past either end of an output (a mask off by one, a grid launched with the
wrong width) writes into a redzone instead of into whatever the allocator placed next to the output, which is how
such a bug crashed the Triton interpreter ("malloc(): smallbin double linked list corrupted", issue #10). After the
call, ``Allocation.out_of_bounds`` reads both redzones back: every byte that no longer holds the poison is an
out-of-bounds write. The Triton interpreter copies a CPU argument's whole storage and writes it back, and a GPU
kernel stores through raw pointers, so both land in the redzone; a write further away than the redzone is not
caught (and may still corrupt memory).

Why not pre-fill the CUDA caching allocator: which cached block the next allocation gets is not specified, and the
CPU (interpreter) path has no caching allocator at all. Patching the allocation functions works on every device.
Limitation: a kernel that allocates through an alias bound before the call (``from torch import empty``) or with
``torch.zeros``/``torch.full`` is not poisoned; its unwritten elements then read as those values and are reported as
ordinary mismatches, and its out-of-bounds writes are not caught.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from fp8ref.triton_env import use_interpreter_for_cpu

__all__ = [
    "MAX_REDZONE",
    "POISON_BYTES",
    "Allocation",
    "OutOfBounds",
    "out_of_bounds_writes",
    "padded_copy",
    "poisoned_allocations",
    "redzone_bytes",
    "unwritten_mask",
]

#: The poison byte of the first and of the second run.
POISON_BYTES: tuple[int, int] = (0xFF, 0x7E)

#: Redzones are multiples of this: the window then starts as aligned as the allocator's own blocks (the CUDA caching
#: allocator hands out 512-byte aligned blocks; Triton specializes kernels on 16-byte pointer alignment, so a
#: misaligned output could take another code path than in production).
_ALIGN = 512
#: Smallest redzone: a tail mask off by one block of up to 4096 bytes still lands inside it.
_MIN_REDZONE = 4096


#: Largest redzone the engine asks for: 256 MiB on each side of each output bounds the memory a comparison at
#: production shapes takes; a wild write further out than that is not caught.
MAX_REDZONE = 256 << 20


def redzone_bytes(nbytes: int, at_least: int = 0) -> int:
    """Size of each redzone around an allocation of ``nbytes``: at least the allocation itself, at least
    ``at_least``, at least 4 KiB, rounded up to 512 bytes."""
    size = max(nbytes, at_least, _MIN_REDZONE)
    return -(-size // _ALIGN) * _ALIGN


@dataclass(frozen=True)
class OutOfBounds:
    """Bytes written outside one poisoned allocation.

    Attributes:
        what: which tensor ("output 2", or "temporary (3, 4) float32" for one the kernel did not return).
        nbytes: how many redzone bytes changed.
        offsets: the first changed byte offsets relative to the tensor's first byte (negative: before it; at least
            the tensor's size in bytes: after its end).
        size: the tensor's storage size in bytes.
    """

    what: str
    nbytes: int
    offsets: tuple[int, ...]
    size: int

    def __str__(self) -> str:
        where = ", ".join(str(o) for o in self.offsets)
        return (
            f"{self.what}: {self.nbytes} byte(s) written outside its {self.size} bytes, at byte offsets {where}"
            f"{', ...' if self.nbytes > len(self.offsets) else ''}"
        )


@dataclass
class Allocation:
    """One poisoned allocation: the tensor the kernel got and the buffer around it."""

    tensor: torch.Tensor
    buffer: torch.Tensor  # uint8: redzone, the tensor's storage, redzone
    redzone: int
    byte: int

    def out_of_bounds(self, what: str, max_offsets: int = 4) -> OutOfBounds | None:
        """What was written into the redzones, or None when both still hold the poison."""
        size = self.buffer.numel() - 2 * self.redzone
        before, after = self.buffer[: self.redzone], self.buffer[self.redzone + size :]
        if all(_holds_only(zone, self.byte) for zone in (before, after)):
            return None
        changed = torch.cat(
            [(before != self.byte).nonzero().flatten() - self.redzone, (after != self.byte).nonzero().flatten() + size]
        )
        return OutOfBounds(what, changed.numel(), tuple(changed[:max_offsets].tolist()), size)


def _holds_only(zone: torch.Tensor, byte: int) -> bool:
    """Whether every byte of ``zone`` is ``byte``: one min/max pass (2x faster than ``(zone != byte).any()`` on 8 MB,
    this 2-core CPU, torch 2.13), the common case of a kernel that stays in bounds."""
    if zone.numel() == 0:
        return True
    lo, hi = torch.aminmax(zone)
    return int(lo) == byte == int(hi)


def _redzoned(t: torch.Tensor, byte: int, record: list[Allocation], empty, at_least: int) -> torch.Tensor:
    """``t``'s twin (same size, strides, dtype, device) placed between two poisoned redzones."""
    nbytes = t.untyped_storage().nbytes()
    rz = redzone_bytes(nbytes, at_least)
    buffer = empty(2 * rz + nbytes, dtype=torch.uint8, device=t.device)
    buffer.fill_(byte)
    twin = empty(0, dtype=t.dtype, device=t.device)
    twin.set_(buffer.untyped_storage(), rz // t.element_size(), t.size(), t.stride())
    if t.requires_grad:
        twin.requires_grad_(True)
    record.append(Allocation(twin, buffer, rz, byte))
    return twin


def padded_copy(x: torch.Tensor, device: torch.device | str, redzone: int = 0) -> Allocation:
    """A copy of input ``x`` on ``device`` (same sizes and strides) between zero-filled redzones.

    A kernel reading past an input then reads zeros from memory the engine owns instead of whatever the allocator
    placed next to it (in the Triton interpreter such a read goes through a raw pointer and can fault), and a kernel
    writing past it is caught like a write past an output (``Allocation.out_of_bounds`` with byte 0).
    """
    nbytes = x.numel() and (sum((n - 1) * st for n, st in zip(x.shape, x.stride())) + 1) * x.element_size()
    rz = redzone_bytes(nbytes, min(redzone, MAX_REDZONE))
    buffer = torch.zeros(2 * rz + nbytes, dtype=torch.uint8, device=device)
    twin = torch.empty(0, dtype=x.dtype, device=device)
    twin.set_(buffer.untyped_storage(), rz // x.element_size(), x.size(), x.stride())
    twin.copy_(x)
    return Allocation(twin, buffer, rz, 0)


def _poisoning(alloc, byte: int, record: list[Allocation], empty, at_least: int):
    @functools.wraps(alloc)
    def poisoned(*args, **kwargs):
        t = alloc(*args, **kwargs)
        if not isinstance(t, torch.Tensor) or t.device.type == "meta" or t.layout != torch.strided:
            return t  # no bytes to poison (sparse layouts have no single storage)
        if t.untyped_storage().nbytes() == 0:
            return t
        if type(t) is not torch.Tensor or kwargs.get("pin_memory") or "out" in kwargs:
            # Tensor subclasses (fake tensors while tracing), pinned memory, out=: poisoned, but no redzone.
            t.untyped_storage().fill_(byte)
            return t
        return _redzoned(t, byte, record, empty, at_least)

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
def poisoned_allocations(byte: int, redzone: int = 0) -> Iterator[list[Allocation]]:
    """Within the block, uninitialised allocations are filled with ``byte`` (0..255) and sit between redzones.

    Args:
        byte: the poison.
        redzone: the least redzone size in bytes (each side; capped at MAX_REDZONE). A store grid sized for another
            tensor of the call overruns by up to that tensor's size, so the engine passes the size of the largest
            tensor of the call: the dual op's second half launched with the first half's width writes
            (N1 - N2) * Ktot bytes past q2 and G * (N1 - N2) words past s2.

    Yields:
        The list of allocations made in the block (filled as the block runs); read their redzones after it.
    """
    _index_torch_functions_for_dynamo()
    saved = {(owner, name): getattr(owner, name) for owner, name in _ALLOCATORS}
    record: list[Allocation] = []
    empty = saved[(torch, "empty")]
    for (owner, name), alloc in saved.items():
        setattr(owner, name, _poisoning(alloc, byte, record, empty, min(redzone, MAX_REDZONE)))
    try:
        yield record
    finally:
        for (owner, name), alloc in saved.items():
            setattr(owner, name, alloc)


def out_of_bounds_writes(record: list[Allocation], outputs: tuple[torch.Tensor, ...]) -> list[OutOfBounds]:
    """Every allocation of ``record`` whose redzones were written, named by its position among ``outputs``."""
    index = {}
    for i, t in enumerate(outputs):
        if isinstance(t, torch.Tensor) and t.device.type != "meta" and t.layout == torch.strided:
            index.setdefault(t.untyped_storage().data_ptr(), i)
    found = []
    for a in record:
        i = index.get(a.tensor.untyped_storage().data_ptr())
        what = f"output {i}" if i is not None else f"temporary {tuple(a.tensor.shape)} {a.tensor.dtype}"
        hit = a.out_of_bounds(what)
        if hit is not None:
            found.append(hit)
    return found


def unwritten_mask(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Elements holding the poison of their own run in both runs (compared per byte, any element size).

    Args:
        first: the output from the run poisoned with POISON_BYTES[0].
        second: the same output from the run poisoned with POISON_BYTES[1].
    """
    size = first.element_size()
    a = first.contiguous().view(torch.uint8).reshape(*first.shape, size)
    b = second.contiguous().view(torch.uint8).reshape(*second.shape, size)
    return ((a == POISON_BYTES[0]) & (b == POISON_BYTES[1])).all(dim=-1)
