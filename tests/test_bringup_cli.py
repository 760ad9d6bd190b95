"""``fp8ref bringup`` end to end on the CPU: files, schema, the interpreter finding, and the exit status."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import fp8ref.spec
from fp8ref import ops
from fp8ref.bringup import certificate
from fp8ref.bringup.cli import main

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter run; GPUs get their own bring-up")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bringup")
    rc = main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(out), "--no-progress"])
    return rc, out, json.loads((out / "certificate.json").read_text())


def _step(doc: dict, name: str) -> dict:
    return next(s for s in doc["steps"] if s["name"] == name)


def test_quick_cpu_run_writes_both_files_and_exits_zero(quick_run):
    rc, out, doc = quick_run
    assert rc == 0
    assert (out / "certificate.md").read_text().startswith("# FP8 bring-up certificate")
    assert doc["summary"]["status"] == "pass_with_findings"
    assert doc["fingerprint"]["backend"]["kind"] == "interpreter"


def test_certificate_json_satisfies_its_schema(quick_run):
    _, _, doc = quick_run
    assert certificate.validate(doc) == []


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d.pop("fingerprint"), "$.fingerprint: missing"),
        (lambda d: d["steps"][0].update(checked="many"), "$.steps[0].checked: expected int, got str"),
        (lambda d: d["steps"][0].update(status="maybe"), "$.steps[0].status: unknown value 'maybe'"),
        (lambda d: d["summary"].update(status="ok"), "$.summary.status: unknown value 'ok'"),
    ],
    ids=["missing-key", "wrong-type", "unknown-step-status", "unknown-summary-status"],
)
def test_schema_checker_names_the_broken_field(quick_run, mutate, error):
    doc = copy.deepcopy(quick_run[2])
    mutate(doc)
    assert error in certificate.validate(doc)


def test_interpreter_native_cast_divergence_is_a_finding_with_its_category(quick_run):
    _, _, doc = quick_run
    step = _step(doc, "fingerprint/triton.native/e4m3fn/cast_profile")
    assert step["status"] == "finding"
    ties = step["categories"]["native_cast_divergence: rne_tie_flipped"]
    assert ties["examples"]
    for e in ties["examples"]:  # the other neighbour of an exact midpoint: one code away from the RNE code
        assert abs((int(e["got"], 16) & 0x7F) - (int(e["expected"], 16) & 0x7F)) == 1, e
    assert doc["fingerprint"]["cast_profiles"]["triton.native"]["e4m3fn"]["profile"] is None
    encode = _step(doc, "conformance/triton.native/e4m3fn/encode_bf16")
    assert encode["status"] == "finding"
    assert "not load-bearing" in encode["note"]


def test_torch_cast_matches_a_named_profile_on_every_check(quick_run):
    _, _, doc = quick_run
    torch_steps = [s for s in doc["steps"] if s["params"].get("path") == "torch.to" and s["status"] != "skipped"]
    assert torch_steps
    assert {s["status"] for s in torch_steps} == {"pass"}


def _broken_rowwise(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    q.view(torch.uint8)[0, 0] ^= 0x01  # one wrong code: a genuine failure the engine must report
    return q, s


def test_a_broken_kernel_makes_bringup_exit_nonzero(tmp_path, monkeypatch, capsys):
    broken = fp8ref.spec.KernelSpec(
        "rowwise_2d_scale_and_cast", kernel=_broken_rowwise, variant="broken", test_shapes=((7, 100),)
    )
    monkeypatch.setattr(fp8ref.spec, "specs", lambda: (broken,))
    rc = main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"])
    assert rc == 1
    doc = json.loads((tmp_path / "certificate.json").read_text())
    failed = [s for s in doc["steps"] if s["status"] == "fail"]
    assert failed
    assert all(
        s["step"] == "kernel_matrix" and s["params"]["spec"] == "rowwise_2d_scale_and_cast[broken]" for s in failed
    )
    assert doc["summary"]["status"] == "fail"
    assert "FAIL kernel_matrix/rowwise_2d_scale_and_cast[broken]" in capsys.readouterr().out


def test_exhaustive_on_cpu_runs_a_labelled_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(fp8ref.spec, "specs", lambda: ())  # the kernel matrix is covered above
    rc = main(["bringup", "--quick", "--exhaustive", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"])
    doc = json.loads((tmp_path / "certificate.json").read_text())
    sample = _step(doc, "conformance/torch.to/e4m3fn/f32_sample")
    assert rc == 0
    assert sample["status"] == "pass"
    assert sample["checked"] == 1 << 20
    assert "sample" in sample["note"]
    assert _step(doc, "kernel_matrix")["status"] == "skipped"


def test_a_run_cut_short_leaves_an_incomplete_certificate_of_the_finished_steps(tmp_path, monkeypatch):
    """A job time limit (SIGTERM/KeyboardInterrupt) during the kernel matrix must not erase the conformance results."""
    import fp8ref.bringup.matrix

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fp8ref.bringup.matrix, "matrix_steps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"])
    doc = json.loads((tmp_path / "certificate.json").read_text())
    assert doc["options"]["complete"] is False
    assert any(s["step"] == "conformance" for s in doc["steps"])
    assert not any(s["step"] == "kernel_matrix" for s in doc["steps"])
    assert "INCOMPLETE" in (tmp_path / "certificate.md").read_text()


def _wrong_strides_rowwise(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    q, s = ops.rowwise_2d_scale_and_cast(x, fp8_dtype, round_scales_to_power_of_2)
    return q.t().contiguous().t(), s  # right bytes, column-major q


def test_a_structure_failure_is_counted_once_with_readable_examples(tmp_path, monkeypatch):
    broken = fp8ref.spec.KernelSpec(
        "rowwise_2d_scale_and_cast", kernel=_wrong_strides_rowwise, variant="strides", test_shapes=((7, 100),)
    )
    monkeypatch.setattr(fp8ref.spec, "specs", lambda: (broken,))
    assert main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"]) == 1
    doc = json.loads((tmp_path / "certificate.json").read_text())
    failed = [s for s in doc["steps"] if s["status"] == "fail"]
    assert failed
    for step in failed:
        assert set(step["categories"]) == {"shape_stride_dtype"}, step["categories"]
        entry = step["categories"]["shape_stride_dtype"]
        assert step["mismatches"] == entry["count"] == 1  # q's strides, reported once (same in both runs)
        assert "stride" in str(entry["examples"][0])


def test_version_prints_the_installed_distributions_version(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"fp8ref {importlib.metadata.version('fp8ref')}"


def _all_actions(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {a}", h) for a, h in _all_actions(sub))
        elif not isinstance(action, argparse._HelpAction):
            yield "/".join(action.option_strings) or action.dest, action.help


def test_every_option_and_argument_has_help_text():
    from fp8ref.bringup.cli import _parser

    actions = list(_all_actions(_parser()))
    assert len(actions) > 10
    assert [name for name, text in actions if not text] == []


def test_markdown_states_a_shared_caveat_once_and_says_not_run(quick_run):
    _, out, doc = quick_run
    md = (out / "certificate.md").read_text()
    assert "0 of 0 differ" not in md
    skipped = [s for s in doc["steps"] if s["status"] == "skipped"]
    assert skipped
    assert all(f"`{s['name']}`: not run." in md for s in skipped)
    caveat = "so a divergence here cannot reach"  # the interpreter's native cast, behind many findings
    assert sum(caveat in s["note"] for s in doc["steps"]) > 1
    assert md.count(caveat) == 1
    assert "[note 1]" in md


def test_shared_caveats_prefer_the_tail_most_notes_end_with():
    notes = [
        "against A; path is not load-bearing: the kernels never use this cast on this backend at all.",
        "against B; path is not load-bearing: the kernels never use this cast on this backend at all.",
        "nearest C. path: the kernels never use this cast on this backend at all.",
        "a note of its own",
    ]
    assert certificate.shared_caveats(notes) == ["the kernels never use this cast on this backend at all."]


def _raising_rowwise(x, fp8_dtype=torch.float8_e4m3fn, round_scales_to_power_of_2=False):
    raise RuntimeError("launch failed: out of resources")


def test_a_kernel_that_raises_is_one_kernel_raised_finding_per_case_with_its_traceback(tmp_path, monkeypatch):
    broken = fp8ref.spec.KernelSpec(
        "rowwise_2d_scale_and_cast", kernel=_raising_rowwise, variant="raises", test_shapes=((7, 100),)
    )
    monkeypatch.setattr(fp8ref.spec, "specs", lambda: (broken,))
    assert main(["bringup", "--quick", "--formats", "e4m3fn", "--out", str(tmp_path), "--no-progress"]) == 1
    doc = json.loads((tmp_path / "certificate.json").read_text())
    failed = [s for s in doc["steps"] if s["status"] == "fail"]
    assert failed
    for step in failed:
        assert set(step["categories"]) == {"kernel_raised"}, step["categories"]
        (example,) = step["categories"]["kernel_raised"]["examples"]
        assert "RuntimeError: launch failed: out of resources" in example["traceback"]
    assert "launch failed" in (tmp_path / "certificate.md").read_text()
