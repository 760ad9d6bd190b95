"""Committed evidence stays readable: logs and summaries as text, no binary archives in the tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES = (".gz", ".tgz", ".zip", ".tar", ".bz2", ".xz", ".7z", ".whl", ".pt", ".npz")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_no_binary_archive_is_committed():
    # Only files that exist: a copy of the tree with a stale .git (the GPU machine's) lists files deleted since.
    archives = [p for p in _tracked() if p.endswith(ARCHIVES) and (ROOT / p).exists()]
    assert not archives, f"commit text summaries instead of archives: {archives}"
