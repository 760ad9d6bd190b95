"""The shared @triton.jit helpers (fp8moe/kernels/_common.py) against their fp8ref twins, bit for bit.

Runs wherever Triton runs: through the interpreter on the CPU (exact encoder) and natively on a GPU (hardware cast),
with the same assertions.
"""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("fp8moe")  # before triton: turns the interpreter on when there is no GPU
import triton
import triton.language as tl

from fp8moe.backend import backend_for
from fp8moe.kernels._common import (
    _pow2_log2_rule,
    abs_max_keep_nan,
    fp8_constexprs,
    quantize,
    scale_from_amax,
)
from fp8ref.formats import all_formats, fmt
from fp8ref.scaling import amax_to_scale, round_scale_to_power_of_2, to_fp8_saturated

BLOCK = 4096


@triton.jit
def _quantize_kernel(
    x_ptr,
    q_ptr,
    scale,
    n,
    BLOCK: tl.constexpr,
    FP8_DTYPE: tl.constexpr,
    FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr,
    EMIN: tl.constexpr,
    FNUZ: tl.constexpr,
    ROUND_POW2: tl.constexpr,
    CAST_MODE: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(q_ptr + offs, quantize(x, scale, FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE), mask=mask)


@triton.jit
def _scale_kernel(amax_ptr, scale_ptr, n, BLOCK: tl.constexpr, FP8_MAX: tl.constexpr, ROUND_POW2: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(scale_ptr + offs, scale_from_amax(tl.load(amax_ptr + offs, mask=mask), FP8_MAX, ROUND_POW2), mask=mask)


@triton.jit
def _pow2_kernel(s_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _pow2_log2_rule(tl.load(s_ptr + offs, mask=mask)), mask=mask)


@triton.jit
def _row_amax_kernel(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    tl.store(out_ptr + row, abs_max_keep_nan(x, 0))


def _grid(n):
    return (triton.cdiv(n, BLOCK),)


def _assert_codes_equal(actual: torch.Tensor, expected: torch.Tensor, inputs: torch.Tensor) -> None:
    a, e = actual.cpu().view(torch.uint8), expected.view(torch.uint8)
    both_nan = torch.isnan(actual.cpu().float()) & torch.isnan(expected.float())
    bad = (a != e) & ~both_nan
    assert not bool(bad.any()), (
        f"{int(bad.sum())} codes differ; first inputs {inputs[bad][:4].tolist()}: "
        f"got {[hex(c) for c in a[bad][:4].tolist()]}, expected {[hex(c) for c in e[bad][:4].tolist()]}"
    )


@pytest.mark.parametrize("scale", [1.0, 3.0, 2.0**-20], ids=["s1", "s3", "s2^-20"])
@pytest.mark.parametrize("fp8_dtype", [f.dtype for f in all_formats()], ids=lambda d: fmt(d).name)
def test_quantize_helper_equals_reference_on_all_bf16_patterns(fp8_dtype, scale, device):
    backend = backend_for(device)
    if fp8_dtype not in backend.fp8_dtypes:
        pytest.skip(f"{fmt(fp8_dtype).name} not native on {backend.kind}/{backend.arch}")
    x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    q = torch.empty(x.shape, dtype=fp8_dtype, device=device)
    kw = fp8_constexprs(fp8_dtype, False, backend.cast_mode)
    _quantize_kernel[_grid(x.numel())](x.to(device), q, scale, x.numel(), BLOCK=BLOCK, **kw)
    _assert_codes_equal(q, to_fp8_saturated(x.float() * scale, fp8_dtype), x)


@pytest.mark.parametrize("pow2", [False, True], ids=["", "pow2"])
@pytest.mark.parametrize("fp8_dtype", [torch.float8_e4m3fn, torch.float8_e5m2fnuz], ids=lambda d: fmt(d).name)
def test_scale_helper_equals_amax_to_scale(fp8_dtype, pow2, device):
    gen = torch.Generator().manual_seed(3)
    amax = torch.exp2(torch.rand(20000, generator=gen, dtype=torch.float64) * 180 - 90).float()
    amax = torch.cat([amax, torch.tensor([0.0, 1e-13, 1e-12, math.inf, math.nan, 3.4e38, 2.0**-149])])
    scale = torch.empty_like(amax, device=device)
    _scale_kernel[_grid(amax.numel())](
        amax.to(device), scale, amax.numel(), BLOCK=BLOCK, FP8_MAX=fmt(fp8_dtype).max, ROUND_POW2=pow2
    )
    expected = amax_to_scale(amax, fp8_dtype, pow2)
    got = scale.cpu()
    bad = (got.view(torch.int32) != expected.view(torch.int32)) & ~(torch.isnan(got) & torch.isnan(expected))
    assert not bool(bad.any()), f"amax {amax[bad][:4].tolist()}: {got[bad][:4].tolist()} vs {expected[bad][:4]}"


def test_pow2_integer_rule_equals_reference_log2_rule_near_every_power_of_two(device):
    base = torch.ldexp(torch.ones(253), torch.arange(-125, 128)).float().view(torch.int32)
    s = (base[:, None] + torch.arange(-256, 257, dtype=torch.int32)[None, :]).flatten().view(torch.float32)
    s = torch.cat([s, torch.tensor([0.0, math.inf, math.nan, 447999985582080.0])])
    out = torch.empty_like(s, device=device)
    _pow2_kernel[_grid(s.numel())](s.to(device), out, s.numel(), BLOCK=BLOCK)
    expected = round_scale_to_power_of_2(s, "log2")
    got = out.cpu()
    bad = (got.view(torch.int32) != expected.view(torch.int32)) & ~torch.isnan(expected)
    assert not bool(bad.any()), f"scales {s[bad][:4].tolist()}: {got[bad][:4].tolist()} vs {expected[bad][:4].tolist()}"
    assert torch.isnan(got[-2])


def test_amax_helper_keeps_nan_that_triton_max_would_drop(device):
    x = torch.tensor(
        [[1.0, -5.0, 2.0, 0.0], [1.0, math.nan, -7.0, 0.0], [-math.inf, 1.0, 0.0, 0.0], [-0.0, -0.0, -0.0, -0.0]]
    )
    out = torch.empty(4, device=device)
    _row_amax_kernel[(4,)](x.to(device), out, N=4)
    got = out.cpu()
    assert got[0].item() == 5.0
    assert math.isnan(got[1].item())
    assert got[2].item() == math.inf
    assert got[3].view(torch.int32).item() == 0
