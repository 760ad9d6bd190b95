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
    max_of_amaxes,
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


@triton.jit
def _max_of_amaxes_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, max_of_amaxes(tl.load(a_ptr + offs), tl.load(b_ptr + offs)))


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
    # the f32 neighbours of EPS = 1e-12 (the clamp's edge), and random positive f32 bit patterns of every binade
    eps = torch.tensor(1e-12, dtype=torch.float32).view(torch.int32)
    near_eps = (eps + torch.arange(-3, 4, dtype=torch.int32)).view(torch.float32)
    patterns = torch.randint(0, 0x7F800000, (1 << 16,), generator=gen, dtype=torch.int32).view(torch.float32)
    specials = torch.tensor([0.0, 1e-13, 1e-12, math.inf, math.nan, 3.4e38, 2.0**-149, 448.0, 57344.0])
    amax = torch.cat([amax, near_eps, patterns, specials])
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


QUIET_NAN = 0x7FC00000


def _nan_patterns(dtype: torch.dtype) -> torch.Tensor:
    """NaNs of both signs with several payloads, in dtype."""
    if dtype == torch.float32:
        bits = torch.tensor([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], dtype=torch.int64).to(torch.int32)
        return bits.view(torch.float32)
    quiet, top = (0x7FC0, 0x7F81) if dtype == torch.bfloat16 else (0x7E00, 0x7C01)
    return torch.tensor([quiet, quiet | 0x8000, top, 0xFFFF], dtype=torch.int32).to(torch.int16).view(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "f16", "f32"])
def test_amax_helper_equals_torch_amax_and_returns_one_quiet_nan(dtype, device):
    # abs_max_keep_nan is an integer max of the sign-cleared bit patterns: its value must be torch's max |x| on
    # every mix of signs, zeros, subnormals, normals and infinities, and any NaN in a row gives the quiet NaN.
    g = torch.Generator().manual_seed(3)
    n = 64
    x = (torch.randn(48, n, generator=g) * torch.logspace(-40, 30, 48, base=2.0)[:, None]).to(dtype)
    tiny = torch.finfo(dtype).tiny
    # Zeros and subnormals only. bf16 subnormals only on a GPU: the interpreter widens them wrongly
    # (tests/test_interpreter_canary.py); there the row is signed zeros.
    sub = 0.0 if dtype == torch.bfloat16 and device.type == "cpu" else 1.0
    x[1, :4] = torch.tensor([-0.0, 0.0, -tiny / 4 * sub, tiny / 8 * sub]).to(dtype)
    x[1, 4:] = 0.0
    x[2, 7] = -math.inf
    x[3, 9] = math.inf
    x[4:8, 5] = _nan_patterns(dtype)
    x[8, 0] = -torch.finfo(dtype).max
    out = torch.empty(x.shape[0], device=device)
    _row_amax_kernel[(x.shape[0],)](x.to(device), out, N=n)
    got = out.cpu()
    expected = x.float().abs().amax(dim=1)
    nan_rows = expected.isnan()
    assert nan_rows.sum() == 4
    assert torch.equal(got[~nan_rows], expected[~nan_rows])
    assert (got[nan_rows].view(torch.int32) == QUIET_NAN).all(), [hex(v) for v in got[nan_rows].view(torch.int32)]


def test_amax_helper_on_every_bf16_pattern(device):
    # Row r holds 256 consecutive patterns: the integer order of |x|'s patterns must be the value order everywhere,
    # the NaN block (0x7F81..0x7FFF, 0xFF81..0xFFFF) included.
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(256, 256)
    out = torch.empty(256, device=device)
    _row_amax_kernel[(256,)](x.to(device), out, N=256)
    got = out.cpu()
    expected = x.float().abs().amax(dim=1)
    nan_rows = expected.isnan()
    assert int(nan_rows.sum()) == 2  # the rows of 0x7F00-0x7FFF and 0xFF00-0xFFFF
    # Every row's max is a normal number (0x0080 is the smallest), which the interpreter widens exactly too.
    assert torch.equal(got[~nan_rows], expected[~nan_rows])
    assert (got[nan_rows].view(torch.int32) == QUIET_NAN).all()


def test_combined_amaxes_return_one_quiet_nan(device):
    # PTX max.NaN would return 0x7FFFFFFF and a plain NaN-propagating max the operand's payload: the scale's NaN bits
    # must not depend on which part of a slice held the NaN (atomic vs reduction transpose, strict NaN tests).
    nans = _nan_patterns(torch.float32)
    a = torch.cat([nans, torch.tensor([1.0, 3.0, 0.0, math.inf])])
    b = torch.cat([torch.tensor([2.0, 0.0, math.inf, 1.0]), nans.flip(0)])
    out = torch.empty(8, device=device)
    _max_of_amaxes_kernel[(1,)](a.to(device), b.to(device), out, N=8)
    got = out.cpu()
    assert (got.view(torch.int32) == QUIET_NAN).all(), [hex(v) for v in got.view(torch.int32).tolist()]
    finite_a, finite_b = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.0])
    _max_of_amaxes_kernel[(1,)](
        torch.cat([finite_a, finite_a, finite_a, finite_a]).to(device),
        torch.cat([finite_b, finite_b, finite_b, finite_b]).to(device),
        out,
        N=8,
    )
    assert out.cpu().tolist() == [2.0, 3.0] * 4
