"""The one switch that puts Triton kernels on the CPU: the interpreter, chosen before triton is imported.

Triton decides at import time whether its own @jit helpers (tl.max, ...) are interpreted; turning the interpreter on
afterwards leaves them unusable ("Cannot call @triton.jit'd outside of the scope of a kernel"). fp8ref never imports
triton, but things it imports can (torch._dynamo does), so every fp8ref entry point that may come first calls
:func:`use_interpreter_for_cpu`, and so does ``import fp8moe`` (fp8moe.backend). It changes where kernels run, never
what they compute. Only the environment variable is touched: this module imports nothing of Triton.
"""

from __future__ import annotations

import os
import sys

import torch

__all__ = ["interpreter_requested", "use_interpreter_for_cpu"]


def interpreter_requested() -> bool:
    """True when Triton is told to interpret kernels on the CPU (TRITON_INTERPRET set to anything but "" or "0")."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def use_interpreter_for_cpu(*, cpu_requested: bool = False) -> bool:
    """Turn the Triton interpreter on when kernels will run on the CPU; return whether it is on.

    It is turned on when there is no GPU (or ``cpu_requested``), unless TRITON_INTERPRET is already set in the
    environment (an explicit choice, kept) or triton is already imported (too late: the caller decides whether that
    is an error; ``import fp8moe`` raises a clear ImportError).

    Args:
        cpu_requested: kernels will run on CPU tensors although a GPU exists (``--device cpu``).
    """
    unset = "TRITON_INTERPRET" not in os.environ and "triton" not in sys.modules
    if unset and (cpu_requested or not torch.cuda.is_available()):
        os.environ["TRITON_INTERPRET"] = "1"
    return interpreter_requested()
