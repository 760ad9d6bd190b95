"""Where Triton kernels run when this process has no GPU: the interpreter, chosen before triton is imported.

Triton decides at import time whether its own @jit helpers (tl.max, ...) are interpreted; turning the interpreter on
afterwards leaves them unusable ("Cannot call @triton.jit'd outside of the scope of a kernel"). fp8ref never imports
triton, but things it imports can (torch._dynamo does), so every fp8ref entry point that may be first calls this.
It changes where kernels run, never what they compute.
"""

from __future__ import annotations

import os
import sys

import torch

__all__ = ["use_interpreter_for_cpu"]


def use_interpreter_for_cpu(*, cpu_requested: bool = False) -> None:
    """Set TRITON_INTERPRET=1 when kernels will run on the CPU (no GPU, or ``cpu_requested``), unless the environment
    already chooses or triton is already imported (then fp8moe raises its clear ImportError)."""
    if "TRITON_INTERPRET" in os.environ or "triton" in sys.modules:
        return
    if cpu_requested or not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
