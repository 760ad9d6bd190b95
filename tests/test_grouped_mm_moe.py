"""fp8moe.moe: on-device routing into 16-aligned groups, the bf16 MoE layer, and its conversion to the FP8 path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp8moe.moe import MoE, convert_to_fp8_moe, route
from fp8ref.metrics import sqnr
from fp8ref.pytest_plugin import needs_interpreter


def test_route_pads_each_expert_group_to_16_rows_on_the_device():
    g = torch.Generator().manual_seed(0)
    experts = torch.randint(0, 5, (37, 2), generator=g)
    experts[:, 1] = torch.where(experts[:, 1] == 3, 4, experts[:, 1])  # expert 3 only from first choices
    experts[experts == 2] = 1  # expert 2 empty
    order, dest, offs, rows = route(experts, 5)
    assert rows == 160  # 74 pairs + 15 per expert = 149, rounded up to 16
    assert offs.dtype == torch.int32
    assert offs[-1] == rows
    assert torch.all(offs % 16 == 0)
    flat = experts.reshape(-1)
    counts = torch.bincount(flat, minlength=5)
    sizes = torch.diff(offs, prepend=offs.new_zeros(1))
    assert torch.all(sizes[:-1] == (counts[:-1] + 15) // 16 * 16)  # the last group also takes the slack
    assert sizes[2] == 0
    assert dest.unique().numel() == dest.numel()  # a permutation into the padded rows
    starts = offs - sizes
    sorted_experts = flat[order]
    assert torch.all(sorted_experts[1:] >= sorted_experts[:-1])
    assert torch.all((dest >= starts[sorted_experts]) & (dest < starts[sorted_experts] + counts[sorted_experts]))


def _naive_moe(layer: MoE, x: torch.Tensor) -> torch.Tensor:
    """Per token, per choice, in f64: the layer's function without routing tricks."""
    probs = layer.router(x).float().softmax(-1)
    weights, experts = probs.topk(layer.top_k, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    up, down = layer.w_up.double(), layer.w_down.double()
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(layer.top_k):
            e = int(experts[t, j])
            out[t] += float(weights[t, j]) * (F.silu(x[t].double() @ up[e]) @ down[e])
    return out


def _layer_and_input(seed=0, tokens=24):
    torch.manual_seed(seed)
    layer = MoE(dim=32, hidden=48, num_experts=4, top_k=2)
    x = torch.randn(tokens, 32, dtype=torch.bfloat16)
    return layer, x


def test_bf16_moe_layer_computes_routed_expert_mlps():
    layer, x = _layer_and_input()
    with torch.no_grad():
        out = layer(x)
        expected = _naive_moe(layer, x)
    assert out.shape == x.shape
    assert out.dtype == torch.bfloat16
    assert sqnr(expected, out) > 35  # bf16 activations between two GEMMs: ~45 dB measured


@needs_interpreter  # the CPU path (exact GEMM); the GPU path is tests/test_grouped_mm_gpu.py
def test_fp8_conversion_moves_expert_gemms_and_trains():
    layer, x = _layer_and_input()
    bf16_out = layer(x)
    assert convert_to_fp8_moe(layer) is layer
    assert layer.expert_mm.func.__module__ == "fp8moe.grouped_mm"
    x_leaf = x.clone().requires_grad_()
    out = layer(x_leaf)
    # Two FP8 GEMMs in a row: each ~28.5 dB against bf16 (SQNR_VS_BF16), compounded: > 23 dB.
    assert sqnr(bf16_out.detach(), out.detach()) > 23
    out.float().square().sum().backward()
    for name, grad in [("x", x_leaf.grad), ("w_up", layer.w_up.grad), ("w_down", layer.w_down.grad)]:
        assert grad is not None, name
        assert torch.isfinite(grad).all(), name
        assert torch.count_nonzero(grad) > 0, name
    assert layer.router.weight.grad is not None  # through the routing weights


def test_conversion_of_a_model_without_moe_layers_is_an_error():
    with pytest.raises(ValueError, match=r"holds no fp8moe\.moe\.MoE layer"):
        convert_to_fp8_moe(nn.Linear(4, 4))


def test_conversion_reaches_nested_layers():
    model = nn.Sequential(MoE(32, 48, 4), nn.Sequential(MoE(32, 48, 4)))
    convert_to_fp8_moe(model, fp8_dtype=torch.float8_e4m3fn)
    layers = [m for m in model.modules() if isinstance(m, MoE)]
    assert len(layers) == 2
    assert all(m.expert_mm.keywords == {"fp8_dtype": torch.float8_e4m3fn} for m in layers)
