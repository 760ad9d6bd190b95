"""compare never crashes on a wrong kernel: every way a kernel can misbehave gives a Report with a category.

Each test pins every input axis (a single call on a tiny shape), so the whole file runs in seconds on the CPU.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import fp8ref
from fp8ref import metrics, ops
from fp8ref.contracts import CONTRACTS
from fp8ref.engine.categories import CATEGORIES, CATEGORY_HELP, STRUCTURAL, FailPolicy
from fp8ref.metrics import sqnr

_OP = "rowwise_2d_scale_and_cast"
_PINNED = {
    "dtype": torch.bfloat16,
    "round_scales_to_power_of_2": False,
    "values": "normal",
    "layout": "row_major",
    "device": "cpu",
}


def _compare(kernel, shape=(4, 8), fp8_dtype=torch.float8_e4m3fn, **kwargs):
    return fp8ref.compare(kernel, shape, like=_OP, fp8_dtype=fp8_dtype, **{**_PINNED, **kwargs})


def _ref(x, fp8_dtype, pow2):
    return ops.rowwise_2d_scale_and_cast(x, fp8_dtype, pow2)


def _writes_inf(x, fp8_dtype=torch.float8_e5m2, round_scales_to_power_of_2=False):
    q, s = _ref(x, fp8_dtype, round_scales_to_power_of_2)
    codes = q.view(torch.uint8).clone()
    codes[:, 0] = 0x7C  # e5m2 +inf
    codes[:, 1] = 0xFF  # a NaN
    return codes.view(fp8_dtype), s


def test_inf_and_nan_outputs_give_a_report_with_minus_inf_sqnr():
    report = _compare(_writes_inf, fp8_dtype=torch.float8_e5m2)
    assert not report.ok
    assert report.n_fp8_mismatches == 8, report
    assert report.sqnr_kernel == ((-math.inf,),)
    assert "-inf" in report.to_json()


@pytest.mark.parametrize(
    ("ref", "actual", "expected"),
    [
        ([1.0, 2.0], [1.0, 2.0], math.inf),
        ([1.0, 2.0], [math.inf, 2.0], -math.inf),
        ([1.0, 2.0], [math.nan, 2.0], -math.inf),
        ([0.0, 0.0], [0.0, 1.0], -math.inf),
        ([0.0, 0.0], [0.0, 0.0], math.inf),
        ([math.inf, math.nan], [1.0, 1.0], math.nan),
        ([], [], math.nan),
        ([1e-200, 1e-200], [1e200, 1e200], -math.inf),
    ],
    ids=["identical", "inf", "nan", "zero-signal", "zero-both", "no-finite-ref", "empty", "ratio-underflow"],
)
def test_sqnr_is_total(ref, actual, expected):
    got = sqnr(torch.tensor(ref, dtype=torch.float64), torch.tensor(actual, dtype=torch.float64))
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_sqnr_over_chunks_equals_sqnr_in_one_piece(monkeypatch):
    """Chunked norms (bounded memory for 10^9-element gradients) give the one-piece value, edge cases included."""
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, generator=g, dtype=torch.float64)
    actual = ref + 1e-3 * torch.randn(1000, generator=g, dtype=torch.float64)
    ref[7] = math.inf  # excluded wherever it falls
    whole = sqnr(ref, actual)
    not_finite = actual.clone()
    not_finite[999] = math.nan  # in the last, partial chunk
    monkeypatch.setattr(metrics, "SQNR_CHUNK", 64)
    assert sqnr(ref, actual) == pytest.approx(whole, abs=1e-9)
    assert sqnr(ref, not_finite) == -math.inf
    assert math.isnan(sqnr(torch.full((200,), math.nan, dtype=torch.float64), torch.zeros(200, dtype=torch.float64)))


def _raises(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    scale = x.shape[0] / 0  # the user's own bug
    return scale


def test_an_exception_is_kernel_raised_with_its_traceback():
    report = _compare(_raises)
    assert report.failing == ("kernel_raised",)
    assert report.categories == {"kernel_raised": 1}
    assert report.error == "ZeroDivisionError: division by zero"
    assert "scale = x.shape[0] / 0" in report.traceback
    assert "comparator.py" not in report.traceback  # starts at the kernel, not inside the engine
    assert "scale = x.shape[0] / 0" in repr(report)


def _zero_input(x, q, s):
    x.zero_()
    return q, s


#: kind -> what a kernel returns, from its input x and the reference's (q, scales).
_RETURNS = {
    "none": lambda x, q, s: None,
    "float_scale": lambda x, q, s: (q, 1.0),
    "numpy": lambda x, q, s: (q, np.ones((x.shape[0], 1), dtype=np.float32)),
    "sparse": lambda x, q, s: (q, s.to_sparse()),
    "one_output": lambda x, q, s: (q,),
    "three_outputs": lambda x, q, s: (q, s, s),
    "shape": lambda x, q, s: (q[:, :-1], s),
    "dtype_q": lambda x, q, s: (q.view(torch.uint8), s),
    "dtype_scale": lambda x, q, s: (q, s.double()),
    "meta_device": lambda x, q, s: (q.to("meta"), s),
    "alias_input": lambda x, q, s: (q, x[:, :1]),  # the f32 input's first column as the (M, 1) scales: a view
    "writes_input": _zero_input,
}


def _bad_return(kind):
    def kernel(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
        q, s = _ref(x, fp8_dtype, round_scales_to_power_of_2)
        return _RETURNS[kind](x, q, s)

    kernel.__name__ = f"returns_{kind}"
    return kernel


@pytest.mark.parametrize(
    ("kind", "category"),
    [
        ("none", "wrong_return"),
        ("float_scale", "wrong_return"),
        ("numpy", "wrong_return"),
        ("sparse", "wrong_return"),
        ("one_output", "wrong_return"),
        ("three_outputs", "wrong_return"),
        ("shape", "shape_stride_dtype"),
        ("dtype_q", "shape_stride_dtype"),
        ("dtype_scale", "shape_stride_dtype"),
        ("meta_device", "wrong_device"),
        ("alias_input", "output_aliases_input"),
        ("writes_input", "input_written"),
    ],
)
def test_a_malformed_return_is_a_report_with_its_category(kind, category):
    dtype = torch.float32 if kind == "alias_input" else torch.bfloat16  # a scale-shaped f32 view of the input
    report = _compare(_bad_return(kind), dtype=dtype)
    assert not report.ok
    assert category in report.failing, report
    assert report.examples(category), report
    assert category in repr(report)
    assert report.repro()  # still replayable


def test_every_structural_category_has_help_and_fails_by_default():
    policy = FailPolicy.default()
    for name in STRUCTURAL:
        assert name in CATEGORIES
        assert CATEGORY_HELP[name]
        assert policy.fails(name)


def test_a_typo_in_like_names_the_unknown_op_and_lists_the_ops():
    with pytest.raises(ValueError, match=r"unknown op like='rowwise_2d_scale_and_cst'") as info:
        fp8ref.compare(_raises, (4, 8), like="rowwise_2d_scale_and_cst", device="cpu")
    assert all(op in str(info.value) for op in CONTRACTS)


def _numpy_warns(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    np.array([np.inf]) * np.array([0.0])  # what the Triton interpreter does on inf * 0: "invalid value encountered"
    return _ref(x, fp8_dtype, round_scales_to_power_of_2)


def test_numpy_floating_point_warnings_of_a_kernel_do_not_reach_the_user():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        report = _compare(_numpy_warns)
    assert report.ok, report
    assert not [w for w in seen if "encountered" in str(w.message)]
