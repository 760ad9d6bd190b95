"""The README is documentation that must be true: its set-up commands are what CI runs, and every Python block
runs verbatim in a fresh interpreter (outside the repository, as a user would)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_readme_has_the_two_setup_commands_ci_runs():
    lines = README.splitlines()
    assert 'pip install torch==2.13.0 -e ".[test]" && fp8ref bringup' in lines
    test_line = 'pip install torch==2.13.0 -e ".[test]" && pytest -n auto'
    assert test_line in lines
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 '^pip install torch==2.13.0 -e \".\\[test\\]\" && pytest' README.md" in ci


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=lambda i: f"block{i}")
def test_readme_python_block_runs_verbatim(index, tmp_path):
    script = tmp_path / f"readme_block{index}.py"
    script.write_text(BLOCKS[index])
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"README block {index} failed:\n{BLOCKS[index]}\n{result.stdout}\n{result.stderr}"
