"""fp8ref.encode against three independent oracles: torch's cast, ml_dtypes, and the exact Fraction encoder.

torch is trusted only where its overflow policy cannot matter (clamped inputs, NaN compared as a class); ml_dtypes
and the Fraction oracle also pin down overflow, +-inf and NaN codes (ocp-nosat / every profile).
"""

from __future__ import annotations

import dataclasses
import itertools

import ml_dtypes
import numpy as np
import pytest
import torch

from fp8ref.encode import encode, encode_scalar_exact
from fp8ref.formats import all_formats
from fp8ref.profiles import PROFILES, code_differences
from fp8ref.vectors import all_bf16, all_fp16, fp32_edge_set, step_past_max

FORMATS = all_formats()
FORMAT_IDS = [f.name for f in FORMATS]
SOURCES = ("bf16", "fp16", "fp32-edge")


def _inputs(source: str, fp8_dtype: torch.dtype) -> torch.Tensor:
    if source == "bf16":
        return all_bf16()
    if source == "fp16":
        return all_fp16()
    return fp32_edge_set(fp8_dtype)


def _to_numpy(x: torch.Tensor) -> np.ndarray:
    """Same bits as a numpy array (numpy has no bfloat16; ml_dtypes provides it)."""
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def _ml_dtypes_codes(x: torch.Tensor, f) -> torch.Tensor:
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/overflow casts warn; their codes are what we test
        out = _to_numpy(x).astype(getattr(ml_dtypes, f"float8_{f.name}"))
    return torch.from_numpy(out.view(np.uint8).copy())


def _oracle_codes(x: torch.Tensor, f, **policy) -> torch.Tensor:
    return torch.tensor(
        [encode_scalar_exact(v, f.dtype, **policy) for v in x.to(torch.float64).tolist()], dtype=torch.uint8
    )


def assert_same_codes(x, expected, actual, f, *, nan_as_class, what):
    """Fail with the first differing input (value, bits, both codes) and the number of differences."""
    diffs = code_differences(x, expected, actual, f.dtype, nan_as_class=nan_as_class)
    assert not diffs, f"{what} ({f.name}): {len(diffs)} of {x.numel()} inputs differ, first: {diffs[0]}"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_encoder_equals_torch_cast_on_clamped_inputs(f, source):
    x = torch.clamp(_inputs(source, f.dtype), -f.max, f.max)  # clamp keeps NaN; overflow policy cannot matter
    assert_same_codes(
        x, x.to(f.dtype), encode(x, f.dtype), f, nan_as_class=True, what=f"torch .to() on clamped {source}"
    )


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_encoder_with_ocp_nosat_policy_equals_ml_dtypes_unclamped(f, source):
    x = _inputs(source, f.dtype)
    ours = encode(x, f.dtype, **dataclasses.asdict(PROFILES["ocp-nosat"].policy(f.dtype)))
    assert_same_codes(x, _ml_dtypes_codes(x, f), ours, f, nan_as_class=False, what=f"ml_dtypes on {source}")


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_encoder_equals_fraction_oracle_on_fp32_edge_set(f, profile):
    x = fp32_edge_set(f.dtype)
    policy = dataclasses.asdict(PROFILES[profile].policy(f.dtype))
    assert_same_codes(
        x, _oracle_codes(x, f, **policy), encode(x, f.dtype, **policy), f, nan_as_class=False, what="Fraction oracle"
    )


def _double_rounding_pairs(f) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (mid + d, mid - d) for every midpoint (both signs, top-of-range tie included), d = 1/8 f32 ulp.

    d is below half of either f32 gap at mid, so both round to exactly mid in float32, where ties-to-even then
    picks one side; rounded once from float64, mid + d goes up and mid - d goes down. Exactly one of each pair
    therefore changes code when rounded through float32 (provided overflow does not encode as max).
    """
    values = [f.decode(c) for c in range(f.max_code + 1)]
    mids = [(a + b) / 2 for a, b in itertools.pairwise(values)] + [(f.max + step_past_max(f)) / 2]
    mid = torch.tensor(mids, dtype=torch.float32)
    d = (torch.nextafter(mid, torch.full_like(mid, torch.inf)) - mid).to(torch.float64) / 8
    mid64 = torch.cat([mid, -mid]).to(torch.float64)
    d = torch.cat([d, -d])
    return mid64 + d, mid64 - d


@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_float64_is_rounded_once_where_float32_double_rounding_changes_the_code(f):
    policy = dataclasses.asdict(PROFILES["ocp-nosat"].policy(f.dtype))  # overflow is NaN/inf, never max
    up, down = _double_rounding_pairs(f)
    outside_f32 = torch.tensor([1e-300, -1e-300, 5e-324, -5e-324, 1e300, -1e300, torch.finfo(torch.float64).max])
    x = torch.cat([up, down, outside_f32.to(torch.float64)])
    once = encode(x, f.dtype, **policy)
    assert_same_codes(x, _oracle_codes(x, f, **policy), once, f, nan_as_class=False, what="f64 vs Fraction oracle")
    twice = encode(x.to(torch.float32), f.dtype, **policy)
    changed = once != twice
    n = up.numel()
    assert bool((changed[:n] ^ changed[n : 2 * n]).all()), "each midpoint must have exactly one discriminating input"


@pytest.mark.canary
@pytest.mark.parametrize("f", FORMATS, ids=FORMAT_IDS)
def test_torch_rounds_float64_through_float32(f):
    # SPEC §3: torch's f64 -> fp8 cast double-rounds. The day this fails, torch rounds once and the note can go.
    up, down = _double_rounding_pairs(f)
    x = torch.cat([up, down])
    x = x[x.abs() <= f.max]  # keep the top-of-range tie out: its result depends on torch's overflow policy
    via_f32 = encode(x.to(torch.float32), f.dtype)
    assert_same_codes(x, via_f32, x.to(f.dtype), f, nan_as_class=True, what="torch f64 cast vs f32 double rounding")
    assert bool((encode(x, f.dtype) != via_f32).any())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_encoder_keeps_shape_and_reads_strided_inputs(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(6, 10, generator=g) * 100).to(dtype).t()  # (10, 6), non-contiguous
    codes = encode(x, torch.float8_e4m3fn)
    assert codes.shape == (10, 6)
    assert torch.equal(codes, encode(x.contiguous(), torch.float8_e4m3fn))
    assert torch.equal(codes.flatten(), encode(x.flatten(), torch.float8_e4m3fn))


@pytest.mark.parametrize(
    ("fp8_dtype", "kwargs"),
    [
        (torch.float8_e4m3fn, {"overflow": "inf"}),
        (torch.float8_e5m2fnuz, {"infinity": "inf"}),
        (torch.float8_e4m3fn, {"overflow": "wrap"}),
        (torch.float8_e4m3fn, {"nan_code": 0xFF}),
        (torch.float8_e5m2, {"nan_code": 0x7C}),
        (torch.float8_e4m3fnuz, {"nan_code": 0x7F}),
    ],
    ids=["inf-without-inf", "fnuz-inf", "unknown-policy", "negative-nan-code", "inf-as-nan-code", "fnuz-nan-code"],
)
def test_encoder_rejects_impossible_policies(fp8_dtype, kwargs):
    with pytest.raises(ValueError, match=r"policy|nan_code|infinity"):
        encode(torch.zeros(1), fp8_dtype, **kwargs)
    with pytest.raises(ValueError, match=r"policy|nan_code|infinity"):
        encode_scalar_exact(0.0, fp8_dtype, **kwargs)


def test_encoder_rejects_integer_sources():
    with pytest.raises(TypeError, match="encode takes"):
        encode(torch.zeros(1, dtype=torch.int32), torch.float8_e4m3fn)
