"""Conformance building blocks: mismatch classification, the status rule, sweep chunks, the native-cast probe."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch

from fp8ref.bringup.cast_paths import CastPath
from fp8ref.bringup.conformance import F32_PATTERNS, classify_encode, f32_sweep_chunks, status_for
from fp8ref.bringup.progress import Progress
from fp8ref.profiles import cast_codes

E4M3 = torch.float8_e4m3fn


def _path(load_bearing: bool) -> CastPath:
    return CastPath("test", lambda x, d: x, lambda c, d: c, (E4M3,), load_bearing, "")


def _classify(values: list[float], got: list[int]):
    x = torch.tensor(values, dtype=torch.float32)
    want = cast_codes(x, E4M3, "torch-2.12-eager")
    return classify_encode(x, torch.tensor(got, dtype=torch.uint8), want, E4M3)


@pytest.mark.parametrize(
    ("value", "got", "category", "common"),
    [
        (-400.0, 0xFD, "rne_tie_flipped", True),  # midpoint of -384 (0xFC) and -416: RNE picks the even 0xFC
        (1.0, 0x39, "adjacent_code", True),
        (1.0, 0x50, "wrong_code", True),
        (0.0, 0x80, "signed_zero", True),
        (1.0, 0x7F, "spurious_nan", True),
        (500.0, 0x7F, "overflow", False),  # profiles disagree: saturate (2.12) vs NaN (2.11)
        (float("inf"), 0x7F, "inf_input", False),
        (float("nan"), 0x7E, "nan_input", True),  # every profile encodes +NaN as 0x7F; 0x7E is 448
        (-float("nan"), 0x7F, "nan_input", False),  # -NaN: 0xFF in torch, sign dropped (0x7F) by satfinite
    ],
)
def test_each_mismatch_gets_its_category_and_domain(value, got, category, common):
    categories, n_common = _classify([value], [got])
    assert list(categories) == [category]
    assert categories[category]["count"] == 1
    assert n_common == int(common)


def test_matching_codes_produce_no_category():
    x = torch.tensor([1.0, -400.0, float("nan")])
    want = cast_codes(x, E4M3, "torch-2.12-eager")
    assert classify_encode(x, want.clone(), want, E4M3) == ({}, 0)


@pytest.mark.parametrize(
    ("load_bearing", "mismatches", "common", "status"),
    [
        (True, 0, 0, "pass"),
        (True, 3, 0, "finding"),  # only overflow/inf/NaN differ: an unnamed profile, not a rounding error
        (True, 3, 1, "fail"),
        (False, 3, 3, "finding"),  # the kernels do not use this path
    ],
)
def test_status_is_fail_only_for_common_domain_errors_of_load_bearing_paths(load_bearing, mismatches, common, status):
    assert status_for(_path(load_bearing), mismatches, common) == status


@pytest.mark.parametrize(("mismatches", "common", "status"), [(0, 0, "pass"), (3, 0, "fail"), (3, 3, "fail")])
def test_a_path_the_kernels_require_a_profile_of_fails_on_any_mismatch(mismatches, common, status):
    # Kernels that leave saturation to the conversion rely on its overflow/inf/NaN behaviour too: a mismatch outside
    # the common domain is a failure there, not a finding.
    path = dataclasses.replace(_path(True), required_profile="satfinite")
    assert status_for(path, mismatches, common) == status


def test_gpu_sweep_chunks_cover_every_float32_pattern_once():
    chunks = f32_sweep_chunks(1 << 27)
    assert [c[0] for c in chunks] == list(range(0, F32_PATTERNS, 1 << 27))
    assert sum(c[1] for c in chunks) == F32_PATTERNS
    assert {c[2] for c in chunks} == {1}


def test_cpu_sample_is_strided_across_the_whole_pattern_space():
    ((first, count, stride),) = f32_sweep_chunks(1 << 20, sample=1 << 20)
    assert count == 1 << 20
    assert stride == 1 << 12
    assert first + stride * (count - 1) < F32_PATTERNS
    assert first % 2 == 1  # odd patterns: not only exact fp8 codes


def test_progress_writes_lines_not_carriage_returns_into_a_log():
    stream = io.StringIO()
    with Progress("sweep", 3, stream=stream) as bar:
        for _ in range(3):
            bar.advance()
    text = stream.getvalue()
    assert "\r" not in text
    assert text.splitlines()[0].startswith("sweep:   0%")
    assert text.splitlines()[-1].startswith("sweep: 100%")
    assert " 3/3 " in text.splitlines()[-1]


def test_disabled_progress_writes_nothing():
    stream = io.StringIO()
    with Progress("sweep", 3, enabled=False, stream=stream) as bar:
        bar.advance(3)
    assert stream.getvalue() == ""


@pytest.mark.interpreter
@pytest.mark.skipif(torch.cuda.is_available(), reason="the Triton interpreter runs only without a GPU here")
def test_interpreter_native_cast_flips_ties_away_from_zero_for_normals_and_toward_zero_for_subnormals():
    from fp8moe.kernels.native_cast import native_cast

    sub = 2.0**-9
    x = torch.tensor([1.0625, -400.0, 1.5 * sub, 3.5 * sub, 1.125])
    got = native_cast(x, E4M3).view(torch.uint8).tolist()
    rne = x.to(E4M3).view(torch.uint8).tolist()
    assert rne == [0x38, 0xFC, 0x02, 0x04, 0x39]
    # Measured here (triton 3.9 interpreter): normal ties away from zero, subnormal ties toward zero, exact
    # values exact. The kernels use the exact encoder in the interpreter for this reason (fp8moe.backend).
    assert got == [0x39, 0xFD, 0x01, 0x03, 0x39]


@pytest.mark.interpreter
@pytest.mark.skipif(torch.cuda.is_available(), reason="the Triton interpreter runs only without a GPU here")
def test_interpreter_native_decode_is_exact_on_finite_codes():
    from fp8moe.kernels.native_cast import native_decode

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = native_decode(codes.view(E4M3))
    want = codes.view(E4M3).to(torch.float32)
    finite = want.isfinite()
    assert torch.equal(got[finite].view(torch.int32), want[finite].view(torch.int32))


@pytest.mark.parametrize(("emulated", "status"), [("satfinite", "pass"), ("torch-2.12-eager", "fail")])
def test_fingerprint_fails_a_path_whose_profile_the_kernels_require_and_do_not_get(
    monkeypatch, emulated, status, device
):
    # A native cast the kernels leave saturation to must be `satfinite`: one that follows another named profile
    # (here torch's, which differs only on overflow / inf / NaN) is a failure, and it is checked against satfinite.
    from fp8ref.bringup import steps

    path = CastPath(
        "triton.native",
        lambda x, d: cast_codes(x.float(), d, emulated),
        lambda c, d: c.view(d).float(),
        (E4M3,),
        True,
        "test",
        required_profile="satfinite",
    )
    monkeypatch.setattr(steps, "cast_paths", lambda device, fp8_dtypes: [path])
    _, _, profiles, results = steps.fingerprint_steps(device, (E4M3,))  # the device the kernels run on
    assert profiles[("triton.native", "e4m3fn")] == ("satfinite", emulated == "satfinite")
    [step] = results
    assert step.status == status, step.note
