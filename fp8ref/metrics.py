"""Measures the engine reports with: dequantization, code distance, SQNR."""

from __future__ import annotations

import math

import torch

from fp8ref.formats import fmt

__all__ = ["code_distance", "dequantize", "sqnr"]


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """f32(q) / scale, with ``scale`` broadcast against ``q`` (SPEC §4: scale is the multiplier)."""
    return q.to(torch.float32) / scale


def code_distance(a: torch.Tensor, b: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """Steps between codes in value order (int64, signed b - a). -0 and +0 are 0 steps apart.

    Two NaN codes are 0 steps apart; a NaN code against a non-NaN code gives ``INT64_MAX``, so callers can tell
    "NaN vs number" apart from any finite distance.
    """
    rank = fmt(fp8_dtype).code_rank.to(a.device)
    ra = rank[a.view(torch.uint8).long()]
    rb = rank[b.view(torch.uint8).long()]
    both_nan = (ra < 0) & (rb < 0)
    one_nan = (ra < 0) ^ (rb < 0)
    dist = rb - ra
    dist = torch.where(both_nan, torch.zeros_like(dist), dist)
    return torch.where(one_nan, torch.full_like(dist, torch.iinfo(torch.int64).max), dist)


#: Elements per chunk of :func:`sqnr` (2^24: 128 MiB per float64 copy).
SQNR_CHUNK = 1 << 24


def sqnr(ref: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio in dB: 20*log10(||ref|| / ||ref - actual||), computed in float64.

    Total: it never raises, whatever ``actual`` holds (a wrong kernel's output is exactly when it is needed).
    Elements where ``ref`` is not finite are excluded (they carry no signal to measure). The edge cases, in order:

    - no finite reference element (or none at all): NaN, "nothing to measure";
    - ``actual`` NaN or +-inf where ``ref`` is finite (the noise is not finite): -inf, "no signal survives";
    - zero noise (identical on the finite reference elements, zero signal included): +inf;
    - zero signal with nonzero noise: -inf.

    Otherwise a finite number (the norms are taken in float64, where float32 data cannot overflow them). Memory
    stays bounded whatever the size: the norms are taken over chunks of :data:`SQNR_CHUNK` elements and combined
    (the norm of the chunks' norms), so a 10^9-element gradient needs about 0.5 GB beside its inputs, not 40.
    """
    ref_flat, act_flat = ref.detach().reshape(-1), actual.detach().reshape(-1)
    signals, noises, kept = [], [], torch.zeros((), dtype=torch.bool, device=ref.device)
    for start in range(0, ref_flat.numel(), SQNR_CHUNK):  # bounded memory: the norm of the chunks' norms
        ref64 = ref_flat[start : start + SQNR_CHUNK].to(torch.float64)
        act64 = act_flat[start : start + SQNR_CHUNK].to(torch.float64)
        keep = torch.isfinite(ref64)
        kept |= keep.any()
        signals.append(torch.linalg.vector_norm(torch.where(keep, ref64, 0.0)))
        noises.append(torch.linalg.vector_norm(torch.where(keep, ref64 - act64, 0.0)))
    if not bool(kept):
        return math.nan
    signal = torch.linalg.vector_norm(torch.stack(signals)).item()
    noise = torch.linalg.vector_norm(torch.stack(noises)).item()
    if not math.isfinite(noise):
        return -math.inf
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    ratio = signal / noise
    if ratio == 0.0:  # noise so much larger than the signal that the quotient underflows
        return -math.inf
    return 20.0 * math.log10(ratio)
