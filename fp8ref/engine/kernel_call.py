"""Calling a kernel under test: interpreter warnings filtered, its traceback kept, its outputs checked before use.

A wrong kernel is exactly what ``compare`` exists for, so nothing a kernel returns may crash the comparison: every
problem with the call itself (an exception, a non-tensor, an output on another device or sharing memory with an
input, a write into an input) becomes a (category, text) pair that the Report counts under that category.
"""

from __future__ import annotations

import contextlib
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

__all__ = ["Problem", "call_kernel", "check_outputs", "kernel_traceback", "quiet_kernel_warnings"]

#: (category, readable text); the categories are those of fp8ref.engine.categories.STRUCTURAL.
Problem = tuple[str, str]

#: numpy's floating-point warnings. The Triton interpreter evaluates kernels in numpy, which warns on inf * 0 and on
#: NaN compares ("invalid value encountered in multiply"): the "special" inputs do that on purpose, and the bytes,
#: not the warnings, are what the engine checks.
_FP_WARNINGS = r"(invalid value|overflow|divide by zero|underflow) encountered"

_ENGINE_DIR = Path(__file__).resolve().parent
_CONTRACTS_FILE = _ENGINE_DIR.parent / "contracts.py"


@contextlib.contextmanager
def quiet_kernel_warnings() -> Iterator[None]:
    """Silence numpy's floating-point RuntimeWarnings for the duration of a kernel call (other warnings pass)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_FP_WARNINGS, category=RuntimeWarning)
        yield


def kernel_traceback(exc: BaseException) -> str:
    """The traceback of an exception a kernel raised, starting at the first frame outside the engine (the whole
    traceback when every frame is the engine's: then the engine raised, and that is what to see)."""
    tb = exc.__traceback__
    while tb is not None and _is_engine_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def _is_engine_frame(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.parent == _ENGINE_DIR or path == _CONTRACTS_FILE


def _storage_span(t: torch.Tensor) -> tuple[torch.device, int, int] | None:
    if t.device.type == "meta":
        return None
    try:
        storage = t.untyped_storage()
    except Exception:  # sparse and other storage-less layouts share no dense memory
        return None
    if storage.nbytes() == 0:
        return None
    return t.device, storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    sa, sb = _storage_span(a), _storage_span(b)
    return sa is not None and sb is not None and sa[0] == sb[0] and sa[1] < sb[2] and sb[1] < sa[2]


def _same_device(actual: torch.device, expected: torch.device) -> bool:
    if actual.type != expected.type:
        return False
    return expected.index is None or actual.index is None or actual.index == expected.index


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def check_outputs(
    out: object,
    xs: Sequence[torch.Tensor],
    originals: Sequence[torch.Tensor],
    offs: torch.Tensor | None,
    expected_offs: Sequence[int] | None,
    device: torch.device,
) -> tuple[tuple[torch.Tensor, ...] | None, list[Problem]]:
    """What one kernel call returned, copied to the CPU, and what it did wrong besides its values.

    Never raises on anything the kernel returned. The outputs are None when they cannot be compared at all (not
    tensors, or on a device their bytes cannot be read from); the problems then say why.

    Args:
        out: the kernel's return value.
        xs: the inputs the kernel received (on ``device``).
        originals: CPU copies of ``xs`` made before the call (a difference is "input_written").
        offs: the offsets tensor the kernel received (jagged ops), or None.
        expected_offs: the values ``offs`` held before the call (jagged ops), or None.
        device: where the kernel was asked to run.
    """
    problems: list[Problem] = []
    if isinstance(out, torch.Tensor):
        outputs: tuple = (out,)
    elif isinstance(out, tuple | list):
        outputs = tuple(out)
    else:
        return None, [("wrong_return", f"the kernel returned a {type(out).__name__}, not a tuple of tensors")]
    bad = [(i, type(t).__name__) for i, t in enumerate(outputs) if not isinstance(t, torch.Tensor)]
    if bad:
        return None, [("wrong_return", f"output {i} is a {name}, not a tensor") for i, name in bad]
    sparse = [(i, t.layout) for i, t in enumerate(outputs) if t.layout != torch.strided]
    if sparse:  # no strides, no bytes in place: nothing the op's contract describes
        return None, [("wrong_return", f"output {i} has layout {layout}, not a dense tensor") for i, layout in sparse]
    inputs = [*xs, *([offs] if offs is not None else [])]
    for i, t in enumerate(outputs):
        if not _same_device(t.device, device):
            problems.append(("wrong_device", f"output {i} is on {t.device}, the inputs on {device}"))
        for j, x in enumerate(inputs):
            if _overlaps(t, x):
                what = f"input {j}" if j < len(xs) else "offs"
                problems.append(("output_aliases_input", f"output {i} shares memory with {what}"))
    problems += [
        ("input_written", f"the kernel wrote into input {i}")
        for i, (x, orig) in enumerate(zip(xs, originals))
        if not torch.equal(_bytes(x), _bytes(orig))
    ]
    if offs is not None and expected_offs is not None and offs.cpu().tolist() != list(expected_offs):
        problems.append(("input_written", "the kernel wrote into offs"))
    copies = []
    for i, t in enumerate(outputs):
        try:
            # copy=True: a kernel returning a cached buffer must not let the second run overwrite the first.
            copies.append(t.detach().to("cpu", copy=True))
        except Exception as exc:  # e.g. a meta tensor: it has no bytes to compare
            problems.append(("wrong_device", f"output {i} on {t.device} cannot be read: {type(exc).__name__}"))
            return None, problems
    return tuple(copies), problems


def call_kernel(call: Callable[[], object]) -> object:
    """``call()`` with numpy's floating-point warnings silenced (the Triton interpreter's)."""
    with quiet_kernel_warnings():
        return call()
