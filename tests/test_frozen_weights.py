"""fp8moe.frozen_weights: grouped_mm quantizes each expert weight once per scope, with bitwise the same results.

On the CPU (Triton kernels in the interpreter, fp8ref's exact GEMM): micro-batches inside the scope give exactly the
outputs and gradients they give outside it, the two weight quantizers run once per weight, an in-place update of the
weight (a version bump) is noticed, the scope ends cleanly, and torch.compile traces through it.
"""

from __future__ import annotations

import pytest
import torch

import fp8moe
from fp8moe import ops as fp8moe_ops
from fp8moe.frozen_weights import active_weight_ops
from fp8ref.pytest_plugin import needs_interpreter

pytestmark = needs_interpreter  # the CPU path (exact GEMM); the GPU step is timed in benchmarks/bench_grouped_mm.py

M, K, N, E = 64, 32, 48, 4
OFFS = torch.tensor([16, 32, 32, 64], dtype=torch.int32)


def _weight(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(E, K, N, generator=g).to(torch.bfloat16).requires_grad_()


def _micro_batch(seed):
    g = torch.Generator().manual_seed(100 + seed)
    return torch.randn(M, K, generator=g).to(torch.bfloat16), torch.randn(M, N, generator=g).to(torch.bfloat16)


def _step(B_t, seed):
    """Forward + backward of one micro-batch: (out, grad_A); B_t.grad accumulates."""
    A, grad_out = _micro_batch(seed)
    A = A.requires_grad_()
    out = fp8moe.grouped_mm(A, B_t, OFFS)
    out.backward(grad_out)
    return out.detach(), A.grad


@pytest.fixture
def weight_calls(monkeypatch):
    """Counts of the weight quantizers' calls: the two ops, and their fused pair (grouped_mm outside a scope)."""
    calls = {"colwise_3d_scale_and_cast": 0, "rowwise_3d_transpose_rhs": 0, "colwise_3d_and_transpose_rhs": 0}
    for name in calls:
        original = getattr(fp8moe_ops, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(fp8moe_ops, name, counting)
    return calls


def _bits(t):
    return t.view(torch.int16)


def test_micro_batches_in_the_scope_match_outside_bitwise_and_quantize_the_weight_once(weight_calls):
    plain_B = _weight()
    plain = [_step(plain_B, seed) for seed in range(3)]
    # Outside a scope, each forward quantizes B_t for both GEMMs in one fused call, the backward reuses it.
    assert weight_calls == {
        "colwise_3d_scale_and_cast": 0,
        "rowwise_3d_transpose_rhs": 0,
        "colwise_3d_and_transpose_rhs": 3,
    }
    frozen_B = _weight()
    with fp8moe.frozen_weights() as scope:
        frozen = [_step(frozen_B, seed) for seed in range(3)]
    # In the scope: one fused call, on first use (two quantizations, the scope's two misses).
    assert weight_calls == {
        "colwise_3d_scale_and_cast": 0,
        "rowwise_3d_transpose_rhs": 0,
        "colwise_3d_and_transpose_rhs": 4,
    }
    assert (scope.hits, scope.misses) == (4, 2)
    for (out, grad_a), (out_f, grad_a_f) in zip(plain, frozen):
        assert torch.equal(_bits(out), _bits(out_f))
        assert torch.equal(_bits(grad_a), _bits(grad_a_f))
    assert torch.equal(_bits(plain_B.grad), _bits(frozen_B.grad))  # accumulated over the three micro-batches


def test_an_in_place_update_inside_the_scope_is_requantized(weight_calls):
    B_t = _weight()
    with fp8moe.frozen_weights() as scope:
        _step(B_t, 0)
        with torch.no_grad():
            B_t.mul_(0.5)  # a version bump: the cached quantization is stale
        out, grad_a = _step(B_t, 1)
    assert scope.misses == 4  # both methods, before and after the update
    fresh_B = (_weight() * 0.5).detach().requires_grad_()
    fresh_out, fresh_grad_a = _step(fresh_B, 1)
    assert torch.equal(_bits(out), _bits(fresh_out))
    assert torch.equal(_bits(grad_a), _bits(fresh_grad_a))


def test_two_weights_of_the_same_shape_are_not_confused():
    B1, B2 = _weight(0), _weight(1)
    with fp8moe.frozen_weights() as scope:
        out1, _ = _step(B1, 0)
        out2, _ = _step(B2, 0)
    assert scope.misses == 4
    assert not torch.equal(_bits(out1), _bits(out2))
    assert torch.equal(_bits(out2), _bits(_step(_weight(1), 0)[0]))


def test_the_scope_ends_with_its_block_and_a_late_backward_uses_the_forwards_operands(weight_calls):
    B_t = _weight()
    A, grad_out = _micro_batch(0)
    A.requires_grad_()
    with fp8moe.frozen_weights() as scope:
        assert active_weight_ops() is scope
        out = fp8moe.grouped_mm(A, B_t, OFFS)
    assert active_weight_ops() is None
    assert scope.misses == 2  # the forward quantized B_t for both GEMMs, in the scope
    out.backward(grad_out)  # after the block: the backward takes the dgrad operand the forward saved
    assert weight_calls["colwise_3d_and_transpose_rhs"] == 1  # in the forward, in the scope
    assert weight_calls["rowwise_3d_transpose_rhs"] == 0
    assert scope.hits == 0
    with fp8moe.frozen_weights() as inner:
        with fp8moe.frozen_weights() as innermost:
            assert active_weight_ops() is innermost
        assert active_weight_ops() is inner


def test_compiled_calls_ignore_the_scope_and_match_eager():
    B_t = _weight()
    A, grad_out = _micro_batch(0)
    compiled = torch.compile(fp8moe.grouped_mm, fullgraph=True, backend="aot_eager")
    with fp8moe.frozen_weights() as scope:
        out = compiled(A, B_t, OFFS)
        out.backward(grad_out)
    assert (scope.hits, scope.misses) == (0, 0)
    eager_B = _weight()
    eager_out = fp8moe.grouped_mm(A, eager_B, OFFS)
    eager_out.backward(grad_out)
    assert torch.equal(_bits(out.detach()), _bits(eager_out.detach()))
    assert torch.equal(_bits(B_t.grad), _bits(eager_B.grad))
