"""The backend's own fp8 conversions, unguarded: ``x.to(FP8)`` and ``q.to(f32)`` in Triton, nothing around them.

These are probes, not quantizers. The bring-up certificate fingerprints which named cast profile
(fp8ref.profiles) the backend's conversion follows and checks it exhaustively; the real kernels never call a raw
cast on unsaturated data (they clamp first, or use the exact encoder in the interpreter, fp8moe.backend). So the
input is passed through as it is: overflow, +-inf, NaN and ties reach the conversion and show its behaviour.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fp8moe.backend import backend_for, launch_device
from fp8moe.kernels._common import TL_FP8

__all__ = ["native_cast", "native_decode"]


def _block(device: torch.device) -> int:
    # The interpreter runs one numpy evaluation per program: one large block makes 2^16 elements take ~15 ms
    # (this machine, triton 3.9) instead of seconds with 1024-element programs.
    return 1 << 16 if device.type == "cpu" else 1024


@triton.jit
def _native_cast_kernel(x_ptr, q_ptr, n, FP8_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(q_ptr + offs, x.to(FP8_DTYPE), mask=mask)


@triton.jit
def _native_decode_kernel(q_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    q = tl.load(q_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, q.to(tl.float32), mask=mask)


def native_cast(x: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """The backend's raw f32 -> fp8 conversion of every element of ``x``: no scaling, no clamp, no NaN guard.

    Args:
        x: float32 tensor on the backend's device (CPU in the interpreter).
        fp8_dtype: a torch fp8 dtype the backend stores (``backend_for(x.device).fp8_dtypes``).

    Returns:
        A contiguous fp8 tensor of ``x``'s shape.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"native_cast takes float32 input (the conversion under test is f32 -> fp8), got {x.dtype}")
    backend_for(x.device).check_fp8_dtype(fp8_dtype)
    x = x.contiguous()
    q = torch.empty(x.shape, dtype=fp8_dtype, device=x.device)
    n = x.numel()
    if n:
        block = _block(x.device)
        with launch_device(x.device):
            _native_cast_kernel[(triton.cdiv(n, block),)](x, q, n, FP8_DTYPE=TL_FP8[fp8_dtype], BLOCK=block)
    return q


def native_decode(q: torch.Tensor) -> torch.Tensor:
    """The backend's raw fp8 -> f32 conversion of every element of ``q`` (an fp8 tensor), as float32."""
    backend_for(q.device).check_fp8_dtype(q.dtype)
    q = q.contiguous()
    y = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    n = q.numel()
    if n:
        block = _block(q.device)
        with launch_device(q.device):
            _native_decode_kernel[(triton.cdiv(n, block),)](q, y, n, BLOCK=block)
    return y
