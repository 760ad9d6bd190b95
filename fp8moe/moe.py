"""A minimal Mixture-of-Experts layer (top-k router, grouped expert weights) and its conversion to the FP8 path.

The layer sorts its (token, expert) pairs by expert and lays each expert's group out padded to a multiple of 16
rows, all on the device: group sizes come from a scatter-add of the routing choices and offsets from their cumsum,
never from ``.tolist()`` or ``bincount`` (each a host sync). The padded buffer has a static size, so the layer
compiles with ``torch.compile(fullgraph=True)`` and runs without device syncs. Padding rows are zeros and the last
group absorbs the slack up to the static size, so every row the GEMMs write is defined (no uninitialized rows reach
an activation) and every group size is a multiple of 16, which the FP8 weight-gradient GEMM requires.

:func:`convert_to_fp8_moe` swaps the layer's two expert GEMMs from ``torch._grouped_mm`` (bf16) to
:func:`fp8moe.grouped_mm`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fp8moe.grouped_mm import grouped_mm
from fp8ref.grouped_mm import GROUP_MULTIPLE

__all__ = ["MoE", "bf16_grouped_mm", "convert_to_fp8_moe", "route"]


def bf16_grouped_mm(A: torch.Tensor, B_t: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """The bf16 baseline expert GEMM: ``torch._grouped_mm`` (differentiable, f32 accumulation, bf16 out)."""
    return torch._grouped_mm(A, B_t, offs=offs, out_dtype=torch.bfloat16)


def route(
    expert_ids: torch.Tensor, num_experts: int, multiple: int = GROUP_MULTIPLE
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Sort (token, expert) pairs by expert into groups padded to ``multiple`` rows, on the device.

    Args:
        expert_ids: (T, k) int64 expert of each token's k choices.
        num_experts: E.
        multiple: group-size multiple of the padded layout.

    Returns:
        (order, dest, offs, rows): ``order`` (T*k,) the pairs (flattened index t*k + j) sorted by expert (stable);
        ``dest`` (T*k,) the padded row of each sorted pair; ``offs`` (E,) int32 padded end offsets with
        offs[-1] == rows; ``rows`` the static padded row count T*k + (multiple - 1) * E, rounded up to ``multiple``.
    """
    flat = expert_ids.reshape(-1)
    pairs = flat.shape[0]
    rows = -(-(pairs + (multiple - 1) * num_experts) // multiple) * multiple
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=flat.device).scatter_add_(
        0, flat, torch.ones_like(flat)
    )
    padded = (counts + multiple - 1) // multiple * multiple
    padded_ends = torch.cumsum(padded, 0)
    # Sorted pair i of expert e sits at padded_start[e] + (i - start[e]).
    shift = (padded_ends - padded) - (torch.cumsum(counts, 0) - counts)
    dest = torch.arange(pairs, device=flat.device) + shift.index_select(0, flat.index_select(0, order))
    # The last group takes the slack up to the static row count: zero rows, so no row is left unwritten.
    offs = torch.cat([padded_ends[:-1], padded_ends.new_full((1,), rows)]).to(torch.int32)
    return order, dest, offs, rows


class MoE(nn.Module):
    """Top-k routed experts with SiLU MLPs: ``y = sum_j w_j * down_e(silu(up_e(x)))`` over each token's k experts.

    Args:
        dim: model width (K of the up GEMM, N of the down GEMM; a multiple of 16).
        hidden: expert width (a multiple of 16).
        num_experts: E.
        top_k: experts per token.
        dtype: parameter dtype of the experts (bf16 for the grouped GEMMs).

    Attributes:
        w_up: (E, dim, hidden) expert weights in the B_t layout of grouped_mm.
        w_down: (E, hidden, dim).
        expert_mm: the grouped GEMM ``(A, B_t, offs) -> out`` both expert products use; :func:`bf16_grouped_mm`
            until :func:`convert_to_fp8_moe` replaces it.
    """

    def __init__(
        self, dim: int, hidden: int, num_experts: int, top_k: int = 2, *, dtype: torch.dtype = torch.bfloat16
    ) -> None:
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.router = nn.Linear(dim, num_experts, bias=False, dtype=dtype)
        self.w_up = nn.Parameter(torch.randn(num_experts, dim, hidden, dtype=dtype) * dim**-0.5)
        self.w_down = nn.Parameter(torch.randn(num_experts, hidden, dim, dtype=dtype) * hidden**-0.5)
        self.expert_mm: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = bf16_grouped_mm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MoE output for ``x``, same shape and dtype: each token through its top-k experts, weighted.

        The router's softmax probabilities are taken in f32 and the top k renormalised to sum to 1; tokens are sorted
        by expert (:func:`route`) for the two ``expert_mm`` calls and put back in order by a permutation, so the
        result is deterministic (no atomics).

        Args:
            x: (..., dim) activations; every leading dim is a token dim.
        """
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # (T, dim)
        probs = self.router(x).float().softmax(dim=-1)
        weights, experts = probs.topk(self.top_k, dim=-1)  # (T, k)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        order, dest, offs, rows = route(experts, self.num_experts)
        tokens = order // self.top_k  # (T*k,) token of each sorted pair
        x_sorted = x.new_zeros((rows, x.shape[1])).index_copy(0, dest, x.index_select(0, tokens))
        h = F.silu(self.expert_mm(x_sorted, self.w_up, offs))
        y_sorted = self.expert_mm(h, self.w_down, offs).index_select(0, dest)  # (T*k, dim), sorted order
        # Back to (token, choice) order with a permutation (index_copy of unique rows): deterministic, no atomics.
        y = torch.empty_like(y_sorted).index_copy(0, order, y_sorted).view(x.shape[0], self.top_k, -1)
        out = (y * weights.unsqueeze(-1).to(y.dtype)).sum(dim=1)
        return out.to(x.dtype).reshape(shape)


def convert_to_fp8_moe(module: nn.Module, *, fp8_dtype: torch.dtype | None = None) -> nn.Module:
    """Move the expert GEMMs of every :class:`MoE` in ``module`` (itself included) onto :func:`fp8moe.grouped_mm`.

    In place; parameters, router and routing are untouched. ``fp8_dtype`` None keeps grouped_mm's per-backend
    default. Returns ``module``. Raises ValueError if it holds no MoE layer.
    """
    layers = [m for m in module.modules() if isinstance(m, MoE)]
    if not layers:
        raise ValueError(f"convert_to_fp8_moe: {type(module).__name__} holds no fp8moe.moe.MoE layer")
    for layer in layers:
        layer.expert_mm = functools.partial(grouped_mm, fp8_dtype=fp8_dtype)
    return module
