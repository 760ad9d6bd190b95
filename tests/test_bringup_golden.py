"""Golden vectors for stacks without Python: export, a vendor's outputs, and ``fp8ref verify``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fp8ref.bringup.cli import main
from fp8ref.formats import fmt
from fp8ref.profiles import cast_codes

PROFILE = "satfinite"


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    assert main(["export-golden", "--out", str(out), "--profiles", PROFILE, "--formats", "e4m3fn,e5m2fnuz"]) == 0
    return out


def _vendor_outputs(golden, results) -> list[dict]:
    """What a correct vendor writes: fp8ref's own encoder on the exported input bits, decode from the code table."""
    entries = [json.loads(line) for line in (golden / "manifest.jsonl").read_text().splitlines()]
    for e in entries:
        path = results / e["result"]
        path.parent.mkdir(parents=True, exist_ok=True)
        f = fmt(e["format"])
        if e["kind"] == "decode":
            path.write_bytes(f.values.numpy().astype("<f4").tobytes())
        else:
            bits = np.frombuffer((golden / e["input"]).read_bytes(), dtype="<i4").copy()
            x = torch.from_numpy(bits).view(torch.float32)
            path.write_bytes(cast_codes(x, f.dtype, e["profile"]).numpy().tobytes())
    return entries


def test_manifest_lists_decode_and_every_set_per_format(golden):
    entries = [json.loads(line) for line in (golden / "manifest.jsonl").read_text().splitlines()]
    kinds = {(e["kind"], e["format"], e["set"]) for e in entries}
    for name in ("e4m3fn", "e5m2fnuz"):
        assert ("decode", name, "decode_256") in kinds
        assert {("encode", name, s) for s in ("bf16_all", "fp16_all", "fp32_edge", "probe")} <= kinds
    bf16 = next(e for e in entries if e["set"] == "bf16_all")
    assert (golden / bf16["input"]).stat().st_size == 4 * 65536
    assert (golden / bf16["expected"]).stat().st_size == 65536


def test_verify_passes_outputs_of_a_conforming_vendor(golden, tmp_path, capsys):
    _vendor_outputs(golden, tmp_path)
    assert main(["verify", str(golden), str(tmp_path)]) == 0
    assert "0 fail" in capsys.readouterr().out


def test_verify_names_file_and_index_of_one_flipped_byte(golden, tmp_path, capsys):
    entries = _vendor_outputs(golden, tmp_path)
    target = next(e for e in entries if e["set"] == "fp16_all" and e["format"] == "e4m3fn")
    path = tmp_path / target["result"]
    data = bytearray(path.read_bytes())
    data[0x3C00] ^= 0x01  # fp16 pattern 0x3C00 is 1.0: code 0x38 becomes 0x39
    path.write_bytes(bytes(data))
    assert main(["verify", str(golden), str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL    {target['result']}: 1 of 65536 differ" in out
    assert "index 15360: input 1.0 (bits 0x3f800000): expected 0x38, got 0x39" in out


def test_verify_fails_a_result_file_of_the_wrong_size(golden, tmp_path, capsys):
    entries = _vendor_outputs(golden, tmp_path)
    target = next(e for e in entries if e["kind"] == "decode")
    (tmp_path / target["result"]).write_bytes(b"\0" * 255)
    assert main(["verify", str(golden), str(tmp_path)]) == 1
    assert "255 bytes, expected 1024" in capsys.readouterr().out


def test_verify_with_no_result_files_fails(golden, tmp_path):
    assert main(["verify", str(golden), str(tmp_path)]) == 1


def test_decode_accepts_any_nan_pattern_for_a_nan_code(golden, tmp_path):
    entries = _vendor_outputs(golden, tmp_path)
    target = next(e for e in entries if e["kind"] == "decode" and e["format"] == "e4m3fn")
    values = np.frombuffer((tmp_path / target["result"]).read_bytes(), dtype="<u4").copy()
    values[0x7F] = 0xFFC00001  # a negative NaN with a payload for code 0x7F
    (tmp_path / target["result"]).write_bytes(values.tobytes())
    assert main(["verify", str(golden), str(tmp_path)]) == 0


def test_a_damaged_golden_file_fails_verification_by_name(golden, tmp_path, capsys):
    import shutil

    damaged = tmp_path / "golden"
    shutil.copytree(golden, damaged)
    entries = _vendor_outputs(damaged, tmp_path / "results")
    target = next(e for e in entries if e["set"] == "probe")
    expected = damaged / target["expected"]
    expected.write_bytes(bytes([expected.read_bytes()[0] ^ 1]) + expected.read_bytes()[1:])
    assert main(["verify", str(damaged), str(tmp_path / "results")]) == 1
    assert f"golden file {target['expected']} is missing or does not match its sha256" in capsys.readouterr().out
