"""Launch-config policy: which block sizes a kernel runs with on each backend, and how a launch is issued.

Configs change speed, never bytes (every kernel's amax is an exact max and the cast is elementwise, so tiling cannot
change a result; tests/test_kernels_dense.py runs the interpreter's small blocks against the same reference the GPU
matches). The policy per backend:

- CUDA: ``triton.autotune`` over a short candidate list. The key names every launch argument that changes the best
  config or the result: shape dims, strides (layout), the fp8 format and the pow2 flag; Triton appends the dtype of
  every tensor argument itself. Problems under AUTOTUNE_MIN_ELEMENTS take the candidate with the smallest tile
  instead: they are launch-latency bound, so tuning cannot pay back its compile-and-measure cost (with autotuning on
  every tiny shape, the H200 kernel tests got through 31% in 185 s, benchmarks/results/README.md).
- ROCm: one fixed config per kernel. Autotuning there costs a device sync per new key, hundreds per MoE training
  step (SPEC §7).
- Interpreter: one fixed config with small blocks (16 x 32), so that multi-block loops and ragged tails run in tests
  on shapes of a few dozen rows. Every program instance costs ~ms of Python there, so tests keep shapes small.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import triton

from fp8moe.backend import Backend, launch_device

__all__ = [
    "AUTOTUNE_MIN_ELEMENTS",
    "INT32_MAX",
    "RESULT_ARGS",
    "ROWWISE",
    "TRANSPOSE_AMAX",
    "TRANSPOSE_QUANTIZE",
    "KernelConfigs",
    "autotuned",
    "launch",
    "needs_int64_index",
]

#: Below this many elements in the largest tensor argument, CUDA launches use a fixed config instead of autotuning.
#: 2^20 bf16 elements is 2 MiB: about 1 us of traffic at 4 TB/s, under the ~5 us a launch costs anyway.
AUTOTUNE_MIN_ELEMENTS = 1 << 20

#: Largest offset int32 index arithmetic can hold.
INT32_MAX = 2**31 - 1

#: Launch arguments that change the result. Every autotune key contains those its kernel takes: a cached choice
#: must never be reused for a call that computes something else (SPEC §6: anything cached per shape must key on
#: everything that changes the result).
RESULT_ARGS: tuple[str, ...] = ("FP8_DTYPE", "POW2")

Grid = Callable[[Mapping[str, object]], tuple[int, ...]]


@dataclass(frozen=True)
class KernelConfigs:
    """The launch configs of one kernel on every backend.

    Attributes:
        name: the kernel's name (identifies its autotuner).
        cuda: candidates ``triton.autotune`` measures on CUDA.
        rocm: the fixed ROCm config.
        interpreter: the fixed interpreter config (small blocks).
        key: names of the launch arguments the CUDA autotune cache keys on: shape dims, strides, and every one of
            RESULT_ARGS the kernel takes (tests/test_configs.py checks this against each kernel's signature).
    """

    name: str
    cuda: tuple[triton.Config, ...]
    rocm: triton.Config
    interpreter: triton.Config
    key: tuple[str, ...]

    def fixed(self, backend: Backend) -> triton.Config:
        """The single config used without autotuning: ROCm, the interpreter, and small problems on CUDA (the CUDA
        candidate with the smallest tile, which gives a small problem the most programs)."""
        if backend.kind == "rocm":
            return self.rocm
        if backend.kind == "interpreter":
            return self.interpreter
        return self.smallest_cuda

    @functools.cached_property
    def smallest_cuda(self) -> triton.Config:
        """The CUDA candidate with the smallest tile (the first of equals), chosen once: this runs on every launch."""
        return min(self.cuda, key=lambda c: _tile_elements(c.kwargs))


def _tile_elements(block_sizes: Mapping[str, int]) -> int:
    n = 1
    for size in block_sizes.values():
        n *= size
    return n


_AUTOTUNED: dict[str, triton.runtime.Autotuner] = {}


def autotuned(kernel: triton.runtime.JITFunction, configs: KernelConfigs) -> triton.runtime.Autotuner:
    """The autotuned wrapper of ``kernel``, built once per kernel (it holds the per-key cache)."""
    tuner = _AUTOTUNED.get(configs.name)
    if tuner is None:
        tuner = triton.autotune(configs=list(configs.cuda), key=list(configs.key))(kernel)
        _AUTOTUNED[configs.name] = tuner
    return tuner


def launch(kernel, configs: KernelConfigs, backend: Backend, grid: Grid, **args) -> None:
    """Launch ``kernel`` with ``args`` under the backend's config policy.

    Args:
        kernel: a ``@triton.jit`` function (possibly wrapped by ``triton.heuristics``).
        configs: the kernel's configs.
        backend: where it runs; ``backend.autotune`` selects autotuning.
        grid: maps the launch's meta-parameters (``args`` plus the config's kwargs) to the grid.
        **args: every kernel argument by name.
    """
    tensors = [v for v in args.values() if isinstance(v, torch.Tensor)]
    device = tensors[0].device if tensors else None
    largest = max((t.numel() for t in tensors), default=0)
    with launch_device(device):
        if backend.autotune and largest >= AUTOTUNE_MIN_ELEMENTS:
            autotuned(kernel, configs)[grid](**args)
            return
        config = configs.fixed(backend)
        meta = {**args, **config.kwargs}
        kernel[grid(meta)](**meta, num_warps=config.num_warps, num_stages=config.num_stages)


def needs_int64_index(*tensors: torch.Tensor) -> bool:
    """Whether some element offset of some tensor exceeds int32, so kernels must compute offsets in int64.

    The largest element offset of a tensor is sum((size - 1) * stride); int32 arithmetic is chosen only when every
    tensor stays within it, because 64-bit address math costs registers and instructions on every load.
    """
    for t in tensors:
        if t.numel() == 0:
            continue
        if sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) > INT32_MAX:
            return True
    return False


# ----------------------------------------------------------------------------------------------------------------
# The configs of the dense kernels (fp8moe/kernels/rowwise_2d_scale_and_cast.py, rowwise_3d_transpose_rhs.py)
# ----------------------------------------------------------------------------------------------------------------

#: Batched row kernel, tile (BLOCK_S rows, BLOCK_L reduced elements). Chosen by measurement on the H200
#: (benchmarks/tune_configs.py; tables and summary in benchmarks/results/h200-configs-*.md, README there): each
#: candidate is best or within 5% of best at one or more of 15 points (the MoE shapes of SPEC §7, the 2D rowwise,
#: 3D colwise and transpose-reduction ops, canonical and strided inputs). Wide single-row tiles win on long
#: canonical rows; 4x2048 on mid-length rows; tall narrow tiles (16x512, 32x256) on short rows and on strided inputs,
#: where coalescing runs along S. Dropped after that measurement, never within 5% of best: 2x4096/w8 (best ratio
#: 1.20), 8x1024/w4 (1.18), 64x64/w4 (1.22).
ROWWISE = KernelConfigs(
    name="rowwise_scale_and_cast",
    cuda=(
        triton.Config({"BLOCK_S": 1, "BLOCK_L": 8192}, num_warps=8),
        triton.Config({"BLOCK_S": 1, "BLOCK_L": 4096}, num_warps=8),
        triton.Config({"BLOCK_S": 4, "BLOCK_L": 2048}, num_warps=8),
        triton.Config({"BLOCK_S": 16, "BLOCK_L": 512}, num_warps=4),
        triton.Config({"BLOCK_S": 32, "BLOCK_L": 256}, num_warps=4),
    ),
    rocm=triton.Config({"BLOCK_S": 4, "BLOCK_L": 2048}, num_warps=8),
    interpreter=triton.Config({"BLOCK_S": 16, "BLOCK_L": 32}, num_warps=4),
    key=("B", "S", "L", "stride_xb", "stride_xs", "stride_xl", "FP8_DTYPE", "POW2"),
)

#: Atomic transpose method, both kernels: tile (BLOCK_K rows, BLOCK_N reduced elements) of one expert. Measured on
#: the H200 like ROWWISE (5 points): every candidate is within 5% of best somewhere; 64x256/w8 is 4.8x off at the
#: smallest MoE shape but best on strided inputs, which is what autotuning is for.
_TRANSPOSE_TILES_CUDA = (
    triton.Config({"BLOCK_K": 16, "BLOCK_N": 512}, num_warps=4),
    triton.Config({"BLOCK_K": 32, "BLOCK_N": 128}, num_warps=4),
    triton.Config({"BLOCK_K": 64, "BLOCK_N": 128}, num_warps=4),
    triton.Config({"BLOCK_K": 64, "BLOCK_N": 256}, num_warps=8),
    triton.Config({"BLOCK_K": 128, "BLOCK_N": 128}, num_warps=8),
)
_TRANSPOSE_KEY = ("E", "K", "N", "stride_xe", "stride_xk", "stride_xn")

#: Kernel 1 computes amax only, so the fp8 format and pow2 flag do not reach it.
TRANSPOSE_AMAX = KernelConfigs(
    name="rowwise_3d_transpose_rhs_amax",
    cuda=_TRANSPOSE_TILES_CUDA,
    rocm=triton.Config({"BLOCK_K": 64, "BLOCK_N": 128}, num_warps=8),
    interpreter=triton.Config({"BLOCK_K": 16, "BLOCK_N": 32}, num_warps=4),
    key=_TRANSPOSE_KEY,
)

TRANSPOSE_QUANTIZE = KernelConfigs(
    name="rowwise_3d_transpose_rhs_quantize",
    cuda=_TRANSPOSE_TILES_CUDA,
    rocm=triton.Config({"BLOCK_K": 64, "BLOCK_N": 128}, num_warps=8),
    interpreter=triton.Config({"BLOCK_K": 16, "BLOCK_N": 32}, num_warps=4),
    key=(*_TRANSPOSE_KEY, "FP8_DTYPE", "POW2"),
)
