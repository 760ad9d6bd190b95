"""The per-group ops on the span kernel (fp8moe.kernels._per_group), with the op signatures, as foreign kernels for
``FP8MOE_PER_GROUP_KERNEL=tiles python -m fp8moe.bench --kernel benchmarks.span_kernels:<op>``: the one-read tile
kernel (fp8moe.kernels._group_tiles) and the span kernel timed side by side in one run, each checked by compare.
"""

from __future__ import annotations

import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on)
from fp8moe.backend import backend_for
from fp8moe.kernels import per_group_colwise_scales_dual as _dual
from fp8moe.kernels._per_group import launch_jagged_rows

E4 = torch.float8_e4m3fn


def per_group_rowwise_scales(x, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    return launch_jagged_rows(x, offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x.device))


def per_group_colwise_scales(x, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    q_t, scales = launch_jagged_rows(x.t(), offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x.device))
    return q_t.t(), scales


def per_group_colwise_scales_dual(x1, x2, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    return _dual.launch_span(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x1.device))
