"""`import fp8ref` must work where Triton is absent: fp8ref is the reference, usable on any machine."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_fp8ref_imports_and_runs_with_triton_unimportable():
    script = textwrap.dedent(
        """
        import sys
        class BlockTriton:
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton is blocked for this test")
        sys.meta_path.insert(0, BlockTriton())
        import torch
        import fp8ref
        q, s = fp8ref.rowwise_2d_scale_and_cast(torch.ones(2, 3, dtype=torch.bfloat16))
        assert q.view(torch.uint8).tolist() == [[0x7E] * 3] * 2, q.view(torch.uint8)
        assert s.flatten().tolist() == [448.0, 448.0]
        fp8ref.specs()  # discovering the kernel registry must not import triton either
        assert "triton" not in sys.modules, "fp8ref imported triton"
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
