"""Assertions for tests that compare quantized outputs directly (the engine's ``compare`` explains; this asserts).

Raw bytes, never values with a tolerance: fp8 codes through ``view(torch.uint8)``, f32 scales through
``view(torch.int32)``. NaN compares as a class (any NaN code equals any NaN code) unless ``strict_nan``: the NaN sign
and payload differ across stacks (SPEC §3).
"""

from __future__ import annotations

import torch

from fp8ref.engine.categories import same_f32, same_fp8
from fp8ref.formats import FP8_DTYPES

__all__ = ["assert_same_bits", "same_bits"]


def same_bits(actual: torch.Tensor, expected: torch.Tensor, *, strict_nan: bool = False) -> torch.Tensor:
    """Elementwise: equal fp8 codes or f32 bit patterns (NaN as a class unless ``strict_nan``), on the CPU."""
    a, e = actual.detach().cpu(), expected.detach().cpu()
    if e.dtype in FP8_DTYPES:
        return same_fp8(a.view(torch.uint8), e.view(torch.uint8), e.dtype, strict_nan)
    if e.dtype == torch.float32:
        return same_f32(a, e, strict_nan)
    raise TypeError(f"same_bits compares fp8 codes or float32 scales, got {e.dtype}")


def assert_same_bits(
    actual: torch.Tensor, expected: torch.Tensor, *, strict_nan: bool = False, what: str = "output"
) -> None:
    """Same dtype, shape and strides (strides only when there are elements: an empty tensor has no layout) and the
    same bits everywhere. The message gives the count and the first differing indices and values."""
    assert (actual.dtype, tuple(actual.shape)) == (expected.dtype, tuple(expected.shape)), (
        f"{what}: {actual.dtype} {tuple(actual.shape)}, expected {expected.dtype} {tuple(expected.shape)}"
    )
    if expected.numel() == 0:
        return
    assert actual.stride() == expected.stride(), f"{what}: strides {actual.stride()}, expected {expected.stride()}"
    bad = ~same_bits(actual, expected, strict_nan=strict_nan)
    if bool(bad.any()):
        a, e = actual.detach().cpu(), expected.detach().cpu()
        if e.dtype in FP8_DTYPES:
            a, e = a.view(torch.uint8), e.view(torch.uint8)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} differ; first at {bad.nonzero()[:4].tolist()}: "
            f"{a[bad][:4].tolist()} vs expected {e[bad][:4].tolist()}"
        )
