"""Output poisoning must find unwritten elements and leave no trace in the process afterwards."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations, unwritten_mask


def _half_written(n: int) -> torch.Tensor:
    out = torch.empty(n, dtype=torch.float8_e4m3fn)
    out[: n // 2] = 1.0
    return out


def test_unwritten_elements_are_exactly_those_left_alone_in_both_runs():
    allocators = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)
    with poisoned_allocations(POISON_BYTES[0]):
        first = _half_written(8)
    with poisoned_allocations(POISON_BYTES[1]):
        second = _half_written(8)
    assert unwritten_mask(first, second).tolist() == [False] * 4 + [True] * 4
    assert (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty) == allocators


def test_torch_compile_still_works_after_a_poisoned_custom_op_call():
    script = textwrap.dedent(
        """
        import torch, fp8moe
        from fp8ref import ops
        from fp8ref.engine.poison import poisoned_allocations
        x = torch.randn(16, 8)
        with poisoned_allocations(0xFF):
            fp8moe.rowwise_2d_scale_and_cast(x)
        offs = torch.tensor([8, 16], dtype=torch.int32)
        torch.compile(ops.per_group_rowwise_scales, fullgraph=True, backend="aot_eager")(x, offs)
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
