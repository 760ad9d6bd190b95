"""The per-group ops on the span kernel (fp8moe.kernels._per_group), with the op signatures, as foreign kernels for
``python -m fp8moe.bench --kernel benchmarks.span_kernels:<op>``: the one-read tile kernel that replaced it
(fp8moe.kernels._group_tiles) timed beside it in one run, both checked by compare.
"""

from __future__ import annotations

import torch

import fp8moe  # noqa: F401  (before triton: without a GPU it turns the interpreter on)
from fp8moe.backend import backend_for
from fp8moe.kernels import per_group_colwise_scales as _colwise
from fp8moe.kernels import per_group_colwise_scales_dual as _dual
from fp8moe.kernels import per_group_rowwise_scales as _rowwise

E4 = torch.float8_e4m3fn


def per_group_rowwise_scales(x, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    return _rowwise.launch_span(x, offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x.device))


def per_group_colwise_scales(x, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    return _colwise.launch_span(x, offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x.device))


def per_group_colwise_scales_dual(x1, x2, offs, fp8_dtype=E4, round_scales_to_power_of_2=False):
    return _dual.launch_span(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2, backend_for(x1.device))
