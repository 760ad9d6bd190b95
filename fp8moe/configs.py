"""Launch-config policy: which block sizes a kernel runs with on each backend, and how a launch is issued.

Configs change speed, never bytes (every kernel's amax is an exact max and the cast is elementwise, so tiling cannot
change a result; the CPU tests run the interpreter's blocks, and tests/test_benchmark_tables.py and the H200 runs
every CUDA candidate, against the same reference). The policy per backend:

- CUDA: ``triton.autotune`` over a short candidate list. The key names every launch argument that changes the best
  config or the result: shape dims, strides (layout), the fp8 format and the pow2 flag; Triton appends the dtype of
  every tensor argument itself. A list may split its candidates by view (:attr:`KernelConfigs.view`): the per-group
  kernel tunes a launch contiguous along its jagged dim over the tiles measured for that view, and a transposing
  one over the others. Problems under AUTOTUNE_MIN_ELEMENTS take the candidate with the smallest tile
  instead: they are launch-latency bound, so tuning cannot pay back its compile-and-measure cost (with autotuning on
  every tiny shape, the H200 kernel tests got through 31% in 185 s, benchmarks/results/README.md).
- ROCm: one fixed config per kernel. Autotuning there costs a device sync per new key, hundreds per MoE training
  step (SPEC §7).
- Interpreter: blocks sized from the problem (:class:`InterpreterTiles`, :func:`interpreter_block`). Every program
  instance and every loop iteration costs Python time there while the work inside a block is one numpy call, so few
  large programs are fast (a fixed 16 x 32 tile made one 1000 x 100 per-group compare take ~30 s on 2 cores). The
  rule keeps the paths the CPU tests need: a reduced dim of more than 32 elements spans two or more blocks (the
  two-pass loop, a ragged tail unless its size is a power of two), one of at most 32 is one block (the one-pass
  path); a row dim of 2 to 64 elements spans two blocks (row tails), a longer one is one block.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
import triton
from triton.runtime.autotuner import Autotuner, Heuristics

from fp8moe import replay
from fp8moe.backend import Backend, launch_device

__all__ = [
    "AUTOTUNE_MIN_ELEMENTS",
    "COLWISE_3D_KERNEL",
    "COLWISE_3D_KERNELS",
    "CONFIGS_BY_SPEC",
    "COOPERATIVE_LISTS",
    "COOP_COLUMNS",
    "COOP_COLUMNS_MIN_K",
    "COOP_TRANSPOSE",
    "COOP_TRANSPOSE_SHORT_ROWS",
    "FUSED_ACTIVATIONS",
    "FUSED_ACTIVATIONS_CHOICES",
    "FUSED_ACTIVATIONS_MIN_MEAN_GROUP",
    "GROUP_CHUNKS",
    "GROUP_COOP",
    "GROUP_COOP_CAP",
    "GROUP_COOP_COUNT_LINES",
    "GROUP_TILES",
    "INT32_MAX",
    "INTERPRETER_MAX_BLOCK",
    "INTERPRETER_MAX_TILE",
    "INTERPRETER_ONE_PASS_UP_TO",
    "INTERPRETER_ROW_SPLIT_UP_TO",
    "JAGGED_PAIR_AMAX",
    "JAGGED_PAIR_CAST",
    "LAST_CONFIG",
    "PAIR_AMAX",
    "PAIR_CAST",
    "PAIR_SCALES",
    "PER_GROUP",
    "PER_GROUP_DUAL",
    "PER_GROUP_KERNEL",
    "PER_GROUP_KERNELS",
    "PER_GROUP_VIEWS",
    "RESULT_ARGS",
    "ROWWISE",
    "TRANSPOSE_AMAX",
    "TRANSPOSE_ATOMIC_KERNEL",
    "TRANSPOSE_ATOMIC_KERNELS",
    "TRANSPOSE_QUANTIZE",
    "InterpreterTiles",
    "KernelConfigs",
    "autotuned",
    "colwise_3d_kernel",
    "coop_chunks",
    "coop_config",
    "describe",
    "forced_kernel",
    "forget_tuning",
    "fuse_activations",
    "interpreter_block",
    "is_transposing_view",
    "launch",
    "needs_int64_index",
    "per_group_kernel",
    "per_group_view",
    "transpose_atomic_kernel",
]

#: Below this many elements in the largest tensor argument, CUDA launches use a fixed config instead of autotuning.
#: 2^20 bf16 elements is 2 MiB: about 1 us of traffic at 4 TB/s, under the ~5 us a launch costs anyway.
AUTOTUNE_MIN_ELEMENTS = 1 << 20

#: Largest interpreter block along one dim, and largest tile (the product of a config's blocks; the largest block is
#: halved until the tile fits). A tile is one numpy array per temporary (2^20 f32 = 4 MiB), while each tile costs
#: Python time per interpreted op: a 65,536-element row took 0.175 s of CPU per launch in 4096-element tiles and
#: 0.051 s in 16384-element ones (this machine, triton 3.9).
INTERPRETER_MAX_BLOCK = 16384
INTERPRETER_MAX_TILE = 1 << 20

#: Largest offset int32 index arithmetic can hold.
INT32_MAX = 2**31 - 1

#: Launch arguments that change the result. Every autotune key contains those its kernel takes: a cached choice
#: must never be reused for a call that computes something else (SPEC §6: anything cached per shape must key on
#: everything that changes the result).
RESULT_ARGS: tuple[str, ...] = ("FP8_DTYPE", "ROUND_POW2")

Grid = Callable[[Mapping[str, object]], tuple[int, ...]]


def interpreter_block(extent: int, whole_up_to: int = 1, split_up_to: int | None = None) -> int:
    """The interpreter's block along a dim of ``extent`` elements.

    A dim of at most ``whole_up_to`` elements, or of more than ``split_up_to``, is one block (the power of two at or
    above it, at most INTERPRETER_MAX_BLOCK). Any other dim gets the power of two at or above half of it: it spans at
    least two blocks, the last one partial unless the extent is a power of two (multi-block loops and tail masks run).
    """
    if extent <= whole_up_to or (split_up_to is not None and extent > split_up_to):
        return min(1 << max(extent - 1, 0).bit_length(), INTERPRETER_MAX_BLOCK)
    half = -(-extent // 2)
    return min(1 << (half - 1).bit_length(), INTERPRETER_MAX_BLOCK)


#: Reduced dims of at most this many elements are one interpreter block, so the one-pass path of the row kernels
#: runs in the CPU tests (shapes with a reduced dim of 24) beside the two-pass loop (40 = 32 + 8).
INTERPRETER_ONE_PASS_UP_TO = 32

#: Row dims (the grid's) of more than this many elements are one interpreter block: each program instance costs
#: ~80 ms of interpreted ops (a 64-row per-group program, this machine), so fewer programs are faster, while the test
#: shapes (12 to 40 rows) still split into two blocks with a row tail.
INTERPRETER_ROW_SPLIT_UP_TO = 64


@dataclass(frozen=True)
class InterpreterTiles:
    """The interpreter's launch config of one kernel, sized from each launch (see :func:`interpreter_block`).

    Attributes:
        extents: block constexpr name -> the launch arguments whose largest value is that block's dim.
        reduced: the block constexpr along the reduced dim (one block up to INTERPRETER_ONE_PASS_UP_TO elements).
        num_warps: recorded in the config; the interpreter runs a program as one numpy computation either way.
    """

    extents: Mapping[str, tuple[str, ...]]
    reduced: str
    num_warps: int = 4

    def config(self, args: Mapping[str, object]) -> triton.Config:
        """The config for one launch's arguments."""
        blocks = {
            name: interpreter_block(max(int(args[a]) for a in dims), INTERPRETER_ONE_PASS_UP_TO)
            if name == self.reduced
            else interpreter_block(max(int(args[a]) for a in dims), split_up_to=INTERPRETER_ROW_SPLIT_UP_TO)
            for name, dims in self.extents.items()
        }
        while math.prod(blocks.values()) > INTERPRETER_MAX_TILE:
            largest = max(blocks, key=blocks.get)
            blocks[largest] //= 2
        return triton.Config(blocks, num_warps=self.num_warps)


@dataclass(frozen=True)
class KernelConfigs:
    """The launch configs of one kernel on every backend.

    Attributes:
        name: the kernel's name (identifies its autotuner).
        cuda: candidates ``triton.autotune`` measures on CUDA.
        rocm: the fixed ROCm config.
        interpreter: the interpreter's blocks, sized from each launch.
        key: names of the launch arguments the CUDA autotune cache keys on: shape dims, strides, and every one of
            RESULT_ARGS the kernel takes (tests/test_configs.py checks this against each kernel's signature).
        rule: for kernels that never autotune, the CUDA and ROCm config as a function of (backend, args); ``cuda``
            then lists the candidates benchmarks/tune_configs.py times against it.
        view: for lists whose candidates suit one memory view of the launch each, the view of a launch's ``args``
            (a key of ``cuda_by_view``); its autotuner times only that view's candidates. None: every launch tunes
            over all of ``cuda``. The view must be a function of key arguments (the per-key cache assumes it).
        cuda_by_view: view -> the candidates (as :func:`describe` names them) its launches autotune over. Every
            name must be one of ``cuda``, and every candidate of ``cuda`` in some view.
    """

    name: str
    cuda: tuple[triton.Config, ...]
    rocm: triton.Config
    interpreter: InterpreterTiles
    key: tuple[str, ...]
    rule: Callable[[Backend, Mapping[str, object]], triton.Config] | None = None
    view: Callable[[Mapping[str, object]], str] | None = None
    cuda_by_view: Mapping[str, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        if (self.view is None) != (self.cuda_by_view is None):
            raise ValueError(f"{self.name}: view and cuda_by_view come together")
        if self.cuda_by_view is not None:
            listed = [describe(c) for c in self.cuda]
            for view, names in self.cuda_by_view.items():
                unknown = sorted(set(names) - set(listed))
                if unknown or not names:
                    raise ValueError(f"{self.name}: view {view!r} names {unknown or 'no'} candidates of {listed}")
            orphans = sorted(set(listed) - {n for names in self.cuda_by_view.values() for n in names})
            if orphans:
                raise ValueError(f"{self.name}: candidates {orphans} are in no view's list")

    def view_of(self, args: Mapping[str, object]) -> str | None:
        """The view of a launch's ``args``; None for a list without views."""
        return None if self.view is None else self.view(args)

    def autotune_candidates(self, view: str | None) -> tuple[triton.Config, ...]:
        """The candidates the autotuner of ``view`` (None: a list without views) times, in the order of ``cuda``."""
        if view is None:
            return self.cuda
        names = self.cuda_by_view[view]
        return tuple(c for c in self.cuda if describe(c) in names)

    def fixed(self, backend: Backend, args: Mapping[str, object]) -> triton.Config:
        """The single config used without autotuning: the interpreter's for these launch ``args``, the rule's where
        there is one, ROCm's, and on CUDA for small problems the candidate with the smallest tile (which gives a
        small problem the most programs)."""
        if backend.kind == "interpreter":
            return self.interpreter.config(args)
        if self.rule is not None:
            return self.rule(backend, args)
        if backend.kind == "rocm":
            return self.rocm
        return self.smallest_cuda

    @functools.cached_property
    def smallest_cuda(self) -> triton.Config:
        """The CUDA candidate with the smallest tile (the first of equals), chosen once: this runs on every launch."""
        return min(self.cuda, key=lambda c: _tile_elements(c.kwargs))


def _tile_elements(kwargs: Mapping[str, object]) -> int:
    """Elements of a config's tile: the product of its BLOCK_* kwargs (flags such as GROUPS_FASTEST are not sizes)."""
    n = 1
    for name, size in kwargs.items():
        if name.startswith("BLOCK_"):
            n *= size
    return n


_AUTOTUNED: dict[tuple[str, str | None], triton.runtime.Autotuner] = {}


def autotuned(
    kernel: triton.runtime.JITFunction, configs: KernelConfigs, args: Mapping[str, object]
) -> triton.runtime.Autotuner:
    """The autotuned wrapper of ``kernel`` for the view of ``args``, built once per kernel and view (it holds the
    per-key cache)."""
    view = configs.view_of(args)
    tuner = _AUTOTUNED.get((configs.name, view))
    if tuner is None:
        tuner = triton.autotune(configs=list(configs.autotune_candidates(view)), key=list(configs.key))(kernel)
        _AUTOTUNED[(configs.name, view)] = tuner
    return tuner


def forget_tuning(names: Iterable[str]) -> None:
    """Drop the autotuner's choices of the kernels ``names`` (KernelConfigs names), for every key: their next launch
    times its candidates again, on that launch's own arguments.

    For benchmarks: a per-group key is the shape, not the group layout, which lives on the device (SPEC §10.3), so
    a process that tuned at one layout keeps that tile at every other. Forgetting before each layout measures what
    a process whose calls all have that layout gets. The kernels' autotuners are dropped with their per-key caches
    and rebuilt on the next launch (their compiled kernels stay cached by Triton); every launch plan
    (fp8moe.replay) is forgotten too, since a plan replays the config it recorded.
    """
    replay.forget()
    names = set(names)
    for key in [key for key in _CHOSEN if key[0] in names]:
        del _CHOSEN[key]
    for key in [key for key in _AUTOTUNED if key[0] in names]:
        del _AUTOTUNED[key]


#: (kernel name, autotune key values, tensor dtypes) -> the config the autotuner chose for that key. Later launches
#: with the key go straight to the kernel: the autotuner's own call path cost 16 us per launch on the H200 host
#: (benchmarks/results/h200-host-overhead-<date>.txt: rowwise launch autotuned 75.7 us vs fixed config 59.8 us).
_CHOSEN: dict[tuple, triton.Config] = {}

#: KernelConfigs name -> the config of that kernel's latest launch (None while the autotuner's first run picks it):
#: what fp8moe.bench reports beside each time.
LAST_CONFIG: dict[str, triton.Config | None] = {}


#: ``<blocks>/w<warps>[/r<registers>][/g][/t|[/o<columns>][/e|/x<chunks>]][/l][/ev<1|2>]``, the form
#: :func:`describe` writes and :func:`parse_config` reads.
_DESCRIPTION = re.compile(
    r"(?P<blocks>\d+(?:x\d+)*)/w(?P<warps>\d+)(?:/r(?P<cap>\d+))?(?P<order>/g)?"
    r"(?:(?P<two_pass>/t)|(?:/o(?P<one_read_k>\d+))?(?:(?P<edges_in_tile>/e)|/x(?P<extra_chunks>\d+))?)"
    r"(?P<edge_loop>/l)?(?:/ev(?P<l2_hints>[12]))?"
)
_DESCRIPTION_FORM = "/w<warps>[/r<registers>][/g][/t|[/o<columns>][/e|/x<chunks>]][/l][/ev<1|2>]"


def describe(config: triton.Config | None) -> str:
    """A config as ``<blocks>/w<warps>``, e.g. ``64x64/w4`` (BLOCK_R x BLOCK_K, 4 warps), with ``/r<n>`` for a
    register cap of n per thread, ``/g`` for a jagged grid with groups fastest (GROUPS_FASTEST,
    fp8moe.kernels._per_group.jagged_grid), ``/t`` for a jagged span kernel without its one-read branch
    (ONE_READ=False, fp8moe.kernels._span.quantize_group_span), ``/o<n>`` for one whose one-read tile is n
    columns wide (ONE_READ_K), ``/e`` for one whose one-read tile holds the edges (EDGES_IN_TILE) and ``/l`` for
    one that takes the partial edge chunks one at a time (EDGE_LOOP), ``/x<n>`` for one whose one-read path also
    takes spans n 16-column chunks longer (EXTRA_CHUNKS), ``/ev<n>`` for one whose accesses carry L2 eviction
    priorities (L2_HINTS = n: 1 evicts last reads and stores first, 2 also keeps pass 1's reads); ``-`` for None."""
    if config is None:
        return "-"
    tile = "x".join(str(v) for k, v in config.kwargs.items() if k.startswith("BLOCK_"))
    cap = f"/r{config.maxnreg}" if getattr(config, "maxnreg", None) else ""
    order = "/g" if config.kwargs.get("GROUPS_FASTEST") else ""
    two_pass = "/t" if config.kwargs.get("ONE_READ") is False else ""
    one_read_k = f"/o{config.kwargs['ONE_READ_K']}" if config.kwargs.get("ONE_READ_K") else ""
    edges_in_tile = "/e" if config.kwargs.get("EDGES_IN_TILE") else ""
    extra = f"/x{config.kwargs['EXTRA_CHUNKS']}" if config.kwargs.get("EXTRA_CHUNKS") else ""
    edge_loop = "/l" if config.kwargs.get("EDGE_LOOP") else ""
    hints = f"/ev{config.kwargs['L2_HINTS']}" if config.kwargs.get("L2_HINTS") else ""
    return f"{tile}/w{config.num_warps}{cap}{order}{two_pass}{one_read_k}{edges_in_tile}{extra}{edge_loop}{hints}"


def parse_config(description: str, block_names: list[str]) -> triton.Config:
    """The inverse of :func:`describe` for a list whose block kwargs are ``block_names`` (in order).

    Raises:
        ValueError: ``description`` is not in describe's form or names another number of blocks.
    """
    match = _DESCRIPTION.fullmatch(description)
    blocks = [int(v) for v in match.group("blocks").split("x")] if match else []
    if len(blocks) != len(block_names):
        raise ValueError(f"{description!r} is not {'x'.join(block_names)}{_DESCRIPTION_FORM}")
    kwargs: dict[str, object] = dict(zip(block_names, blocks))
    if match.group("order"):
        kwargs["GROUPS_FASTEST"] = True
    if match.group("two_pass"):
        kwargs["ONE_READ"] = False
    if match.group("one_read_k"):
        one_read_k = int(match.group("one_read_k"))
        if one_read_k & (one_read_k - 1) or one_read_k < 16:
            raise ValueError(f"{description!r}: the one-read tile must be a power of two of at least 16 columns")
        kwargs["ONE_READ_K"] = one_read_k
    if match.group("edges_in_tile"):
        kwargs["EDGES_IN_TILE"] = True
    if match.group("extra_chunks"):
        kwargs["EXTRA_CHUNKS"] = int(match.group("extra_chunks"))
    if match.group("edge_loop"):
        kwargs["EDGE_LOOP"] = True
    if match.group("l2_hints"):
        kwargs["L2_HINTS"] = int(match.group("l2_hints"))
    cap = int(match.group("cap")) if match.group("cap") else None
    return triton.Config(kwargs, num_warps=int(match.group("warps")), maxnreg=cap)


def launch(
    kernel, configs: KernelConfigs, backend: Backend, grid: Grid, config: triton.Config | None = None, **args
) -> None:
    """Launch ``kernel`` with ``args`` under the backend's config policy.

    Args:
        kernel: a ``@triton.jit`` function (possibly wrapped by ``triton.heuristics``).
        configs: the kernel's configs.
        backend: where it runs; ``backend.autotune`` selects autotuning.
        grid: maps the launch's meta-parameters (``args`` plus the config's kwargs) to the grid. It must read
            nothing else: a launch plan replays the grid it returned for every call with the same arguments but
            tensors (fp8moe.replay).
        config: the config to launch with (a launcher that sized a workspace from it); None applies the policy.
        **args: every kernel argument by name.

    A kernel that declares DEPENDENT_LAUNCH runs as a programmatic dependent launch where the backend asks for it
    (``backend.dependent_launch``): DEPENDENT_LAUNCH=True and Triton's ``launch_pdl``, which the compiled kernel keeps,
    so a launch plan's replay launches it the same way.
    """
    tensors = [v for v in args.values() if isinstance(v, torch.Tensor)]
    device = tensors[0].device if tensors else None
    largest = max((t.numel() for t in tensors), default=0)
    dependent = {}
    if backend.dependent_launch and declares(kernel, "DEPENDENT_LAUNCH"):
        args = {**args, "DEPENDENT_LAUNCH": True}
        dependent = {"launch_pdl": True}
    with launch_device(device):
        if config is None and backend.autotune and configs.rule is None and largest >= AUTOTUNE_MIN_ELEMENTS:
            # The same key triton.autotune uses: the key arguments plus every tensor argument's dtype.
            key = (configs.name, *(args.get(k) for k in configs.key), *(t.dtype for t in tensors))
            config = _CHOSEN.get(key)
            if config is None:
                recorder = replay.active_recorder()
                if recorder is not None:
                    recorder.not_replayable()  # the tuner's timing runs are no launch to replay
                tuner = autotuned(kernel, configs, args)
                tuner[grid](**args, **dependent)
                chosen = getattr(tuner, "best_config", None)
                if isinstance(chosen, triton.Config):
                    _CHOSEN[key] = chosen
                LAST_CONFIG[configs.name] = chosen if isinstance(chosen, triton.Config) else None
                return
        elif config is None:
            config = configs.fixed(backend, args)
        LAST_CONFIG[configs.name] = config
        meta = {**args, **config.kwargs}
        dims = grid(meta)
        options = {"maxnreg": config.maxnreg} if getattr(config, "maxnreg", None) else {}
        compiled = kernel[dims](
            **meta, num_warps=config.num_warps, num_stages=config.num_stages, **options, **dependent
        )
        recorder = replay.active_recorder()
        if recorder is not None:
            if backend.kind == "cuda":
                recorder.launched(kernel, compiled, (*dims, 1, 1)[:3], meta, configs.name, config, LAST_CONFIG)
            else:
                recorder.not_replayable()


def jit_function(kernel):
    """The JIT (or interpreted) function under ``kernel``'s ``triton.heuristics`` or autotune wrappers: the object
    that holds the parameter names and the compiled binaries; ``kernel`` itself when nothing wraps it. A wrapper
    answers ``arg_names`` too, so only its type tells it apart."""
    while isinstance(kernel, (Autotuner, Heuristics)):
        kernel = kernel.fn
    return kernel


@functools.cache
def declares(kernel, name: str) -> bool:
    """Whether the JIT function under ``kernel`` (:func:`jit_function`) has a parameter ``name``."""
    return name in getattr(jit_function(kernel), "arg_names", ())


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

#: Batched row kernel, tile (BLOCK_S rows, BLOCK_L reduced elements). Chosen by measurement on the H200: the
#: candidates best or within 5% of best at one or more points of benchmarks/results/h200-configs-run1.md (SPEC §7 MoE
#: shapes, both layouts: 1x8192, 1x4096, 4x2048 on long canonical rows) and of h200-configs-2026-12-01.md (issue #11
#: shapes with the aligned span loop: 2x2048/w4 best on 16640x2048 and 16640x5120 rows, by 5-12%; 16x256/w4 best on
#: every row-major colwise-3D input, 16x512/w4 and 64x128/w8 within 5% there). Dropped there, never within 5%:
#: 8x2048/w8, 8x256/w4, 32x512/w8, 64x64/w4 (and earlier 2x4096, 8x1024).
ROWWISE = KernelConfigs(
    name="rowwise_scale_and_cast",
    cuda=(
        triton.Config({"BLOCK_S": 1, "BLOCK_L": 8192}, num_warps=8),
        triton.Config({"BLOCK_S": 1, "BLOCK_L": 4096}, num_warps=8),
        triton.Config({"BLOCK_S": 2, "BLOCK_L": 2048}, num_warps=4),
        triton.Config({"BLOCK_S": 4, "BLOCK_L": 2048}, num_warps=8),
        triton.Config({"BLOCK_S": 16, "BLOCK_L": 256}, num_warps=4),
        triton.Config({"BLOCK_S": 16, "BLOCK_L": 512}, num_warps=4),
        triton.Config({"BLOCK_S": 32, "BLOCK_L": 256}, num_warps=4),
        triton.Config({"BLOCK_S": 64, "BLOCK_L": 128}, num_warps=8),
    ),
    rocm=triton.Config({"BLOCK_S": 4, "BLOCK_L": 2048}, num_warps=8),
    interpreter=InterpreterTiles({"BLOCK_S": ("S",), "BLOCK_L": ("L",)}, reduced="BLOCK_L"),
    key=("B", "S", "L", "stride_xb", "stride_xs", "stride_xl", "FP8_DTYPE", "ROUND_POW2"),
)

#: Atomic transpose method, both kernels: tile (BLOCK_K rows, BLOCK_N reduced elements) of one expert. Measured on
#: the H200 (h200-configs-run1.md, 5 points: every candidate within 5% of best somewhere; h200-configs-2026-12-01.md,
#: issue #11 shapes: 8x512/w4 best at 1x8192x5120 and 64x2048x1408, and every tile within 5% at 16x8192x5120, where
#: the method is bound by its two reads of x). 8x1024, 16x1024 and 32x256 were never best anywhere and are not kept.
_TRANSPOSE_TILES_CUDA = (
    triton.Config({"BLOCK_K": 8, "BLOCK_N": 512}, num_warps=4),
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
    interpreter=InterpreterTiles({"BLOCK_K": ("K",), "BLOCK_N": ("N",)}, reduced="BLOCK_N"),
    key=_TRANSPOSE_KEY,
)

TRANSPOSE_QUANTIZE = KernelConfigs(
    name="rowwise_3d_transpose_rhs_quantize",
    cuda=_TRANSPOSE_TILES_CUDA,
    rocm=triton.Config({"BLOCK_K": 64, "BLOCK_N": 128}, num_warps=8),
    interpreter=InterpreterTiles({"BLOCK_K": ("K",), "BLOCK_N": ("N",)}, reduced="BLOCK_N"),
    key=(*_TRANSPOSE_KEY, "FP8_DTYPE", "ROUND_POW2"),
)


#: The fused weight pair (fp8moe.kernels.colwise_3d_and_transpose_rhs): tile (BLOCK_P positions along x's
#: contiguous dim, BLOCK_Q columns across it), CHUNK_TILES tiles per program. Both kernels load tiles contiguous
#: along P, like the per-group kernels' transposing views, whose best tiles were 64x64/w4 and 64x128/w4
#: (PER_GROUP); the cast kernel's BLOCK_Q must be a multiple of 16 (its word stores). Timed on the H200 by
#: benchmarks/probe_pairs.py (benchmarks/results/h200-s13-summary.md, h200-s14-summary.md).
_PAIR_TILES_CUDA = (
    triton.Config({"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 8}, num_warps=4),
    triton.Config({"BLOCK_P": 64, "BLOCK_Q": 128, "CHUNK_TILES": 4}, num_warps=4),
    triton.Config({"BLOCK_P": 128, "BLOCK_Q": 32, "CHUNK_TILES": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 32}, num_warps=4),
    triton.Config({"BLOCK_P": 128, "BLOCK_Q": 64, "CHUNK_TILES": 8}, num_warps=8),
    # Chunks of 256: more programs where 512-row chunks leave a partial last wave (the activation pair at 16384 x
    # 7168: 2296 programs, 8 resident per SM, 2.2 waves; benchmarks/results/h200-s14-summary.md).
    triton.Config({"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 4}, num_warps=4),
    triton.Config({"BLOCK_P": 128, "BLOCK_Q": 32, "CHUNK_TILES": 8}, num_warps=4),
)
_PAIR_KEY = ("E", "P", "Q", "stride_xe", "stride_xq")

#: The fused pair's amax kernel: it folds into a zeroed workspace by atomic max, which the autotuner's repeated runs
#: leave as it is (a max is idempotent).
PAIR_AMAX = KernelConfigs(
    name="colwise_3d_and_transpose_rhs_amax",
    cuda=_PAIR_TILES_CUDA,
    rocm=triton.Config({"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 8}, num_warps=4),
    interpreter=InterpreterTiles({"BLOCK_P": ("P",), "BLOCK_Q": ("Q",)}, reduced="BLOCK_Q"),
    key=_PAIR_KEY,
)

#: The fused pair's scales kernel: one elementwise pass over the E * (K + N) folded amaxes.
PAIR_SCALES = KernelConfigs(
    name="colwise_3d_and_transpose_rhs_scales",
    cuda=(triton.Config({"BLOCK": 1024}, num_warps=4),),
    rocm=triton.Config({"BLOCK": 1024}, num_warps=4),
    interpreter=InterpreterTiles({"BLOCK": ("N",)}, reduced="BLOCK"),
    key=("N", "N_P", "FP8_MAX", "ROUND_POW2"),
)

#: The cast kernels take the same candidates. Variants whose cast loop issued each tile's loads one iteration ahead
#: (64x64/w4/c8, 128x32/w4/c8, 64x64/w4/c4) were candidates in sessions 14-15; the autotuner never picked one, at any
#: of the 9 pair points of benchmarks/results/h200-s15-call1-pair.log (64x128/w4/c4 without it won all 9), so session
#: 16 removed them and the loop variant (three fewer candidates to time on a first call).
PAIR_CAST = KernelConfigs(
    name="colwise_3d_and_transpose_rhs_cast",
    cuda=_PAIR_TILES_CUDA,
    rocm=triton.Config({"BLOCK_P": 64, "BLOCK_Q": 64, "CHUNK_TILES": 8}, num_warps=4),
    interpreter=InterpreterTiles({"BLOCK_P": ("P",), "BLOCK_Q": ("Q",)}, reduced="BLOCK_Q"),
    key=(*_PAIR_KEY, "FP8_DTYPE", "ROUND_POW2"),
)

#: The fused activation pair (fp8moe.kernels.rowwise_and_per_group_colwise): the weight pair's tiles over (P = K,
#: Q = the jagged rows), chunks of CHUNK_TILES tiles of a group's rows.
_JAGGED_PAIR_KEY = ("G", "M", "P", "stride_xq")

JAGGED_PAIR_AMAX = KernelConfigs(
    name="rowwise_and_per_group_colwise_amax",
    cuda=_PAIR_TILES_CUDA,
    rocm=PAIR_AMAX.rocm,
    interpreter=InterpreterTiles({"BLOCK_P": ("P",), "BLOCK_Q": ("M",)}, reduced="BLOCK_Q"),
    key=_JAGGED_PAIR_KEY,
)

JAGGED_PAIR_CAST = KernelConfigs(
    name="rowwise_and_per_group_colwise_cast",
    cuda=_PAIR_TILES_CUDA,
    rocm=PAIR_CAST.rocm,
    interpreter=InterpreterTiles({"BLOCK_P": ("P",), "BLOCK_Q": ("M",)}, reduced="BLOCK_Q"),
    key=(*_JAGGED_PAIR_KEY, "FP8_DTYPE", "ROUND_POW2"),
)

# ----------------------------------------------------------------------------------------------------------------
# The configs of the per-group kernels (fp8moe/kernels/_per_group.py, per_group_colwise_scales_dual.py)
# ----------------------------------------------------------------------------------------------------------------


def is_transposing_view(args: Mapping[str, object]) -> bool:
    """Whether a jagged launch's x is contiguous along R and not along K (the colwise ops' view, whose q is stored
    along K): its tiles must be tall in R to coalesce, where a view contiguous along K (the rowwise op's) needs wide
    ones."""
    return args["stride_xr"] == 1 and args["stride_xk"] != 1


def per_group_view(args: Mapping[str, object]) -> str:
    """The key of PER_GROUP_VIEWS a per-group launch autotunes under: "transposing" or "along_k"."""
    return "transposing" if is_transposing_view(args) else "along_k"


#: The candidates of PER_GROUP each view autotunes over. A tile measured more than 5% slower than the best listed tile
#: at every point of one view where it was timed (H200 runs, and the H100's of session 23) is left out of that view (the
#: rule that keeps a candidate in a list, SPEC §10.3), so a new key times 9 or 10 candidates instead of 15. The
#: evidence, as time over the best listed tile at that view's points: the wide tiles 4x512/w4, 8x512/w8 and 4x1024/w8
#: on the transposing view 1.56-9.9x (h200-configs-2026-12-01.md, h200-s7-tune-candidates.md; 4x1024/w8/g 2.48-2.87x,
#: h100-s23-call1-ab-main.md and h200-s24-call1-ab-main.md), 32x128/w8/g 1.11-1.32x and 32x128/w4/g/o256 1.10-1.16x
#: there (the same two files, h200-s24-call3-uniform.md); the tall tiles on the view along K: 128x64/w8 1.12-1.53x
#: (h200-configs-2026-12-01.md), 128x32/w4/g 1.79-1.90x, 64x128/w4 1.18-1.29x, 64x128/w4/g 1.07-1.16x, 64x64/w4/g/o128/e
#: 1.10-1.20x (h200-s21-call1-ab-main.md, h100-s23-call1-ab-main.md, h200-s24-call1-ab-main.md). Tiles within 5%
#: somewhere on both views stay in both.
PER_GROUP_VIEWS: dict[str, tuple[str, ...]] = {
    "along_k": (
        "4x512/w4",
        "4x1024/w8/g",
        "4x1024/w8/g/ev1",
        "8x512/w8",
        "32x128/w8/g",
        "32x128/w8/g/t",
        "32x128/w8/g/t/ev1",
        "32x128/w4/g/o256",
        "64x64/w4/g",
        "64x64/w4/g/ev2",
        "64x64/w4/g/o128/x1/l",
        "64x128/w4/g/o256/l",
    ),
    "transposing": (
        "32x128/w8/g/t",
        "32x128/w8/g/t/ev1",
        "64x64/w4/g",
        "64x64/w4/g/ev1",
        "64x64/w4/g/o128/x1/l",
        "64x64/w4/g/o128/e",
        "64x128/w4",
        "64x128/w4/ev1",
        "64x128/w4/g",
        "64x128/w4/g/ev1",
        "64x128/w4/g/o256/l",
        "128x32/w4/g",
        "128x64/w8",
    ),
}


#: Tile (BLOCK_R rows, BLOCK_K jagged columns) of the per-group kernel. The rowwise op reads along K (wide-K tiles
#: coalesce), the colwise ops read along R (x.t() of a row-major input: tall-R tiles coalesce) and store along K.
#: Chosen by measurement on the H200 at the 11 single-op points of issue #11 (benchmarks/results/
#: h200-configs-2026-12-01.md, 14 candidates): kept are those best or within 5% of best somewhere: 4x512/w4 (best
#: at G=16 rowwise; 4x1024/w8 and 8x512/w8 within 5% there), 32x128/w8 (best at G=64 rowwise), 64x64/w4 (best at
#: G=128 rowwise and 5 of 7 colwise points), 128x32/w4 and 128x64/w8 (colwise, G=16 and G=128). Large one-pass
#: tiles (64x256/w8, 1x4096/w8, ...) lose up to 10x: their 175-186 registers per thread leave one program per SM.
#: 64x128/w4 joined on 2026-12-02 (h200-s7-tune-candidates.md: best at 4 of 7 colwise points, 4% ahead of 64x64/w4
#: at G=64; the autotuner chose it at 5 colwise points of h200-bench-2026-12-02-s7.md). Measured the same day and
#: not kept: 32x256, 64x256, 16x512, 32x512 (1.3-6x slower colwise) and a one-pass tile of 256 or 512 columns beside
#: a 64-column two-pass loop (1.03-6.1x slower even with byte stores, h200-s7-tune-one-pass-tiles.md). Timed on
#: 2026-12-02 and not kept either: smaller per-thread tiles (64x64/w8, 32x64/w4 and /w2, 64x32/w4 and /w2, 128x32/w8:
#: at most 3% ahead anywhere, h200-s8-tune-small-tiles.md) and persistent grids (slower than the best plain tile at
#: all 19 points timed, 1.03-1.30x, h200-s8-tune-persistent.md; why: h200-bench-2026-12-02-s8-summary.md).
#: Tried on 2026-12-02 (session 10) and reverted: a resident launch of its own for the groups that fit one 256- or
#: 512-token tile beside a lean two-pass launch, 1.8-4.5x slower at every point (h200-s10-resident-call1.md).
#: Grid order (2026-12-05, h200-s21-call1-ab-main.md, each tile forced in both orders at the 14 per-group points):
#: groups fastest (``/g``, GROUPS_FASTEST) took 0.87-0.96x the time of the best plain tile at 11 points (rowwise
#: random 100.7 -> 87.5 us, rowwise G64 79.7 -> 71.8 us, colwise 16640x5120 G128 100.3 -> 93.1 us) and 1.00-1.03x at
#: the other three (colwise G16 and random: plain 64x128/w4 best). So the five tiles timed there run groups fastest,
#: 64x128/w4 in both orders; the three not timed in both orders keep the plain one. Span-kernel variants
#: (2026-12-05, session 23, on an H100: no H200 was lent; h100-s23-call1-ab-main.md, 25 candidates forced at the 14
#: points, each checked bitwise first) joined where they beat every listed tile: 64x64/w4/g/o128/e (a 128-token
#: one-read tile holding the edges beside the 64-token loop) at colwise G128, 0.91-0.92x (16640x5120: 110.4 ->
#: 100.4 us); 64x128/w4/g/o256/l (a 256-token one-read tile, edge chunks one at a time) at colwise G64, 0.96-0.99x
#: (16640x5120: 104.1 -> 99.5 us); 32x128/w8/g/t (no one-read branch) at colwise random groups, 0.97x (62.8 ->
#: 60.9 us). The other 20 were never more than 1% ahead of a listed tile and stay tune_configs candidates
#: (per-group-ledger.md). Session 24 forced the 38 candidates again, on an H200 (h200-s24-call1-ab-main.md), and two
#: rowwise tiles joined: 32x128/w4/g/o256 (a 256-token one-read tile beside a 128-token loop) at rowwise G64, 0.92x
#: (5120x16640: 71.9 -> 65.8 us, 84% -> 92% of copy), and 64x64/w4/g/o128/x1/l (a 128-token one-read tile that
#: also takes the 144-token groups, edge chunks one at a time) at rowwise G128, 0.94x (2048x16640: 31.2 -> 29.2
#: us, 78% -> 83%). On the H200 session 23's colwise additions held at G128 (64x64/w4/g/o128/e 0.95x of 64x64/w4/g)
#: but not at G64 (64x128/w4/g/o256/l 1.02-1.03x of 64x128/w4/g; kept for the H100, where it won); the two-pass
#: twins 64x128/w4/g/t and 64x64/w4/g/t were 0.98-1.00x of the best listed tile at 5 colwise points, too little
#: for two more autotune candidates per new key.
#: L2 eviction priorities (``/ev2``, L2_HINTS = 2, session 30, on an H100: h100-s30-call6-hints-configs.md, each
#: forced and bitwise at the seven size layouts of rowwise 5120x16640 G64): 64x64/w4/g/ev2 took 0.91-0.98x the time
#: of 64x64/w4/g at every layout (random16 157.4 -> 145.4 us), and Nsight Compute put its DRAM bytes at 1.14x the
#: ideal at random16 against 1.29x (h100-s30-call7-rowwise-ncu.md). It joined the rowwise view beside its source.
#: On the H200 (session 31, h200-s31-call1-hints-sizes-configs.md and h200-s31-call3-hints-points-configs.md, forced
#: and bitwise) /ev1 (last reads and stores evict-first) was within 1% of /ev2 or ahead, and two /ev1 twins joined
#: where they beat every listed tile timed beside them and ran 0.98x or less the autotuned bench of the same machine
#: (h200-s31-call3-against-call5.md): 32x128/w8/g/t/ev1, both views (rowwise random16 73.3 us against 77.0 for its
#: source and 77.1 autotuned; colwise random 50.9 against 51.5 and 53.1) and 64x64/w4/g/ev1, colwise (G128:
#: 16640x5120 79.6 against 83.2 and 83.8 us, 16640x2048 34.0 against 35.0 and 35.1 us). The hints
#: cost 1-4% where every group fits the one-read tile or the groups are long (G=16), so no tile is hinted alone.
#: Session 32 (on an H100, h100-s32-call6-7-against-call5.md) timed the other listed tiles beside their /ev1 twins
#: and three joined by the same rule: 4x1024/w8/g/ev1, rowwise (G16: 271.8 us against 303.9 for its source and 305.4
#: autotuned), 64x128/w4/ev1, colwise (random16: 47.0 against 49.1 and 49.4) and 64x128/w4/g/ev1, colwise (16640x2048
#: G64: 41.3 against 42.9 and 42.4). The bench under the new lists took those points from 87% to 98%, 69% to 73% and
#: 80% to 82% of the H100's copy bandwidth (h100-s32-call10-bench.md).
#: Each view autotunes over its own 12 or 13 of the 20 (PER_GROUP_VIEWS), not all of them.
PER_GROUP = KernelConfigs(
    name="per_group_scales",
    cuda=(
        triton.Config({"BLOCK_R": 4, "BLOCK_K": 512}, num_warps=4),
        triton.Config({"BLOCK_R": 4, "BLOCK_K": 1024, "GROUPS_FASTEST": True}, num_warps=8),
        triton.Config({"BLOCK_R": 4, "BLOCK_K": 1024, "GROUPS_FASTEST": True, "L2_HINTS": 1}, num_warps=8),
        triton.Config({"BLOCK_R": 8, "BLOCK_K": 512}, num_warps=8),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True}, num_warps=8),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True, "ONE_READ": False}, num_warps=8),
        triton.Config(
            {"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True, "ONE_READ": False, "L2_HINTS": 1}, num_warps=8
        ),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True, "ONE_READ_K": 256}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "L2_HINTS": 1}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "L2_HINTS": 2}, num_warps=4),
        triton.Config(
            {
                "BLOCK_R": 64,
                "BLOCK_K": 64,
                "GROUPS_FASTEST": True,
                "ONE_READ_K": 128,
                "EXTRA_CHUNKS": 1,
                "EDGE_LOOP": True,
            },
            num_warps=4,
        ),
        triton.Config(
            {"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "ONE_READ_K": 128, "EDGES_IN_TILE": True},
            num_warps=4,
        ),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128, "L2_HINTS": 1}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128, "GROUPS_FASTEST": True, "L2_HINTS": 1}, num_warps=4),
        triton.Config(
            {"BLOCK_R": 64, "BLOCK_K": 128, "GROUPS_FASTEST": True, "ONE_READ_K": 256, "EDGE_LOOP": True}, num_warps=4
        ),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 32, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 64}, num_warps=8),
    ),
    rocm=triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=8),
    interpreter=InterpreterTiles({"BLOCK_R": ("R",), "BLOCK_K": ("K",)}, reduced="BLOCK_K"),
    key=("R", "K", "G", "stride_xr", "stride_xk", "FP8_DTYPE", "ROUND_POW2"),
    view=per_group_view,
    cuda_by_view=PER_GROUP_VIEWS,
)

#: The dual op's tiles: its own autotuner, keyed on both tensors. At the 3 dual points of issue #11
#: (h200-configs-2026-12-01.md) 64x64/w4 was best everywhere and 128x32/w4 within 5% at G=128; 128x32 also wins the
#: single colwise op at G=16 (long groups), so both stay. Both run groups fastest since 2026-12-05: 0.89-0.96x the
#: best plain tile's time at all three points (h200-s21-call1-ab-main.md; 16640x5120x5120 G128 202.1 -> 179.9 us).
#: 64x64/w4/g/t (no one-read branch) joined in session 23: 0.95x at 16640x5120x5120 G128 on an H100 (215.5 -> 204.8
#: us), 1.06-1.08x at the two G64 points (h100-s23-call1-ab-main.md). 32x128/w4/g joined in session 26: on the
#: H200, under the f32 scale, 0.91x the best listed tile at random multiple-of-16 groups (16640x2048x2048 G64
#: random16: 85.4 against 94.1 us for 64x64/w4/g/t), 1.06x at the aligned G64 points and 1.44x at G128, where the
#: autotuner keeps the 64x64 tiles (h200-s26-call4-ab-main.md; random16 is what an FP8 MoE step feeds the op).
#: 64x64/w4/g/t/ev2 (L2 eviction priorities, L2_HINTS = 2) joined in session 30: on an H100, forced and bitwise at
#: the seven size layouts of 16640x2048x2048 G64, 0.86-0.90x the time of 64x64/w4/g/t at every one (aligned16 93.6
#: -> 84.2 us, random16 124.5 -> 109.1), DRAM bytes 1.08 -> 0.93x the ideal at aligned16 and 1.28 -> 1.06x at
#: random16 (h100-s30-call6-hints-configs.md, h100-s30-call8-dual-ncu.md). On the H200 (session 31) its DRAM bytes
#: were 0.91-1.01x the ideal at all seven size layouts against 0.99-1.26x unhinted (h200-s31-call2-ncu.md), and
#: 32x128/w4/g/ev1 joined by the same rule: at random16 78.3 us against 82.4 for 64x64/w4/g/t/ev2 forced beside it
#: and 82.3 autotuned, at 16640x2048x1408 56.8 against 58.2 autotuned (h200-s31-call3-against-call5.md).
PER_GROUP_DUAL = KernelConfigs(
    name="per_group_colwise_scales_dual",
    cuda=(
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "ONE_READ": False}, num_warps=4),
        triton.Config(
            {"BLOCK_R": 64, "BLOCK_K": 64, "GROUPS_FASTEST": True, "ONE_READ": False, "L2_HINTS": 2}, num_warps=4
        ),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 32, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True}, num_warps=4),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "GROUPS_FASTEST": True, "L2_HINTS": 1}, num_warps=4),
    ),
    rocm=PER_GROUP.rocm,
    interpreter=InterpreterTiles({"BLOCK_R": ("N1", "N2"), "BLOCK_K": ("K",)}, reduced="BLOCK_K"),
    key=("N1", "N2", "K", "G", "stride_x1n", "stride_x1k", "stride_x2n", "stride_x2k", "FP8_DTYPE", "ROUND_POW2"),
)


def _config_by_view(kernel_configs: KernelConfigs, backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """The rule of the cooperative jagged kernels: ROCm's one config; on CUDA the first candidate for a transposing
    view (x contiguous along R, q along K: the colwise ops), the second for a view contiguous along K."""
    if backend.kind == "rocm":
        return kernel_configs.rocm
    return kernel_configs.cuda[0] if is_transposing_view(args) else kernel_configs.cuda[1]


def _group_tiles_rule(backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """The one-read per-group kernel's tile (fp8moe.kernels._group_tiles): it never autotunes (its workspace is
    sized from the tile, and the autotuner's timing runs would share it). Transposing views (the colwise ops: x
    contiguous along R, q along K) take tiles tall in R, so loads and stores both run along 128 bytes or more;
    views contiguous along K take tiles wide in K. ROCm takes its one fixed tile (no AMD timing)."""
    return _config_by_view(GROUP_TILES, backend, args)


#: The one-read per-group kernel (fp8moe.kernels._group_tiles): tile (BLOCK_R rows, BLOCK_K jagged positions),
#: chosen by :func:`_group_tiles_rule` from the first two (transposing view, K-contiguous view); the rest are the
#: candidates benchmarks/tune_configs.py times against them. Not measured for what the kernel is now: the one H200
#: timing (benchmarks/results/h200-s11-tiles-tune.log, 6 points) ran before the arrival fix, when waits chained
#: tiles; 128x64/w4 was best at 5 of them there, and time grew with BLOCK_K.
GROUP_TILES = KernelConfigs(
    name="group_tiles",
    cuda=(
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128}, num_warps=4),
        triton.Config({"BLOCK_R": 16, "BLOCK_K": 256}, num_warps=4),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 256}, num_warps=8),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 128}, num_warps=8),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=4),
        triton.Config({"BLOCK_R": 128, "BLOCK_K": 64}, num_warps=4),
        triton.Config({"BLOCK_R": 8, "BLOCK_K": 512}, num_warps=4),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 256}, num_warps=8),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128}, num_warps=8),
        triton.Config({"BLOCK_R": 64, "BLOCK_K": 128}, num_warps=8, maxnreg=128),
        triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=4, maxnreg=128),
        triton.Config({"BLOCK_R": 16, "BLOCK_K": 256}, num_warps=4, maxnreg=128),
    ),
    rocm=triton.Config({"BLOCK_R": 64, "BLOCK_K": 128}, num_warps=4),
    interpreter=InterpreterTiles({"BLOCK_R": ("R",), "BLOCK_K": ("K",)}, reduced="BLOCK_K"),
    key=("R", "K", "stride_xr", "stride_xk"),
    rule=_group_tiles_rule,
)


def _group_chunks_rule(backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """The chunked per-group kernel's config (fp8moe.kernels._group_chunks): it never autotunes (its workspace is
    sized from BLOCK_R, and the autotuner's timing runs would share it). Transposing views (the colwise ops) take
    tiles tall in R; views contiguous along K take tiles wide in K. ROCm takes its one fixed config (no AMD
    timing)."""
    return _config_by_view(GROUP_CHUNKS, backend, args)


#: The chunked per-group kernel (fp8moe.kernels._group_chunks): tile (BLOCK_R rows, BLOCK_K jagged positions),
#: CHUNK_TILES tiles per chunk (longer where Ktot needs it, fp8moe.kernels._group_chunks.chunk_length),
#: PROGRAMS_PER_SM programs per SM at most, taking items from a ticket, and L2_HINTS (L2 eviction priorities that keep
#: a chunk in L2 for its second read; absent: off); chosen by :func:`_group_chunks_rule` from the first two
#: (transposing view, K-contiguous view). The rest are the candidates benchmarks/probe_per_group_kernels.py times
#: against them; PROGRAMS_PER_SM = 0 (one program per item, no ticket) is timed only: its progress rests on the GPU
#: starting programs in index order, which no programming guide promises (the kernel's module docstring).
#:
#: The transposing view's config takes the hints: on the H200 they made it 1.03-1.09x faster at all four grouped-GEMM
#: points of benchmarks/probe_per_group_kernels.py (dual op 231.6 -> 224.9, 583.2 -> 536.5, 187.9 -> 182.5 us;
#: colwise 65536 x 4096 G = 8 385.5 -> 363.1), and cut the DRAM bytes at 65536 x 4096 G = 16 from 1.49x to 1.27x
#: the ideal; 264 programs of 32 KB chunks (index 10) read exactly the ideal bytes, but too few loads in flight left
#: them slower (benchmarks/results/h200-s15-summary.md). The K-contiguous view's hints are untimed: it keeps none.
GROUP_CHUNKS = KernelConfigs(
    name="group_chunks",
    cuda=(
        *(
            triton.Config(
                {"BLOCK_R": r, "BLOCK_K": k, "CHUNK_TILES": c, "PROGRAMS_PER_SM": p, "L2_HINTS": hints}, num_warps=w
            )
            for r, k, c, p, hints, w in (
                (64, 64, 8, 4, True, 4),
                (4, 1024, 2, 2, False, 8),
                (64, 64, 8, 0, False, 4),
                (64, 64, 16, 4, False, 4),
                (64, 64, 8, 8, False, 4),
                (64, 64, 4, 4, False, 4),
                (4, 1024, 2, 0, False, 8),
                (64, 64, 8, 4, False, 4),  # index 0 without the hints (sessions 12-14's choice)
                (64, 64, 8, 2, True, 4),
                (64, 64, 4, 4, True, 4),
                (64, 64, 4, 2, True, 4),
                (4, 1024, 2, 2, True, 8),
                (64, 128, 4, 2, True, 8),  # 64 KB chunks, 16 warps per SM: the ideal DRAM bytes (session 16)
            )
        ),
    ),
    rocm=triton.Config({"BLOCK_R": 32, "BLOCK_K": 128, "CHUNK_TILES": 4, "PROGRAMS_PER_SM": 2}, num_warps=8),
    interpreter=InterpreterTiles({"BLOCK_R": ("R1", "R2"), "BLOCK_K": ("K",)}, reduced="BLOCK_K"),
    key=("R1", "R2", "K", "stride_x1r", "stride_x1k"),
    rule=_group_chunks_rule,
)


def _first_coop_candidate(
    cuda: tuple[triton.Config, ...], rocm: triton.Config, backend: Backend, args: Mapping[str, object]
) -> triton.Config:
    """The rule of the cooperative slice kernel's tables: it never autotunes (its workspace is sized from BLOCK_M,
    and the autotuner's timing runs would share it). CUDA takes the first candidate, ROCm its fixed config (no AMD
    timing)."""
    return rocm if backend.kind == "rocm" else cuda[0]


def coop_config(table: KernelConfigs, backend: Backend, shape: Sequence[int]) -> triton.Config:
    """The config of the cooperative slice kernel (fp8moe.kernels._coop_slices) under ``table`` for an (E, M, L)
    view of ``shape``."""
    e, m, length = shape
    return table.fixed(backend, {"E": e, "M": m, "L": length})


def coop_chunks(table: KernelConfigs, backend: Backend, shape: Sequence[int]) -> int:
    """Chunks per slice of the cooperative slice kernel under ``table`` for an (E, M, L) view of ``shape``: the
    programs that wait for each other, which fp8moe.kernels._coop.coop_limit bounds."""
    return -(-shape[2] // coop_config(table, backend, shape).kwargs["BLOCK_L"])


def _coop_table(
    name: str,
    cuda: tuple[triton.Config, ...],
    rocm: triton.Config,
    rule: Callable[[Backend, Mapping[str, object]], triton.Config] | None = None,
    key: tuple[str, ...] = ("E", "M", "L", "stride_xe", "stride_xm", "stride_xl", "FP8_DTYPE", "ROUND_POW2"),
) -> KernelConfigs:
    """The config table of one use of the cooperative slice kernel on (E, M, L) views: ``rule`` picks the config
    (default :func:`_first_coop_candidate`, its first CUDA candidate fixed) from E, M and L; ``key`` names the
    launched kernel's shape arguments (default: the dense kernel's). The rule never autotunes."""
    return KernelConfigs(
        name=name,
        cuda=cuda,
        rocm=rocm,
        interpreter=InterpreterTiles({"BLOCK_L": ("L",), "BLOCK_M": ("M",)}, reduced="BLOCK_L"),
        key=key,
        rule=rule or functools.partial(_first_coop_candidate, cuda, rocm),
    )


#: The cooperative slice kernel for colwise_3d_scale_and_cast (fp8moe.kernels._coop_slices.launch_coop_experts:
#: the jagged kernel with the experts as uniform groups of the stacked K axis), picked from the (E, N, K) view x.mT:
#: tile (BLOCK_L positions along K, BLOCK_M columns), one program per tile, the chunks of a column block meeting
#: through workspace atomics. :func:`_coop_columns_rule` takes the second: 256 x 64 / 4 warps capped at 128
#: registers, 4 programs per SM instead of 3 (141 registers uncapped, 3 spilled capped, sm_90 under triton 3.6:
#: benchmarks/results/cpu-sm90-registers-s39.md). The evidence, one H100 a session, every forced row bitwise: at the
#: issue #11 3D points on row-major input, (1, 8192, 5120) / (16, 8192, 5120) / (64, 2048, 1408) /
#: (128, 5120, 8192), the capped tile took 1.00 / 1.00 / 1.00 / 1.04x the best of six, the uncapped one 1.05 / 1.07 /
#: 1.04 / 1.00x (benchmarks/results/h100-s45-call36-configs_columns.md); under the rule the bench ran at 75 / 84 /
#: 79 / 77% of copy bandwidth, 1.51x torch.compile at the first point (h100-s46-call40-bench.md). At seven corners
#: between (16, 5120, 5120) and (128, 8192, 8192) the cap took 0.93-0.95x the uncapped time at all four with 16
#: experts and 1.02-1.04x at all three with 128 (h100-s47-call42-configs.md); a rule that dropped the cap from 128
#: experts ran the bench's (128, 5120, 8192) at 78% of copy and its output was marked not bitwise
#: (h100-s47-call44-bench.md), which three runs of that tile on the same inputs on another H100 did not repeat
#: (h100-s47-call45-repeat.log, outputs not poisoned), so the cap stays at every E (benchmarks/results/s47-summary.md).
#: Session 48 found a race that fits that row: the slice kernel, as Triton 3.6 compiles it, had no barrier between
#: its warps' amax folds and its arrival (fp8moe.kernels._coop.arrive, benchmarks/results/s48-summary.md). On an
#: H100 in session 49 4000 runs of each use without the barrier never differed, at (16, 8192, 5120) under this capped
#: tile, and the fixed kernel passed the whole GPU suite (s49-summary.md): whether the race caused that row is for
#: prepared call 47, the race at (128, 5120, 8192) under both tiles. The H200 is untimed. The earlier choices (the
#: uncapped tile at one expert until session 45) and their runs: docs/SPEC.md §10.2 and
#: benchmarks/results/per-group-ledger.md.
COOP_COLUMNS_CUDA = (
    triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4),
    triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4, maxnreg=128),
    triton.Config({"BLOCK_L": 128, "BLOCK_M": 64}, num_warps=2),
    triton.Config({"BLOCK_L": 512, "BLOCK_M": 32}, num_warps=4),
)
COOP_COLUMNS_ROCM = triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4)


def _coop_columns_rule(backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """COOP_COLUMNS' tile: on CUDA the 256 x 64 tile capped at 128 registers, for any number of experts; ROCm's one
    fixed config (no AMD timing; maxnreg is an NVIDIA option)."""
    if backend.kind == "rocm":
        return COOP_COLUMNS_ROCM
    return COOP_COLUMNS_CUDA[1]


COOP_COLUMNS = _coop_table(
    "coop_columns",
    cuda=COOP_COLUMNS_CUDA,
    rocm=COOP_COLUMNS_ROCM,
    rule=_coop_columns_rule,
    key=("R", "K", "G", "stride_xr", "stride_xk", "stride_xg", "limit", "FP8_DTYPE", "ROUND_POW2"),
)

#: The cooperative slice kernel for rowwise_3d_transpose_rhs, method "atomic" (fp8moe.kernels._coop_slices on x
#: (E, K, N) itself): tile (BLOCK_L positions along N, the axis x is read along, BLOCK_M rows). Every candidate keeps
#: 128 elements per thread (benchmarks/sass_counts.py --coop-slices gives the first's registers and programs per SM
#: on sm_90). :func:`_coop_transpose_rule` takes the first two by N. The evidence, one H100, every row bitwise:
#: forced one at a time at the issue #11 3D points, (1, 8192, 5120) / (16, 8192, 5120) / (64, 2048, 1408) /
#: (128, 5120, 8192), time over the best of six: 1024 x 16 / 4 warps 1.01 / 1.00 / 1.04 / 1.03, 512 x 16 / 2 warps
#: 1.09 / 1.01 / 1.00 / 1.04, 256 x 32 / 2 warps 1.05 / 1.02 / 1.01 / 1.00, the former rule's 1024 x 8 / 2 warps
#: 1.02 / 1.01 / - / 1.12 and 2048 x 8 / 4 warps 1.05 at N = 1408
#: (benchmarks/results/h100-s45-call36-configs_transpose.md); under the rule the bench ran at 85 / 95 / 87 / 86% of
#: copy bandwidth (h100-s46-call40-bench.md). The H200 is untimed. The earlier rules (chosen before session 44 put
#: each counter on a line of its own, which made meetings of more, shorter chunks cheaper) and their runs:
#: docs/SPEC.md §10.2 and benchmarks/results/per-group-ledger.md.
COOP_TRANSPOSE_CUDA = (
    triton.Config({"BLOCK_L": 1024, "BLOCK_M": 16}, num_warps=4),
    triton.Config({"BLOCK_L": 512, "BLOCK_M": 16}, num_warps=2),
    triton.Config({"BLOCK_L": 1024, "BLOCK_M": 8}, num_warps=2),
    triton.Config({"BLOCK_L": 2048, "BLOCK_M": 8}, num_warps=4),
    triton.Config({"BLOCK_L": 512, "BLOCK_M": 32}, num_warps=4),
    triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4),
)
COOP_TRANSPOSE_ROCM = triton.Config({"BLOCK_L": 512, "BLOCK_M": 32}, num_warps=4)
#: The longest rows (N) :func:`_coop_transpose_rule` may give 512-long chunks.
COOP_TRANSPOSE_SHORT_ROWS = 2048


def _coop_transpose_rule(backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """COOP_TRANSPOSE's tile: on CUDA 1024 x 16 / 4 warps, or 512 x 16 / 2 warps for rows of at most
    :data:`COOP_TRANSPOSE_SHORT_ROWS` whose N elements leave fewer masked lanes in 512-long chunks than in 1024-long
    ones (N = 1408: 1536 positions against 2048; longer rows keep the long chunks, of which more rows fit
    coop_limit); ROCm's one fixed config (no AMD timing)."""
    if backend.kind == "rocm":
        return COOP_TRANSPOSE_ROCM
    long_chunks, short_chunks = COOP_TRANSPOSE_CUDA[:2]
    n = args["L"]
    if n > COOP_TRANSPOSE_SHORT_ROWS:
        return long_chunks
    covered = {c: triton.cdiv(n, c.kwargs["BLOCK_L"]) * c.kwargs["BLOCK_L"] for c in (long_chunks, short_chunks)}
    return short_chunks if covered[short_chunks] < covered[long_chunks] else long_chunks


COOP_TRANSPOSE = _coop_table("coop_transpose", COOP_TRANSPOSE_CUDA, COOP_TRANSPOSE_ROCM, _coop_transpose_rule)


#: Registers per thread that CUDA caps the transposing views' GROUP_COOP tile at (None: uncapped, the default). The
#: tile's fused launch takes 142 registers on sm_90, 3 programs per SM at 4 warps; capped at 128 it fits 4 with 1
#: spilled (benchmarks/sass_counts.py --coop-slices, "groups fused" and "groups fused r128"): the cap that took
#: colwise 3D's use of the same kernel to 0.93-0.97x its time past one expert (COOP_COLUMNS_CUDA). On the per-group
#: ops it did not pay: at their long-group points on an H100 (session 44, benchmarks/probe_jagged_coop.py "coop/r128"
#: beside "coop", every row bitwise) it took 0.996-1.005x the uncapped time
#: (benchmarks/results/h100-s44-call28-jagged_coop.md), so the default stays uncapped.
GROUP_COOP_CAP: int | None = None
#: Whether the per-group ops' jagged cooperative launch puts each ticket and arrival count on a 128-byte line of its
#: own, as colwise 3D's expert launch and the atomic transpose do (fp8moe.kernels._coop_slices._LINE), instead of
#: packing them. Off: with them spread its long-group points ran 1.03-1.12x slower on an H100 in session 44, on
#: another machine of the same kind than the packed run, and 1.03-1.11x slower on one machine in one run in session
#: 45 (benchmarks/probe_jagged_coop.py --lines, h100-s45-call37-jagged_coop.md: colwise 65536 x 4096 G = 16 324.4 us
#: packed, 343.8 a line apart; the dual op at 32768 x 8192 x 5120 539.0 against 599.5).
#: Read at each launch; a launch plan (fp8moe.replay) replays the layout it recorded, so forget plans after a change.
GROUP_COOP_COUNT_LINES = False
_GROUP_COOP_CAPPED: dict[int, triton.Config] = {}  # the capped twin of GROUP_COOP's first tile, per cap, made once


def _group_coop_rule(backend: Backend, args: Mapping[str, object]) -> triton.Config:
    """The cooperative slice kernel's tile on the jagged views (fp8moe.kernels._coop_slices.launch_coop_groups): it
    never autotunes (its workspace is sized from BLOCK_M, and the autotuner's timing runs would share it).
    Transposing views (the colwise ops) take the tile of colwise 3D on row-major input, on CUDA capped at
    :data:`GROUP_COOP_CAP` registers where that is set; views contiguous along K the atomic transpose's former first
    tile. ROCm takes its one fixed tile (no AMD timing)."""
    config = _config_by_view(GROUP_COOP, backend, args)
    if backend.kind == "cuda" and GROUP_COOP_CAP and is_transposing_view(args):
        capped = _GROUP_COOP_CAPPED.get(GROUP_COOP_CAP)
        if capped is None:
            capped = triton.Config(dict(config.kwargs), num_warps=config.num_warps, maxnreg=GROUP_COOP_CAP)
            _GROUP_COOP_CAPPED[GROUP_COOP_CAP] = capped
        return capped
    return config


#: The cooperative slice kernel on the jagged views of the per-group ops (PER_GROUP_KERNEL = "coop"): tile (BLOCK_L
#: jagged positions, BLOCK_M rows), chosen by :func:`_group_coop_rule` from the first two (transposing view: the
#: stripped probe's best at 2048-8192-token slices on an H100, 256 x 64 with 4 warps, h100-s35-coop-slices*.md; view
#: contiguous along K: 512 x 32, COOP_TRANSPOSE's first until session 37, untimed on jagged views); the rest are for
#: benchmarks/tune_configs.py. A group of more than coop_limit chunks of BLOCK_L is cast by a second launch
#: (fp8moe.kernels._coop_slices).
GROUP_COOP = KernelConfigs(
    name="group_coop",
    cuda=(
        triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4),
        triton.Config({"BLOCK_L": 512, "BLOCK_M": 32}, num_warps=4),
        triton.Config({"BLOCK_L": 128, "BLOCK_M": 64}, num_warps=2),
        triton.Config({"BLOCK_L": 1024, "BLOCK_M": 16}, num_warps=4),
    ),
    rocm=triton.Config({"BLOCK_L": 256, "BLOCK_M": 64}, num_warps=4),
    interpreter=InterpreterTiles({"BLOCK_L": ("K",), "BLOCK_M": ("R",)}, reduced="BLOCK_L"),
    key=("R", "K", "stride_xr", "stride_xk", "FP8_DTYPE", "ROUND_POW2"),
    rule=_group_coop_rule,
)


#: The kernel the three jagged ops launch, per backend kind:
#:
#: - "span" (fp8moe.kernels._per_group): one program per (group, row block) slice, two reads of a slice longer than
#:   a tile;
#: - "chunks" (fp8moe.kernels._group_chunks): slices cut into chunks whose programs fold their amax through a
#:   workspace and wait for each other, each chunk read twice;
#: - "tiles" (fp8moe.kernels._group_tiles): one read, aligned tiles of one group meeting through workspace atomics;
#: - "coop" (fp8moe.kernels._coop_slices): one read, chunks that start at their group meeting through workspace
#:   atomics, each held in registers across the wait (groups too long to wait for read twice). Its first form was
#:   bitwise and slower than "auto" at all 17 issue #11 points on an H100 (1.05x at G = 16, 1.46-4.21x elsewhere,
#:   benchmarks/results/h100-s36-call17-auto-vs-coop.md); rewritten in session 38 (255 -> 128-142 registers, 2 -> 3-4
#:   programs per SM, benchmarks/results/cpu-sm90-registers-s38.md) it took 0.71-0.86x "auto"'s time at all five
#:   long-group points measured on an H100, each bitwise (benchmarks/results/h100-s38-coop-jagged-long.md): colwise
#:   65536 x 4096 at G = 8 and 16 445.7 -> 322.1 and 448.6 -> 320.6 us (59% -> 82-83% of copy bandwidth), the dual
#:   op at the grouped-GEMM step's 2048-position mean groups 222.0 -> 191.6 (aligned16), 285.6 -> 223.4 (one dominant
#:   group), 660.2 -> 537.5 us (32768 x 8192 x 5120, random sizes), where "auto" ran the chunked kernel at the
#:   first three and the span kernel at G = 16; at the 130-1040-position groups of the issue #11 colwise and dual
#:   points it stays slower under each of six tiles (session 45, one H100, prepared_calls.sh 38,
#:   h100-s45-call38-coop-short-configs.md against h100-s45-call38-bench.md: its best, 128 x 64 / 2 warps or
#:   128 x 128 / 4 warps, 1.17-1.45x "auto"'s time at each of the 11 points; random16 and empty_middle cost it 1.03x
#:   and 1.43x over aligned16 at 16640 x 2048 G = 64, the span kernel 1.13x and 1.34x);
#: - "auto": "coop" for the transposing views (the colwise ops) whose groups average a length (Ktot / G) of at least
#:   :data:`COOP_MEAN_GROUP`, "chunks" for those within :data:`CHUNKS_MEAN_GROUP`, else "span"
#:   (:func:`per_group_kernel`).
#:
#: Measured on the H200 (benchmarks/results/h200-s12-summary.md), the chunked kernel is 1.11-1.71x faster than the
#: span kernel on the dual op at the grouped-GEMM step's 8-16 expert shapes (2048 positions per group on average;
#: the gain grows with how uneven the groups are: one group holding most tokens leaves the span kernel's other
#: programs idle), and slower on uniform groups of 130-260 positions (0.77-0.90x, the issue #11 points) and of
#: 4096-8192 (0.86-0.95x at the best chunk length, colwise 65536x4096). "auto" takes it only where it was measured
#: faster. The tile kernel is
#: bitwise but at 12-25% of copy bandwidth (h200-s11-group-tiles.md). CUDA and the interpreter (which runs what
#: the GPUs run, so the CPU's sweep, engine and bring-up cover it) take "auto"; ROCm keeps "span" (no AMD timing).
#: Every per-group kernel test runs on every kernel (tests/test_kernels_per_group.py); the whole GPU suite passed
#: under "auto" as it is since session 38 (session 39, H100, benchmarks/results/h100-s39-call22-suite.log).
#: FP8MOE_PER_GROUP_KERNEL=auto|span|chunks|tiles|coop sets it for every backend (read once, at import: a launch plan,
#: fp8moe.replay, records the kernel of its first call).
PER_GROUP_KERNEL: dict[str, str] = {"cuda": "auto", "rocm": "span", "interpreter": "auto"}
PER_GROUP_KERNELS = ("auto", "span", "chunks", "tiles", "coop")
#: "auto" takes the cooperative slice kernel for a transposing view whose mean group length Ktot / G is at least this
#: (the shortest mean measured faster, session 38: 2048), the chunked kernel where it is in [low, high).
COOP_MEAN_GROUP = 2048
CHUNKS_MEAN_GROUP = (1024, COOP_MEAN_GROUP)


def _forced_by_environment(variable: str, per_backend: dict[str, str], choices: tuple[str, ...]) -> dict[str, str]:
    """``per_backend`` with every backend set to the environment ``variable`` where it is set.

    Raises:
        ValueError: the variable holds a value outside ``choices``.
    """
    forced = os.environ.get(variable)
    if forced is None:
        return per_backend
    if forced not in choices:
        raise ValueError(f"{variable} must be one of {choices}, got {forced!r}")
    return dict.fromkeys(per_backend, forced)


PER_GROUP_KERNEL = _forced_by_environment("FP8MOE_PER_GROUP_KERNEL", PER_GROUP_KERNEL, PER_GROUP_KERNELS)


def per_group_kernel(backend: Backend, view: torch.Tensor | None = None, groups: int = 1) -> str:
    """The kernel the jagged ops launch on ``backend`` (:data:`PER_GROUP_KERNEL`), "auto" resolved for the (R, Ktot)
    ``view`` quantized in ``groups`` groups (None: left unresolved)."""
    kind = PER_GROUP_KERNEL[backend.kind]
    if kind != "auto" or view is None:
        return kind
    if view.stride(1) == 1:
        return "span"
    low, high = CHUNKS_MEAN_GROUP
    mean_group = view.shape[1] / max(groups, 1)
    if mean_group >= COOP_MEAN_GROUP:
        return "coop"
    return "chunks" if low <= mean_group < high else "span"


#: Which kernel colwise_3d_scale_and_cast runs, per backend kind: "rows", the batched row kernel on the (E, N, K)
#: view (fp8moe.kernels._rows), or "auto", the cooperative slice kernel on its columns (fp8moe.kernels._coop_slices
#: under COOP_COLUMNS) where the input is read along N and K is at least COOP_COLUMNS_MIN_K and at most the chunks
#: that may wait for each other (fp8moe.kernels._coop.coop_limit), the row kernel elsewhere. "coop" takes the
#: cooperative kernel wherever it can run.
#:
#: The evidence, H100s, every row bitwise: the cooperative kernel ran the issue #11 3D points on row-major input at
#: 75 / 84 / 79 / 77% of copy bandwidth (benchmarks/results/h100-s46-call40-bench.md) where the row kernel ran at
#: 51-63% (h100-s36-call18-off-vs-on.md, the two side by side on one machine), and the whole GPU suite passed under
#: "auto" (h100-s46-call22-suite.log: 4313 passed, 0 failed). Its launches since session 35: docs/SPEC.md §10.2. CUDA
#: and the interpreter (which runs what the GPUs run, its fold and cast as two launches) take "auto"; ROCm keeps
#: "rows" (no AMD timing, and the waits' residency unproven there). FP8MOE_COLWISE_3D_KERNEL=rows|auto|coop sets it
#: for every backend (read once, at import).
COLWISE_3D_KERNEL: dict[str, str] = {"cuda": "auto", "rocm": "rows", "interpreter": "auto"}
COLWISE_3D_KERNELS = ("rows", "auto", "coop")
COOP_COLUMNS_MIN_K = 1024
COLWISE_3D_KERNEL = _forced_by_environment("FP8MOE_COLWISE_3D_KERNEL", COLWISE_3D_KERNEL, COLWISE_3D_KERNELS)


#: Which kernel rowwise_3d_transpose_rhs's method "atomic" runs, per backend kind: "two_launch", a fold launch over
#: (BLOCK_K, BLOCK_N) tiles then a cast launch that reads x again (fp8moe.kernels.rowwise_3d_transpose_rhs), or
#: "coop", the cooperative slice kernel (fp8moe.kernels._coop_slices under COOP_TRANSPOSE: each row's chunks fold
#: their amax by atomic max, wait for each other and cast the tile they hold, x read once) wherever a row's chunks
#: may wait for each other (fp8moe.kernels._coop.coop_limit), "two_launch" elsewhere. Both fold by atomics, and the
#: bytes are the same. The evidence, H100s, every row bitwise: the two launches ran at 58-60% of copy bandwidth
#: beside "coop" on one machine (benchmarks/results/h100-s36-call18-off-vs-on.md; 56-63% on the H200, issue #11);
#: "coop" runs the issue #11 3D points at 85 / 95 / 87 / 86% (h100-s46-call40-bench.md), and the whole GPU suite
#: passed under it (h100-s46-call22-suite.log: 4313 passed, 0 failed). CUDA and the interpreter take "coop"; ROCm
#: keeps "two_launch" (no AMD timing). FP8MOE_TRANSPOSE_ATOMIC_KERNEL=two_launch|coop sets it for every backend
#: (read once, at import).
TRANSPOSE_ATOMIC_KERNEL: dict[str, str] = {"cuda": "coop", "rocm": "two_launch", "interpreter": "coop"}
TRANSPOSE_ATOMIC_KERNELS = ("two_launch", "coop")
TRANSPOSE_ATOMIC_KERNEL = _forced_by_environment(
    "FP8MOE_TRANSPOSE_ATOMIC_KERNEL", TRANSPOSE_ATOMIC_KERNEL, TRANSPOSE_ATOMIC_KERNELS
)

#: The kernel settings :func:`forced_kernel` may force, each with its choices.
_FORCIBLE_KERNEL_SETTINGS = {
    "COLWISE_3D_KERNEL": COLWISE_3D_KERNELS,
    "TRANSPOSE_ATOMIC_KERNEL": TRANSPOSE_ATOMIC_KERNELS,
}


@contextlib.contextmanager
def forced_kernel(setting: str, kind: str) -> Iterator[None]:
    """The kernel setting ``setting`` ("COLWISE_3D_KERNEL" or "TRANSPOSE_ATOMIC_KERNEL") takes ``kind`` on every
    backend inside the block (tests, benchmarks). Launch plans are forgotten on the way in and out: a plan replays
    the kernel it recorded.

    Raises:
        ValueError: an unknown setting, or a kind outside the setting's choices (nothing is changed).
    """
    if setting not in _FORCIBLE_KERNEL_SETTINGS:
        raise ValueError(f"setting must be one of {tuple(_FORCIBLE_KERNEL_SETTINGS)}, got {setting!r}")
    choices = _FORCIBLE_KERNEL_SETTINGS[setting]
    if kind not in choices:
        raise ValueError(f"{setting} must be one of {choices}, got {kind!r}")
    saved = globals()[setting]
    globals()[setting] = dict.fromkeys(saved, kind)
    replay.forget()
    try:
        yield
    finally:
        globals()[setting] = saved
        replay.forget()


def coop_columns_fit(x: torch.Tensor) -> bool:
    """Whether the cooperative kernel's column use (fp8moe.kernels._coop_slices.launch_coop_experts, the experts as
    uniform groups of one jagged launch) may read the (E, K, N) ``x``: K > 0, and K a multiple of 16 or each
    expert's block following the last (x.stride(0) == K * x.stride(1), or E = 1). Its chunks load whole runs of 16
    positions along the stacked K axis, so with K not a multiple of 16 an expert's first and last chunks read up to
    15 positions of its neighbours' (zeroed before the fold), which must then be x's own memory."""
    e, k, _ = x.shape
    return k > 0 and (k % 16 == 0 or e == 1 or x.stride(0) == k * x.stride(1))


def colwise_3d_kernel(backend: Backend, x: torch.Tensor, limit_chunks: int) -> str:
    """The kernel colwise_3d_scale_and_cast runs for the (E, K, N) ``x`` on ``backend`` (:data:`COLWISE_3D_KERNEL`):
    "rows" wherever the cooperative kernel cannot read x (:func:`coop_columns_fit`: K empty, or K not a multiple of
    16 with the experts' blocks apart) or K needs more than ``limit_chunks`` chunks of its config, and under "auto"
    unless x is read along N (its stride along N below its stride along K) with K at least COOP_COLUMNS_MIN_K;
    "coop" otherwise."""
    kind = COLWISE_3D_KERNEL[backend.kind]
    if kind == "rows":
        return "rows"
    e, k, n = x.shape
    if not coop_columns_fit(x) or coop_chunks(COOP_COLUMNS, backend, (e, n, k)) > limit_chunks:
        return "rows"
    if kind == "auto" and not (x.stride(2) < x.stride(1) and k >= COOP_COLUMNS_MIN_K):
        return "rows"
    return "coop"


def transpose_atomic_kernel(backend: Backend, x: torch.Tensor, limit_chunks: int) -> str:
    """The kernel rowwise_3d_transpose_rhs's method "atomic" runs for the (E, K, N) ``x`` on ``backend``
    (:data:`TRANSPOSE_ATOMIC_KERNEL`): "coop" where it is set and a row's N elements, at least one, take at most
    ``limit_chunks`` chunks of COOP_TRANSPOSE's config, "two_launch" otherwise."""
    if TRANSPOSE_ATOMIC_KERNEL[backend.kind] != "coop" or x.shape[2] == 0:
        return "two_launch"
    return "coop" if coop_chunks(COOP_TRANSPOSE, backend, x.shape) <= limit_chunks else "two_launch"


#: How fp8moe.grouped_mm quantizes A and grad_out, per backend kind: "on", the fused activation pair
#: (fp8moe.kernels.rowwise_and_per_group_colwise: each tensor read twice for both its GEMMs, A's per-group operand
#: made in the forward); "off", rowwise alone plus, in the backward, the dual op on (grad_out, A); "auto", the pair
#: where groups average at least FUSED_ACTIVATIONS_MIN_MEAN_GROUP rows (:func:`fuse_activations`).
#:
#: CUDA and the interpreter (which runs what the GPUs run) take "off" since session 43: on an H100, with the dual op
#: on the cooperative slice kernel at long groups (PER_GROUP_KERNEL, session 38), the pairs lost at every point of
#: benchmarks/bench_grouped_mm.py. A and grad_out by the two pairs against rowwise A, rowwise grad_out and the dual op,
#: each kernel timed in the same run (benchmarks/results/h100-s43-call24-quant-layouts-off.md; the "on" run's columns
#: agree within 2 us): 370 against 349 us at 2048-row mean groups (16384, 7168, 2048, 8), 1051 against 968 at 2048
#: (32768, 5120, 8192, 16), 2683 against 2667 at 8192 (65536, 4096, 14336, 8), 163 against 145 at 260 (16640, 2048,
#: 1408, 64); the fp8 step with the pairs forced on was 1.007-1.019x its time with them off at all four
#: (h100-s43-call24-grouped-mm-{off,on}.md). On the H200 the pairs had won at 2048 and 8192 against the dual op on
#: the chunked kernel (h200-s14-call3-quant_layouts.md: 283 against 301 us; h200-s13-summary.md: 2230 against about
#: 2500), which the cooperative kernel runs in 0.78-0.86x that time on an H100; prepared_calls.sh 24 reruns the
#: comparison on an H200. Short groups lose with the pair on both GPUs: the dual op's span slices stay in L2 there, and
#: the pair's per-item group table and extra launches are fixed costs a short group does not amortise. ROCm keeps
#: "auto" (no AMD timing, and its dual op runs the span kernel: the rule is the byte argument of session 14, not a
#: measurement). The CPU tests force "on" and "off" where they test each path (tests/test_grouped_mm.py).
#: FP8MOE_FUSED_ACTIVATIONS=auto|on|off sets it for every backend (read once, at import).
FUSED_ACTIVATIONS: dict[str, str] = {"cuda": "off", "rocm": "auto", "interpreter": "off"}
FUSED_ACTIVATIONS_CHOICES = ("auto", "on", "off")
FUSED_ACTIVATIONS_MIN_MEAN_GROUP = 2048
FUSED_ACTIVATIONS = _forced_by_environment("FP8MOE_FUSED_ACTIVATIONS", FUSED_ACTIVATIONS, FUSED_ACTIVATIONS_CHOICES)


def fuse_activations(kind: str, rows: int, groups: int) -> bool:
    """Whether grouped_mm on backend ``kind`` quantizes its (rows, .) activations in ``groups`` groups through the
    fused pair (:data:`FUSED_ACTIVATIONS`); host values only (no offset is read)."""
    choice = FUSED_ACTIVATIONS[kind]
    if choice == "auto":
        return rows >= FUSED_ACTIVATIONS_MIN_MEAN_GROUP * max(groups, 1)
    return choice == "on"


#: The config list of each cooperative jagged kernel (one launch serves all three per-group ops). Under "auto" a
#: colwise call may run the chunked kernel or the span kernel: CONFIGS_BY_SPEC names the span kernel's lists there
#: (benchmarks/tune_configs.py times them; FP8MOE_PER_GROUP_KERNEL=chunks times the chunked one), and fp8moe.bench
#: reports the configs of whichever kernels a call ran (these lists included).
COOPERATIVE_LISTS: dict[str, tuple[KernelConfigs, ...]] = {
    "tiles": (GROUP_TILES,),
    "chunks": (GROUP_CHUNKS,),
    "coop": (GROUP_COOP,),
}

#: The candidate lists each fp8moe launch variant runs with, by KernelSpec id (op, and the method in brackets where
#: an op has several): what benchmarks/tune_configs.py forces one candidate at a time. The first entry owns the list.
CONFIGS_BY_SPEC: dict[str, tuple[KernelConfigs, ...]] = {
    "rowwise_2d_scale_and_cast": (ROWWISE,),
    "colwise_3d_scale_and_cast": (ROWWISE,),
    "rowwise_3d_transpose_rhs[reduction]": (ROWWISE,),
    # the lists of the kernel CUDA runs (TRANSPOSE_ATOMIC_KERNEL)
    "rowwise_3d_transpose_rhs[atomic]": (COOP_TRANSPOSE,)
    if TRANSPOSE_ATOMIC_KERNEL["cuda"] == "coop"
    else (TRANSPOSE_AMAX, TRANSPOSE_QUANTIZE),
    # the lists of the kernel CUDA runs (PER_GROUP_KERNEL)
    "per_group_rowwise_scales": COOPERATIVE_LISTS.get(PER_GROUP_KERNEL["cuda"], (PER_GROUP,)),
    "per_group_colwise_scales": COOPERATIVE_LISTS.get(PER_GROUP_KERNEL["cuda"], (PER_GROUP,)),
    "per_group_colwise_scales_dual": COOPERATIVE_LISTS.get(PER_GROUP_KERNEL["cuda"], (PER_GROUP_DUAL,)),
}
