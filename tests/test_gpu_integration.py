"""GPU-only claims: torch.compile(fullgraph) equals eager, opcheck passes, no host syncs, int64 indexing.

Each runs on its pytest worker's GPU (the ``device`` fixture), which is not made the current device: kernels must
launch on their tensors' device. Skipped on the CPU (the interpreter has no CUDA streams to sync on and cannot
hold >2^31-element tensors quickly).
The committed H200 log of these tests is under benchmarks/results/.
"""

from __future__ import annotations

import pytest
import torch

from fp8ref.testing import assert_same_bits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]

E4 = torch.float8_e4m3fn


def _offs(ends: list[int], device) -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32, device=device)


def _cases(device):
    """(op name, positional args) for every public op, small jagged layouts with empty and size-1 groups.

    Offsets end at the jagged length: columns past offs[-1] are left unwritten by design, and these tests compare
    whole outputs of two runs (eager vs compiled, opcheck's re-runs)."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16).to(device)

    return [
        ("rowwise_2d_scale_and_cast", (randn(300, 520),), {}),
        ("colwise_3d_scale_and_cast", (randn(3, 160, 96).transpose(-2, -1).contiguous().transpose(-2, -1),), {}),
        ("rowwise_3d_transpose_rhs", (randn(3, 160, 96),), {"method": "atomic"}),
        ("rowwise_3d_transpose_rhs", (randn(3, 160, 96),), {"method": "reduction"}),
        ("per_group_rowwise_scales", (randn(64, 500), _offs([0, 1, 130, 130, 500], device)), {}),
        ("per_group_colwise_scales", (randn(500, 96), _offs([0, 1, 130, 130, 500], device)), {}),
        ("per_group_colwise_scales_dual", (randn(500, 96), randn(500, 48), _offs([7, 7, 300, 500], device)), {}),
    ]


def _case_id(case):
    name, _, kwargs = case
    return "-".join([name, *map(str, kwargs.values())])


def _assert_outputs_identical(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert_same_bits(x, y, strict_nan=True, what=f"output {i}")  # same stack twice: NaN bits must agree too


@pytest.mark.parametrize("case", _cases("cpu"), ids=_case_id)
def test_compiled_fullgraph_equals_eager_bitwise(case, device):
    import fp8moe

    name, args, kwargs = case
    args = tuple(a.to(device) for a in args)
    op = getattr(fp8moe, name)
    eager = op(*args, E4, False, **kwargs)
    compiled = torch.compile(lambda *a: op(*a, E4, False, **kwargs), fullgraph=True)(*args)
    _assert_outputs_identical(eager, compiled)


@pytest.mark.parametrize("case", _cases("cpu"), ids=_case_id)
def test_kernel_path_has_no_host_sync(case, device):
    import fp8moe

    name, args, kwargs = case
    args = tuple(a.to(device) for a in args)
    op = getattr(fp8moe, name)
    op(*args, E4, True, **kwargs)  # warm-up: compilation and autotuning may sync
    torch.cuda.synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        op(*args, E4, True, **kwargs)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_opcheck_passes_for_every_registered_op(device):
    import fp8moe.ops  # noqa: F401  (registers the fp8moe:: ops)

    for name, args, kwargs in _cases(device):
        packet = getattr(torch.ops.fp8moe, name)
        schema_args = list(packet.default._schema.arguments)
        call = list(args)
        # remaining schema arguments after the tensors, in order: fp8 dtype, pow2 flag, then variants
        extra = {"fp8_dtype": E4, "round_scales_to_power_of_2": False, **kwargs}
        for arg in schema_args[len(call) :]:
            call.append(extra.get(arg.name, arg.default_value))
        torch.library.opcheck(packet.default, tuple(call))


@pytest.mark.slow
def test_int64_indexing_rowwise_2d_over_2_pow_31_elements(device):
    import fp8moe
    import fp8ref

    m, k = 2**17 + 3, 2**14 + 16  # 2.15e9 elements: byte offsets past 2^31
    x = torch.empty((m, k), dtype=torch.bfloat16, device=device).normal_()
    q, s = fp8moe.rowwise_2d_scale_and_cast(x, E4)
    rq, rs = fp8ref.rowwise_2d_scale_and_cast(x, E4)
    assert torch.equal(s.view(torch.int32), rs.view(torch.int32))
    assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))


@pytest.mark.slow
def test_int64_indexing_per_group_colwise_over_2_pow_31_elements(device):
    import fp8moe
    import fp8ref

    rows, n = 2**20 + 7, 2**11 + 5  # 2.15e9 elements
    x = torch.empty((rows, n), dtype=torch.bfloat16, device=device).normal_()
    offs = _offs([100, 2**19, rows - 3], device)
    q, s = fp8moe.per_group_colwise_scales(x, offs, E4)
    rq, rs = fp8ref.per_group_colwise_scales(x, offs, E4)
    assert torch.equal(s.view(torch.int32), rs.view(torch.int32))
    valid = rows - 3
    assert torch.equal(q[:valid].view(torch.uint8), rq[:valid].view(torch.uint8))
