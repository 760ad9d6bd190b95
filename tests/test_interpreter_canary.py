"""Canaries: the Triton interpreter's own fp32 -> fp8 conversion is still wrong, so Backend.exact_encode must stay;
and its bf16 -> f32 conversion still mangles subnormals.

In the interpreter (TRITON_INTERPRET=1, triton 3.6 and 3.9 on this machine) ``x.to(tl.float8e4nv)`` rounds ties away
from zero: -400.0, halfway between -384 (0xFC) and -416 (0xFD), becomes 0xFD where round-to-nearest-even (and torch)
give 0xFC. It also turns NaN into 0x7C (= 384, a number). fp8moe therefore casts with the integer encoder
(fp8moe.kernels._common.encode_fp8_bits) there. When this test fails, Triton fixed its interpreter: check the
conversion on all inputs, then drop exact_encode.
"""

from __future__ import annotations

import math

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU

# isort: split
import triton
import triton.language as tl

pytestmark = [pytest.mark.canary, pytest.mark.interpreter]


@triton.jit
def _native_cast_kernel(x_ptr, q_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(q_ptr + offs, tl.load(x_ptr + offs).to(tl.float8e4nv))


def _interpreter_cast_e4m3fn(values: list[float]) -> list[int]:
    if not fp8moe.backend.interpreter_requested():
        pytest.skip("the interpreter is off in this process (a GPU is present)")
    x = torch.tensor(values, dtype=torch.float32)
    q = torch.empty(len(values), dtype=torch.float8_e4m3fn)
    _native_cast_kernel[(1,)](x, q, N=len(values))
    return q.view(torch.uint8).tolist()


def test_interpreter_cast_still_rounds_a_tie_away_from_zero():
    [code, _] = _interpreter_cast_e4m3fn([-400.0, 0.0])
    assert code == 0xFD, (
        f"the interpreter now casts -400.0 to 0x{code:02X} (0xFC is round-to-nearest-even): Triton fixed its fp8 "
        "conversion; verify it on every input and remove Backend.exact_encode / _common.encode_fp8_bits"
    )


def test_interpreter_cast_still_turns_nan_into_a_number():
    [code, _] = _interpreter_cast_e4m3fn([math.nan, 0.0])
    assert code == 0x7C, (
        f"the interpreter now casts NaN to 0x{code:02X} (e4m3fn NaN is 0x7F): Triton fixed its fp8 conversion; "
        "verify it on every input and remove Backend.exact_encode / _common.encode_fp8_bits"
    )


@triton.jit
def _widen_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))


def test_interpreter_bf16_widening_still_mangles_subnormals():
    # No fp8 byte depends on it: a slice whose amax is a bf16 subnormal (< 1.2e-38) gets the EPS scale either way
    # (amax < 1e-12), and a bf16 subnormal times any scale (<= 448 / 1e-12) is below 6e-24, which rounds to a signed
    # zero with its sign kept. But the CPU tests cannot check amax values of bf16 subnormals (SPEC §12).
    if not fp8moe.backend.interpreter_requested():
        pytest.skip("the interpreter is off in this process (a GPU is present)")
    x = torch.tensor([1e-39, -5.9e-39, 1.0, 0.0], dtype=torch.bfloat16)
    y = torch.empty(4)
    _widen_kernel[(1,)](x, y, N=4)
    assert not torch.equal(y, x.float()), (
        "the interpreter now widens bf16 subnormals exactly: extend the amax tests of tests/test_kernel_helpers.py "
        "to bf16 subnormals and drop this quirk from SPEC §12"
    )
    assert y[2].item() == 1.0
    assert math.copysign(1.0, y[1].item()) == -1.0  # the sign survives, so q keeps -0 (0x80)
