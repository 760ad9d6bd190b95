"""Output poisoning must find unwritten elements and leave no trace in the process afterwards."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from fp8ref.engine.poison import (
    _ALLOCATORS,
    POISON_BYTES,
    out_of_bounds_writes,
    poisoned_allocations,
    redzone_bytes,
    unwritten_mask,
)


def _half_written(n: int) -> torch.Tensor:
    out = torch.empty(n, dtype=torch.float8_e4m3fn)
    out[: n // 2] = 1.0
    return out


def test_unwritten_elements_are_exactly_those_left_alone_in_both_runs():
    allocators = {(owner, name): getattr(owner, name) for owner, name in _ALLOCATORS}
    with poisoned_allocations(POISON_BYTES[0]):
        first = _half_written(8)
    with poisoned_allocations(POISON_BYTES[1]):
        second = _half_written(8)
    assert unwritten_mask(first, second).tolist() == [False] * 4 + [True] * 4
    assert {key: getattr(*key) for key in allocators} == allocators


def test_torch_compile_still_works_after_a_poisoned_custom_op_call(device):
    script = textwrap.dedent(
        f"""
        import torch, fp8moe
        from fp8ref import ops
        from fp8ref.engine.poison import poisoned_allocations
        x = torch.randn(16, 8, device="{device}")
        with poisoned_allocations(0xFF):
            fp8moe.rowwise_2d_scale_and_cast(x)  # eager: the direct path
            torch.ops.fp8moe.rowwise_2d_scale_and_cast.default(x, torch.float8_e4m3fn, False)  # the custom op
        offs = torch.tensor([8, 16], dtype=torch.int32, device="{device}")
        torch.compile(ops.per_group_rowwise_scales, fullgraph=True, backend="aot_eager")(x, offs)
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


@pytest.mark.parametrize("alloc", [name for _, name in _ALLOCATORS])
def test_every_uninitialised_allocator_is_poisoned(alloc):
    x = torch.zeros(3, 4)
    make = {
        "empty": lambda: torch.empty(3, 4),
        "empty_like": lambda: torch.empty_like(x),
        "empty_strided": lambda: torch.empty_strided((3, 4), (1, 3)),
        "empty_permuted": lambda: torch.empty_permuted((3, 4), (1, 0)),
        "new_empty": lambda: x.new_empty((3, 4)),
        "new_empty_strided": lambda: x.new_empty_strided((3, 4), (1, 3)),
    }[alloc]
    with poisoned_allocations(0xAB):
        t = make()
    assert bool((t.contiguous().view(torch.uint8) == 0xAB).all())


def test_every_fp8moe_output_is_poisoned_when_its_kernel_writes_nothing(monkeypatch, device):
    """The engine can only call an element unwritten if the op's output allocation was poisoned."""
    fp8moe = pytest.importorskip("fp8moe")
    from fp8moe import configs

    def launch_nothing(*args, **kwargs):
        return None

    monkeypatch.setattr(configs, "launch", launch_nothing)  # every kernel module launches through configs.launch
    x2, x3 = torch.randn(8, 16, device=device), torch.randn(2, 8, 16, device=device)
    offs = torch.tensor([5, 16], dtype=torch.int32, device=device)
    calls = {
        "rowwise_2d_scale_and_cast": (x2,),
        "colwise_3d_scale_and_cast": (x3,),
        "rowwise_3d_transpose_rhs": (x3,),
        "per_group_rowwise_scales": (x2, offs),
        "per_group_colwise_scales": (x2.t().contiguous(), offs),
        "per_group_colwise_scales_dual": (x2.t().contiguous(), x2.t().contiguous(), offs),
    }
    # A distinct byte per op: an unpoisoned output landing on memory another op's poison filled must still fail.
    for byte, (name, args) in zip(range(0x11, 0x100, 0x11), calls.items()):
        with poisoned_allocations(byte):
            outputs = getattr(fp8moe, name)(*args)
        for t in outputs:
            assert bool((t.contiguous().view(torch.uint8) == byte).all()), f"{name}: an output was not poisoned"


def test_poisoned_outputs_keep_the_allocators_shape_strides_and_dtype_inside_a_redzoned_buffer():
    x = torch.zeros(3, 4)
    with poisoned_allocations(0x5A) as record:
        q = torch.empty_strided((5, 7), (1, 5), dtype=torch.float8_e4m3fn)
        s = x.new_empty((3,))
    assert (q.shape, q.stride(), q.dtype) == ((5, 7), (1, 5), torch.float8_e4m3fn)
    assert (s.shape, s.dtype) == ((3,), torch.float32)
    assert [a.tensor.data_ptr() for a in record] == [q.data_ptr(), s.data_ptr()]
    sizes = [a.buffer.numel() - 2 * a.redzone for a in record]
    assert sizes == [35, 12]
    assert [a.redzone for a in record] == [redzone_bytes(35), redzone_bytes(12)] == [4096, 4096]
    assert out_of_bounds_writes(record, (q, s)) == []


def test_writes_before_and_past_an_output_are_reported_with_their_byte_offsets():
    with poisoned_allocations(POISON_BYTES[0]) as record:
        q = torch.empty((4, 8), dtype=torch.uint8)  # 32 bytes
        scratch = torch.empty(2)
    # A store grid one row too tall, and one that starts two bytes early: both land in the redzones.
    q.as_strided((5, 8), (8, 1), q.storage_offset()).fill_(1)
    q.as_strided((2,), (1,), q.storage_offset() - 2).fill_(1)
    scratch.as_strided((3,), (1,), scratch.storage_offset()).fill_(0.0)
    found = {o.what: o for o in out_of_bounds_writes(record, (q,))}
    assert set(found) == {"output 0", "temporary (2,) torch.float32"}
    assert (found["output 0"].nbytes, found["output 0"].offsets, found["output 0"].size) == (10, (-2, -1, 32, 33), 32)
    assert found["temporary (2,) torch.float32"].offsets == (8, 9, 10, 11)
    assert "10 byte(s) written outside its 32 bytes, at byte offsets -2, -1, 32, 33, ..." in str(found["output 0"])
