"""The launch-config policy (fp8moe/configs.py) and backend detection, on the CPU.

ROCm never autotunes (each new key costs a device sync there, SPEC §7); the CUDA autotune key of every kernel names
every launch argument that changes the best config or the result; gfx942 stores fnuz and gfx950 fn formats; kernels
switch to int64 offsets exactly when some element offset exceeds int32.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math

import pytest
import torch

import fp8moe  # before anything imports triton: turns the interpreter on when there is no GPU

# isort: split
import triton

from fp8moe import backend as backend_module
from fp8moe import configs, fp8ref_backend
from fp8moe.backend import Backend, launch_device
from fp8moe.kernels import (
    _coop_slices,
    _pair,
    _per_group,
    _rows,
    colwise_3d_and_transpose_rhs,
    per_group_colwise_scales_dual,
    rowwise_2d_scale_and_cast,
    rowwise_3d_transpose_rhs,
    rowwise_and_per_group_colwise,
)
from fp8moe.kernels._common import fp8_constexprs

FN = (torch.float8_e4m3fn, torch.float8_e5m2)
FNUZ = (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
CUDA = Backend("cuda", "sm_90", FN, exact_encode=False, autotune=True)
ROCM = Backend("rocm", "gfx942", FNUZ, exact_encode=False, autotune=False)
INTERPRETER = Backend("interpreter", "cpu", FN + FNUZ, exact_encode=True, autotune=False)

#: Every kernel with its configs.
KERNELS = {
    "rowwise": (_rows._rowwise_scale_and_cast_kernel, configs.ROWWISE),
    "transpose_amax": (rowwise_3d_transpose_rhs._transpose_rhs_amax_kernel, configs.TRANSPOSE_AMAX),
    "transpose_quantize": (rowwise_3d_transpose_rhs._transpose_rhs_quantize_kernel, configs.TRANSPOSE_QUANTIZE),
    "per_group": (_per_group._per_group_rows_kernel, configs.PER_GROUP),
    "per_group_dual": (per_group_colwise_scales_dual._per_group_colwise_scales_dual_kernel, configs.PER_GROUP_DUAL),
}
#: Kernels whose configs also set a chunk length (CHUNK_TILES, which the launcher adds in the interpreter, or the
#: cooperative slice kernel's BLOCK_L): the autotune key test covers them; the block test below is for KERNELS.
CHUNKED_KERNELS = {
    "pair_amax": (colwise_3d_and_transpose_rhs._pair_amax_kernel, configs.PAIR_AMAX),
    "pair_scales": (_pair._pair_scales_kernel, configs.PAIR_SCALES),
    "pair_cast": (colwise_3d_and_transpose_rhs._pair_cast_kernel, configs.PAIR_CAST),
    "jagged_pair_amax": (rowwise_and_per_group_colwise._jagged_amax_kernel, configs.JAGGED_PAIR_AMAX),
    "jagged_pair_cast": (rowwise_and_per_group_colwise._jagged_cast_kernel, configs.JAGGED_PAIR_CAST),
    "coop_columns": (_coop_slices._coop_groups_kernel, configs.COOP_COLUMNS),
    "coop_transpose": (_coop_slices._coop_slices_kernel, configs.COOP_TRANSPOSE),
}


def _python_fn(kernel):
    """The Python function under triton's wrappers (Heuristics -> JITFunction/InterpretedFunction -> function)."""
    fn = kernel
    while not inspect.isfunction(fn):
        fn = fn.fn
    return fn


def _runtime_args(kernel) -> list[str]:
    """Non-constexpr kernel arguments that are not pointers."""
    params = inspect.signature(_python_fn(kernel)).parameters.values()
    return [p.name for p in params if "constexpr" not in str(p.annotation) and not p.name.endswith("_ptr")]


@pytest.mark.parametrize("name", [*KERNELS, *CHUNKED_KERNELS])
def test_cuda_autotune_key_names_every_shape_input_stride_and_result_arg(name):
    kernel, kernel_configs = {**KERNELS, **CHUNKED_KERNELS}[name]
    args = inspect.signature(_python_fn(kernel)).parameters
    # Output strides follow from the shape (outputs are allocated by the launcher), so they need no key entry.
    required = [a for a in _runtime_args(kernel) if not a.startswith("stride_q")]
    required += [a for a in configs.RESULT_ARGS if a in args]
    missing = [a for a in required if a not in kernel_configs.key]
    assert not missing, f"{kernel_configs.name}: autotune key lacks {missing}"
    unknown = [a for a in kernel_configs.key if a not in args]
    assert not unknown, f"{kernel_configs.name}: key names {unknown}, which the kernel does not take"


def _sample_args(kernel_configs) -> dict:
    """Launch arguments naming every extent the interpreter's tiles read (values 7, 100, ...)."""
    return {a: 7 + 31 * i for i, dims in enumerate(kernel_configs.interpreter.extents.values()) for a in dims}


@pytest.mark.parametrize("name", KERNELS)
def test_every_config_sets_exactly_the_kernels_block_constexprs(name):
    """Every BLOCK_* constexpr, as powers of two; any other kwarg (a flag such as GROUPS_FASTEST) must be a
    parameter the kernel declares with a default, so that a config without it launches too."""
    kernel, kernel_configs = KERNELS[name]
    params = inspect.signature(_python_fn(kernel)).parameters
    blocks = {p for p in params if p.startswith("BLOCK_")}
    flags = {p for p, param in params.items() if param.default is not inspect.Parameter.empty}
    interpreter = kernel_configs.interpreter.config(_sample_args(kernel_configs))
    for config in (*kernel_configs.cuda, kernel_configs.rocm, interpreter):
        sizes = {k: v for k, v in config.kwargs.items() if k.startswith("BLOCK_")}
        assert set(sizes) == blocks, f"{kernel_configs.name}: {config}"
        assert set(config.kwargs) - blocks <= flags, f"{kernel_configs.name}: {config} sets a non-default parameter"
        assert all(v & (v - 1) == 0 for v in sizes.values()), f"block sizes must be powers of two: {config}"
    assert kernel_configs.interpreter.reduced in blocks
    assert all(a in params for dims in kernel_configs.interpreter.extents.values() for a in dims)


@pytest.mark.parametrize(
    ("extent", "whole_up_to", "block"),
    [
        (1, 1, 1),
        (7, 1, 4),  # 4 + 3: two blocks, a tail
        (12, 1, 8),  # 8 + 4
        (16, 1, 8),  # 8 + 8: a power of two splits evenly
        (100, 1, 64),  # 64 + 36
        (130, 1, 128),  # 128 + 2
        (24, 32, 32),  # one block (the one-pass path), 8 masked lanes
        (32, 32, 32),
        (33, 32, 32),  # 32 + 1: two-pass with a 1-element tail
        (1000, 32, 512),
        (65536, 32, configs.INTERPRETER_MAX_BLOCK),  # 4 blocks of 16384
    ],
)
def test_interpreter_block_rule(extent, whole_up_to, block):
    assert configs.interpreter_block(extent, whole_up_to) == block


@pytest.mark.parametrize(
    ("extent", "block"), [(1, 1), (7, 4), (40, 32), (64, 32), (65, 128), (100, 128), (9000, 16384)]
)
def test_interpreter_row_dims_split_up_to_64_and_are_one_block_above(extent, block):
    assert configs.interpreter_block(extent, split_up_to=configs.INTERPRETER_ROW_SPLIT_UP_TO) == block
    config = configs.PER_GROUP.interpreter.config({"R": extent, "K": 40})
    assert config.kwargs["BLOCK_R"] == block


@pytest.mark.parametrize("extent", range(2, 300))
def test_interpreter_blocks_split_every_dim_into_two_or_more_blocks_with_a_tail_unless_a_power_of_two(extent):
    """The rule the CPU tests rely on to reach multi-block loops and tail masks with small shapes."""
    block = configs.interpreter_block(extent)
    assert block < extent <= 2 * block
    assert (extent % block != 0) == (extent & (extent - 1) != 0)


def test_interpreter_tile_is_capped_by_halving_its_largest_block():
    tiles = configs.PER_GROUP.interpreter
    config = tiles.config({"R": 10_000, "K": 100_000})
    assert config.kwargs == {"BLOCK_R": 1024, "BLOCK_K": 1024}  # 8192 x 16384 halved, largest first
    assert config.kwargs["BLOCK_R"] * config.kwargs["BLOCK_K"] <= configs.INTERPRETER_MAX_TILE


@pytest.mark.parametrize("name", KERNELS)
def test_interpreter_reduced_dim_is_one_block_only_up_to_the_one_pass_limit(name):
    _, kernel_configs = KERNELS[name]
    tiles = kernel_configs.interpreter
    for extent, one_block in (
        (configs.INTERPRETER_ONE_PASS_UP_TO, True),
        (configs.INTERPRETER_ONE_PASS_UP_TO + 1, False),
    ):
        args = {a: extent for dims in tiles.extents.values() for a in dims}
        assert (tiles.config(args).kwargs[tiles.reduced] >= extent) is one_block


class _RecordingKernel:
    """Stands in for a jit kernel: records ``kernel[grid](**kwargs)`` launches."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda **kwargs: self.launches.append((grid, kwargs))


@pytest.mark.parametrize("backend", [ROCM, INTERPRETER], ids=["rocm", "interpreter"])
@pytest.mark.parametrize("name", KERNELS)
def test_rocm_and_interpreter_launch_one_fixed_config_and_never_autotune(name, backend, monkeypatch):
    _, kernel_configs = KERNELS[name]
    monkeypatch.setattr(triton, "autotune", _forbidden_autotune)
    kernel = _RecordingKernel()
    args = {"ARG": 1, **_sample_args(kernel_configs)}
    configs.launch(kernel, kernel_configs, backend, lambda meta: (7,), **args)
    expected = kernel_configs.rocm if backend.kind == "rocm" else kernel_configs.interpreter.config(args)
    [(grid, kwargs)] = kernel.launches
    assert grid == (7,)
    assert kwargs == {**args, **expected.kwargs, "num_warps": expected.num_warps, "num_stages": expected.num_stages}


def _forbidden_autotune(*args, **kwargs):
    raise AssertionError("triton.autotune called on a backend that must not autotune")


def test_cuda_launch_of_a_large_problem_autotunes_with_the_configs_key_and_candidates(monkeypatch):
    built = {}

    def recording_autotune(configs, key):
        built.update(configs=configs, key=key)
        return lambda kernel: kernel

    monkeypatch.setattr(triton, "autotune", recording_autotune)
    monkeypatch.setattr(configs, "_AUTOTUNED", {})
    kernel = _RecordingKernel()
    grid = lambda meta: (1,)
    x = torch.empty(configs.AUTOTUNE_MIN_ELEMENTS, device="meta")
    configs.launch(kernel, configs.ROWWISE, CUDA, grid, x_ptr=x, S=3)
    assert built == {"configs": list(configs.ROWWISE.cuda), "key": list(configs.ROWWISE.key)}
    # The autotuner gets the grid function and no block sizes: it picks the config per key.
    assert kernel.launches == [(grid, {"x_ptr": x, "S": 3})]


def test_a_per_group_launch_autotunes_over_its_views_candidates_only(monkeypatch):
    """PER_GROUP splits its candidates by view: a launch contiguous along K (the rowwise op) tunes over the wide
    tiles, a transposing one (the colwise ops) over the tall ones, each view with an autotuner of its own."""
    built = []

    def recording_autotune(configs, key):
        built.append([describe(c) for c in configs])
        return lambda kernel: kernel

    describe = configs.describe  # the parameter above shadows the module
    monkeypatch.setattr(triton, "autotune", recording_autotune)
    monkeypatch.setattr(configs, "_AUTOTUNED", {})
    x = torch.empty(configs.AUTOTUNE_MIN_ELEMENTS, device="meta")
    along_k = {"stride_xr": 4096, "stride_xk": 1}
    transposing = {"stride_xr": 1, "stride_xk": 4096}
    for strides in (along_k, transposing, along_k):
        configs.launch(_RecordingKernel(), configs.PER_GROUP, CUDA, lambda meta: (1,), x_ptr=x, **strides)
    assert built == [list(configs.PER_GROUP_VIEWS["along_k"]), list(configs.PER_GROUP_VIEWS["transposing"])]
    assert ("4x1024/w8/g" in built[0], "4x1024/w8/g" in built[1]) == (True, False)
    assert ("128x32/w4/g" in built[0], "128x32/w4/g" in built[1]) == (False, True)
    assert max(map(len, built)) < len(configs.PER_GROUP.cuda)
    # a list without views still tunes over all of its candidates
    assert configs.ROWWISE.view_of({}) is None
    assert configs.ROWWISE.autotune_candidates(None) == configs.ROWWISE.cuda


@pytest.mark.parametrize(
    ("views", "message"),
    [
        ({"along_k": ("4x512/w4", "9x9/w4"), "transposing": ()}, "'along_k' names ['9x9/w4']"),
        ({"along_k": (), "transposing": ("64x128/w4",)}, "'along_k' names no candidates"),
        ({"along_k": ("4x512/w4",), "transposing": ("64x128/w4",)}, "are in no view's list"),
    ],
)
def test_a_view_list_that_names_an_unknown_or_no_candidate_or_leaves_one_out_is_refused(views, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        dataclasses.replace(configs.PER_GROUP, cuda_by_view=views)
    with pytest.raises(ValueError, match="come together"):
        dataclasses.replace(configs.PER_GROUP, cuda_by_view=None)


class _FakeTuner:
    """Stands in for triton.autotune's wrapper: records launches, then reports a chosen config."""

    def __init__(self, choice):
        self.choice, self.calls = choice, []

    def __getitem__(self, grid):
        def run(**kwargs):
            self.calls.append(kwargs)
            self.best_config = self.choice

        return run


def test_cuda_launch_reuses_the_autotuners_choice_per_key_and_dtype_without_calling_it_again(monkeypatch):
    choice = configs.ROWWISE.cuda[2]
    tuner = _FakeTuner(choice)
    monkeypatch.setattr(configs, "autotuned", lambda kernel, kernel_configs, args: tuner)
    monkeypatch.setattr(configs, "_CHOSEN", {})
    kernel = _RecordingKernel()
    x = torch.empty(configs.AUTOTUNE_MIN_ELEMENTS, device="meta", dtype=torch.bfloat16)
    key_args = {**{k: 1 for k in configs.ROWWISE.key}, "ROUND_POW2": False}

    def launch(x, **overrides):
        configs.launch(kernel, configs.ROWWISE, CUDA, lambda meta: (3,), x_ptr=x, **{**key_args, **overrides})

    launch(x)
    launch(x)  # same key: the cached choice, straight to the kernel
    assert len(tuner.calls) == 1
    [(grid, kwargs)] = kernel.launches
    assert grid == (3,)
    assert kwargs == {
        "x_ptr": x,
        **key_args,
        **choice.kwargs,
        "num_warps": choice.num_warps,
        "num_stages": choice.num_stages,
    }
    launch(x, S=2)  # another value of a key argument: tuned again
    launch(x.to(torch.float16))  # another input dtype: tuned again
    launch(x, ROUND_POW2=True)  # a result argument: tuned again
    assert len(tuner.calls) == 4


def test_forget_tuning_makes_the_named_kernels_tune_again_at_a_known_key_and_keeps_the_others(monkeypatch):
    """fp8moe.bench forgets a per-group kernel's choices before each group layout (the key cannot see it)."""
    choices = iter([configs.PER_GROUP.cuda[0], configs.ROWWISE.cuda[0], configs.PER_GROUP.cuda[1]])  # tuning order
    built = []

    def recording_autotune(configs, key):  # triton.autotune's stand-in: one tuner per build, one choice each
        built.append(_FakeTuner(next(choices)))
        return lambda kernel: built[-1]

    monkeypatch.setattr(triton, "autotune", recording_autotune)
    monkeypatch.setattr(configs, "_AUTOTUNED", {})
    monkeypatch.setattr(configs, "_CHOSEN", {})
    x = torch.empty(configs.AUTOTUNE_MIN_ELEMENTS, device="meta", dtype=torch.bfloat16)
    key_args = {k: 1 for k in configs.PER_GROUP.key + configs.ROWWISE.key}

    def launch(kernel_configs):
        configs.launch(_RecordingKernel(), kernel_configs, CUDA, lambda meta: (1,), x_ptr=x, **key_args)
        return configs.LAST_CONFIG[kernel_configs.name]

    assert launch(configs.PER_GROUP) == configs.PER_GROUP.cuda[0]
    assert launch(configs.ROWWISE) == configs.ROWWISE.cuda[0]
    assert launch(configs.PER_GROUP) == configs.PER_GROUP.cuda[0]  # the cached choice: no new tuner
    assert len(built) == 2
    plans_forgotten = []
    monkeypatch.setattr(configs.replay, "forget", lambda: plans_forgotten.append(True))
    configs.forget_tuning([configs.PER_GROUP.name])
    assert plans_forgotten == [True]  # a launch plan would replay the config it recorded
    assert [name for name, _ in configs._AUTOTUNED] == [configs.ROWWISE.name]
    assert launch(configs.PER_GROUP) == configs.PER_GROUP.cuda[1]  # a fresh tuner timed it again, at the same key
    assert launch(configs.ROWWISE) == configs.ROWWISE.cuda[0]  # still the cached choice
    assert [len(tuner.calls) for tuner in built] == [1, 1, 1]


@pytest.mark.parametrize("name", KERNELS)
def test_cuda_launch_of_a_small_problem_takes_the_smallest_tile_without_autotuning(name, monkeypatch):
    _, kernel_configs = KERNELS[name]
    monkeypatch.setattr(triton, "autotune", _forbidden_autotune)
    kernel = _RecordingKernel()
    x = torch.empty(configs.AUTOTUNE_MIN_ELEMENTS - 1, device="meta")
    configs.launch(kernel, kernel_configs, CUDA, lambda meta: (2,), x_ptr=x)
    tile = lambda c: math.prod(v for k, v in c.kwargs.items() if k.startswith("BLOCK_"))
    smallest = min(tile(c) for c in kernel_configs.cuda)
    [(_, kwargs)] = kernel.launches
    assert tile(triton.Config({k: kwargs[k] for k in kernel_configs.cuda[0].kwargs})) == smallest
    assert kwargs["x_ptr"] is x


def test_the_smallest_tile_counts_block_sizes_only():
    """Flags beside the block sizes (GROUPS_FASTEST=True, ONE_READ=False) are no factors of the tile: a
    two-pass-only 64x64 candidate must not pass for a tile of 0 elements, smaller than 4x512."""
    small = triton.Config({"BLOCK_R": 4, "BLOCK_K": 512, "GROUPS_FASTEST": True}, num_warps=4)
    flagged = triton.Config({"BLOCK_R": 64, "BLOCK_K": 64, "ONE_READ": False}, num_warps=4)
    kernel_configs = dataclasses.replace(configs.PER_GROUP, cuda=(flagged, small), view=None, cuda_by_view=None)
    assert kernel_configs.smallest_cuda is small


# ---------------------------------------------------------------------------------------------------------------
# Backend detection
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "dtypes"), [("gfx942", FNUZ), ("gfx950", FN), ("gfx1201", FN)])
def test_rocm_arch_selects_its_fp8_formats(arch, dtypes):
    assert backend_module.rocm_fp8_dtypes(arch) == dtypes


def test_unknown_rocm_arch_raises():
    with pytest.raises(ValueError, match="gfx90a"):
        backend_module.rocm_fp8_dtypes("gfx90a")


@pytest.mark.parametrize(("arch", "dtypes"), [("gfx942", FNUZ), ("gfx950", FN)])
def test_rocm_device_gets_a_backend_that_never_autotunes(arch, dtypes, monkeypatch):
    monkeypatch.setattr(backend_module, "interpreter_requested", lambda: False)
    monkeypatch.setattr(torch.version, "hip", "6.4")
    monkeypatch.setattr(backend_module, "_rocm_arch", lambda device: arch)
    backend = backend_module.backend_for("cuda:0")
    assert (backend.kind, backend.arch, backend.fp8_dtypes) == ("rocm", arch, dtypes)
    assert not backend.autotune
    assert not backend.exact_encode


@pytest.mark.parametrize(
    ("capability", "dtypes", "exact_encode"),
    [((9, 0), FN, False), ((10, 0), FN, False), ((8, 9), FN, True), ((8, 0), (), True)],
    ids=["sm90-hardware-cast", "sm100-hardware-cast", "sm89-f16-double-rounding", "sm80-no-fp8"],
)
def test_cuda_cast_path_follows_the_architecture(capability, dtypes, exact_encode):
    backend = backend_module.cuda_backend(*capability)
    assert (backend.fp8_dtypes, backend.exact_encode, backend.autotune) == (dtypes, exact_encode, True)


@pytest.mark.parametrize(
    ("backend", "cast_mode"),
    [
        (backend_module.cuda_backend(9, 0), backend_module.CAST_SATURATING_NATIVE),  # cvt.rn.satfinite
        (backend_module.cuda_backend(8, 9), backend_module.CAST_EXACT),
        (backend_module.rocm_backend("gfx942"), backend_module.CAST_CLAMPED_NATIVE),  # saturation not established
        (backend_module.rocm_backend("gfx1201"), backend_module.CAST_EXACT),
        (INTERPRETER, backend_module.CAST_EXACT),
    ],
    ids=["sm90", "sm89", "gfx942", "gfx1201", "interpreter"],
)
def test_kernels_skip_their_clamp_only_where_the_native_cast_saturates(backend, cast_mode):
    assert backend.cast_mode == cast_mode
    assert fp8_constexprs(torch.float8_e4m3fn, False, backend.cast_mode)["CAST_MODE"] == cast_mode


@pytest.mark.parametrize(
    ("setting", "capability", "dependent"),
    [(None, (9, 0), False), ("0", (9, 0), False), ("1", (9, 0), True), ("1", (10, 0), True), ("1", (8, 9), False)],
    ids=["unset", "off", "sm90", "sm100", "sm89-has-no-griddepcontrol"],
)
def test_dependent_launch_is_opt_in_and_only_where_the_gpu_has_grid_dependency_control(
    setting, capability, dependent, monkeypatch
):
    if setting is None:
        monkeypatch.delenv("FP8MOE_PDL", raising=False)
    else:
        monkeypatch.setenv("FP8MOE_PDL", setting)
    backend_module.cuda_backend.cache_clear()  # built once per capability: the setting is read then
    try:
        assert backend_module.cuda_backend(*capability).dependent_launch is dependent
    finally:
        backend_module.cuda_backend.cache_clear()
    monkeypatch.setenv("FP8MOE_PDL", "1")
    assert not backend_module.rocm_backend("gfx942").dependent_launch
    assert not INTERPRETER.dependent_launch


def test_the_function_under_the_wrappers_is_the_one_that_declares_the_parameters():
    """configs.jit_function unwraps triton.heuristics (and autotune) down to the function Triton compiles, whose
    parameter names configs.declares reads: the span kernels declare DEPENDENT_LAUNCH, the dense ones do not."""
    span = _per_group._per_group_rows_kernel
    wrapped = triton.heuristics({"BLOCK_R": lambda meta: 16})(span)
    assert configs.jit_function(wrapped) is span
    assert configs.jit_function(span) is span
    assert configs.declares(wrapped, "DEPENDENT_LAUNCH")
    assert not configs.declares(_rows._rowwise_scale_and_cast_kernel, "DEPENDENT_LAUNCH")


def test_bringup_requires_satfinite_of_a_native_cast_the_kernels_leave_saturation_to(monkeypatch):
    monkeypatch.setattr(fp8ref_backend, "backend_for", lambda device: backend_module.cuda_backend(9, 0))
    path = fp8ref_backend.BACKEND.native_cast(torch.device("cpu"), FN)
    assert path.load_bearing
    assert path.required_profile == "satfinite"
    monkeypatch.setattr(fp8ref_backend, "backend_for", lambda device: backend_module.rocm_backend("gfx950"))
    assert fp8ref_backend.BACKEND.native_cast(torch.device("cpu"), FN).required_profile is None


@pytest.mark.parametrize(
    ("arch", "exact_encode"),
    [("gfx942", False), ("gfx950", False), ("gfx1201", True)],
    ids=["cdna3-direct", "cdna4-direct", "rdna4-via-f16"],
)
def test_rocm_uses_the_exact_encoder_where_tritons_cast_goes_through_f16(arch, exact_encode):
    assert backend_module.rocm_backend(arch).exact_encode is exact_encode


@pytest.mark.parametrize(("version", "dtypes"), [("3.6.0", FN), ("3.9.0", FN + FNUZ), ("4.0.1", FN + FNUZ)])
def test_interpreter_offers_fnuz_only_where_triton_has_them(version, dtypes):
    assert backend_module.interpreter_fp8_dtypes(version) == dtypes


def test_sm80_refuses_every_fp8_dtype_by_name():
    with pytest.raises(TypeError, match="sm_80"):
        backend_module.cuda_backend(8, 0).check_fp8_dtype(torch.float8_e4m3fn)


# ---------------------------------------------------------------------------------------------------------------
# int64 offsets
# ---------------------------------------------------------------------------------------------------------------


def _meta(shape, stride, dtype=torch.bfloat16):
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


@pytest.mark.parametrize(
    ("shape", "stride", "expected"),
    [
        ((2, 40), (40, 1), False),
        ((2, 1), (configs.INT32_MAX, 1), False),  # largest offset exactly INT32_MAX
        ((2, 2), (configs.INT32_MAX, 1), True),  # INT32_MAX + 1
        ((3, 40), (2**30 + 64, 1), True),  # stride fits int32, 2 * stride does not
        ((0, 40), (2**40, 1), False),  # empty: no element, no offset
        ((2**16, 2**15 + 1), (2**15 + 1, 1), True),  # 2^31 + 2^16 elements, contiguous
    ],
)
def test_int64_offsets_exactly_when_an_element_offset_exceeds_int32(shape, stride, expected):
    assert configs.needs_int64_index(_meta(shape, stride)) is expected


def _recorded_launches(monkeypatch) -> list[dict]:
    launches = []
    monkeypatch.setattr(configs, "launch", lambda kernel, kcfg, backend, grid, **args: launches.append(args))
    return launches


@pytest.mark.parametrize("method", ["reduction", "atomic"])
@pytest.mark.parametrize(("stride_e", "expected"), [(120, False), (2**30 + 64, True)])
def test_dense_launchers_pass_int64_index_for_large_offsets(method, stride_e, expected, monkeypatch):
    launches = _recorded_launches(monkeypatch)
    x = _meta((3, 3, 40), (stride_e, 40, 1))
    rowwise_3d_transpose_rhs.launch(x, torch.float8_e4m3fn, False, INTERPRETER, method)
    rowwise_2d_scale_and_cast.launch(x[:, 0, :], torch.float8_e4m3fn, False, INTERPRETER)
    assert [args["INT64_INDEX"] for args in launches] == [expected] * len(launches)
    assert len(launches) == (3 if method == "atomic" else 2)


def test_launch_makes_the_tensors_device_current(monkeypatch):
    """Triton launches on the current CUDA device; a tensor on cuda:1 needs cuda:1 current (2x H200 failure)."""
    entered = []

    class RecordingDevice:
        def __init__(self, device):
            entered.append(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "device", RecordingDevice)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # the process's current device: cuda:0
    tensor = torch.empty(0, device="meta")
    monkeypatch.setattr(tensor.__class__, "device", property(lambda self: torch.device("cuda", 1)), raising=True)
    kernel = _RecordingKernel()
    configs.launch(kernel, configs.ROWWISE, INTERPRETER, lambda meta: (1,), x_ptr=tensor, S=3, L=40)
    assert entered == [torch.device("cuda", 1)]
    assert len(kernel.launches) == 1


# ---------------------------------------------------------------------------------------------------------------
# Every CUDA candidate gives the reference's bytes (run here in the interpreter: configs change speed, never bytes)
# ---------------------------------------------------------------------------------------------------------------

#: (configs, op, shape, offs layout) run with each candidate: shapes past one tile of most candidates, with unaligned
#: group edges (random offs) and a row-major colwise-3D input (the strided reduced dim).
_CANDIDATE_RUNS = [
    (configs.ROWWISE, "rowwise_2d_scale_and_cast", (5, 300), None, "row_major"),
    (configs.ROWWISE, "colwise_3d_scale_and_cast", (2, 300, 24), None, "row_major"),
    (configs.PER_GROUP, "per_group_rowwise_scales", (20, 700), "random", "row_major"),
    (configs.PER_GROUP, "per_group_colwise_scales", (700, 40), "random", "row_major"),
    (configs.PER_GROUP_DUAL, "per_group_colwise_scales_dual", (300, 40, 24), "empty_middle", "row_major"),
]


@pytest.mark.parametrize(
    ("kernel_configs", "op", "shape", "offs", "layout", "index"),
    [(*run, i) for run in _CANDIDATE_RUNS for i in range(len(run[0].cuda))],
    ids=lambda v: v.name if isinstance(v, configs.KernelConfigs) else None,
)
def test_every_cuda_candidate_gives_the_reference_bytes(
    kernel_configs, op, shape, offs, layout, index, monkeypatch, device
):
    from fp8ref.contracts import contract
    from fp8ref.layouts import make_offs, to_memory_layout
    from fp8ref.testing import assert_same_bits

    original = configs.KernelConfigs.fixed
    candidate = kernel_configs.cuda[index]
    monkeypatch.setattr(
        configs.KernelConfigs,
        "fixed",
        lambda self, backend, args: candidate if self.name == kernel_configs.name else original(self, backend, args),
    )
    c = contract(op)
    gen = torch.Generator().manual_seed(index)
    xs = tuple(
        to_memory_layout(torch.randn(s, generator=gen).to(torch.bfloat16), layout) for s in c.input_shapes(shape)
    )
    ends = make_offs(offs, c.jagged_length(shape), 5, gen) if offs else None
    offs_t = None if ends is None else torch.tensor(ends, dtype=torch.int32)
    got = c.call(getattr(fp8moe, op), [x.to(device) for x in xs], None if offs_t is None else offs_t.to(device))
    got = [t.cpu() for t in got]
    expected = c.call(c.reference, xs, offs_t)
    for i, (a, b) in enumerate(zip(got, expected)):
        if ends is not None and i % 2 == 0:  # q: compare the jagged extent only (past offs[-1] is unspecified)
            dim = c.jagged_dim
            a, b = a.narrow(dim, 0, ends[-1]), b.narrow(dim, 0, ends[-1])
        assert_same_bits(a, b, what=f"output {i} with {candidate}")


def test_every_fp8moe_launch_variant_names_its_candidate_lists():
    from fp8moe.configs import CONFIGS_BY_SPEC, KernelConfigs
    from fp8ref.spec import specs

    variants = {
        f"{s.name}[{kw['method']}]" if "method" in kw else s.name
        for s in specs()
        if s.contract.kind == "quantize" and s.kernel.startswith("fp8moe")
        for kw in s.kwargs_grid
    }
    assert variants == set(CONFIGS_BY_SPEC)
    assert all(isinstance(c, KernelConfigs) for lists in CONFIGS_BY_SPEC.values() for c in lists)


def test_launch_records_its_config_and_describe_names_blocks_and_warps():
    launched = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda **kw: launched.append(kw)

    interpreter = Backend("interpreter", "cpu", FN, exact_encode=True, autotune=False)
    args = {"B": 1, "S": 8, "L": 100}
    configs.launch(Kernel(), configs.ROWWISE, interpreter, lambda meta: (1,), **args)
    assert len(launched) == 1
    assert configs.LAST_CONFIG["rowwise_scale_and_cast"] == configs.ROWWISE.interpreter.config(args)
    assert configs.describe(triton.Config({"BLOCK_S": 16, "BLOCK_L": 512}, num_warps=4)) == "16x512/w4"
    assert configs.describe(None) == "-"
    capped = triton.Config({"BLOCK_R": 32, "BLOCK_K": 128}, num_warps=4, maxnreg=128)
    assert configs.describe(capped) == "32x128/w4/r128"  # a register cap is part of the name tune tables print


def test_launch_device_switches_only_to_a_cuda_device_that_is_not_current(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for device in (None, torch.device("cpu"), torch.device("cuda"), torch.device("cuda:0")):
        assert isinstance(launch_device(device), contextlib.nullcontext), device
    other = launch_device(torch.device("cuda:1"))
    assert isinstance(other, torch.cuda.device)
    assert other.idx == 1


@pytest.mark.parametrize(
    ("variable", "table", "value", "refused"),
    [("FP8MOE_PER_GROUP_KERNEL", "PER_GROUP_KERNEL", "tiles", "fast"),
     ("FP8MOE_COLWISE_3D_KERNEL", "COLWISE_3D_KERNEL", "auto", "cooperative"),
     ("FP8MOE_TRANSPOSE_ATOMIC_KERNEL", "TRANSPOSE_ATOMIC_KERNEL", "coop", "one_launch")],
)  # fmt: skip
def test_a_kernel_setting_read_at_import_sets_every_backend_and_refuses_other_values(variable, table, value, refused):
    """The kernel choices set from the environment when fp8moe.configs is imported, end to end in a fresh process:
    the value reaches every backend's entry; a value outside the choices stops the import, naming the variable and
    the choices."""
    import os
    import subprocess
    import sys

    choices = getattr(configs, f"{table}S")
    probe = f"import fp8moe.configs as c; print(sorted(set(c.{table}.values())))"
    env = {**os.environ, variable: value}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"['{value}']"
    env[variable] = refused
    bad = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert bad.returncode != 0
    assert f"{variable} must be one of {choices}, got '{refused}'" in bad.stderr


def test_an_environment_variable_sets_every_backend_or_names_its_choices(monkeypatch):
    """FP8MOE_PER_GROUP_KERNEL and FP8MOE_FUSED_ACTIVATIONS (read at import) through one rule."""
    table = {"cuda": "auto", "rocm": "span", "interpreter": "auto"}
    monkeypatch.delenv("FP8MOE_TEST_CHOICE", raising=False)
    assert configs._forced_by_environment("FP8MOE_TEST_CHOICE", table, ("auto", "span")) is table
    monkeypatch.setenv("FP8MOE_TEST_CHOICE", "span")
    assert configs._forced_by_environment("FP8MOE_TEST_CHOICE", table, ("auto", "span")) == dict.fromkeys(table, "span")
    monkeypatch.setenv("FP8MOE_TEST_CHOICE", "fast")
    with pytest.raises(ValueError, match=r"FP8MOE_TEST_CHOICE must be one of \('auto', 'span'\), got 'fast'"):
        configs._forced_by_environment("FP8MOE_TEST_CHOICE", table, ("auto", "span"))


def test_the_coop_transpose_tile_takes_shorter_chunks_where_they_mask_fewer_lanes_of_a_short_row():
    """COOP_TRANSPOSE's rule on CUDA: 1024 x 16 / 4 warps, 512 x 16 / 2 warps for rows of at most 2048 whose 512-long
    chunks cover fewer positions (N = 1408: 3 chunks, 1536 positions, against 2 chunks, 2048; session 45 on an H100,
    the best tile at N = 1408 and within 1.01-1.03x of the best at N = 5120 and 8192); rows past 2048 keep the
    1024-long chunks whatever the cover, so that more rows fit the chunks that may wait; ROCm its one config at every
    N; the rule's choice is what coop_chunks counts."""
    long_chunks, short_chunks = configs.COOP_TRANSPOSE_CUDA[:2]
    assert (configs.describe(long_chunks), configs.describe(short_chunks)) == ("1024x16/w4", "512x16/w2")
    for n, expected, chunks in ((1, short_chunks, 1), (512, short_chunks, 1), (513, long_chunks, 1),
                                (1024, long_chunks, 1), (1408, short_chunks, 3), (2048, long_chunks, 2),
                                (2049, long_chunks, 3), (5120, long_chunks, 5), (8192, long_chunks, 8),
                                (33000, long_chunks, 33)):  # fmt: skip
        assert configs.coop_config(configs.COOP_TRANSPOSE, CUDA, (4, 16, n)) is expected, n
        assert configs.coop_chunks(configs.COOP_TRANSPOSE, CUDA, (4, 16, n)) == chunks, n
    for n in (1408, 8192):
        assert configs.coop_config(configs.COOP_TRANSPOSE, ROCM, (4, 16, n)) is configs.COOP_TRANSPOSE_ROCM


def test_the_coop_columns_tile_is_capped_at_128_registers_on_cuda_only():
    """COOP_COLUMNS' rule: on CUDA 256 x 64 / 4 warps with maxnreg 128 at any number of experts (H100: 0.93-0.97x the
    uncapped time at E = 16 and 64 in session 40, 0.96x at E = 1 in session 45, 0.93-0.95x at four E = 16 shapes in
    session 47; at E = 128 the uncapped tile ran 0.96-0.98x the capped time in session 47, but the bench under it
    marked (128, 5120, 8192) not bitwise, unexplained, so the cap stays); ROCm its one config, never capped; the
    interpreter its own tiles. The cap changes no chunking: coop_chunks is the same either way."""
    uncapped, capped = configs.COOP_COLUMNS_CUDA[:2]
    assert uncapped.kwargs == capped.kwargs == {"BLOCK_L": 256, "BLOCK_M": 64}
    assert (uncapped.num_warps, capped.num_warps) == (4, 4)
    assert (getattr(uncapped, "maxnreg", None), capped.maxnreg) == (None, 128)
    assert configs.describe(capped) == "256x64/w4/r128"
    for e in (1, 2, 16, 64, 128, 256):
        assert configs.coop_config(configs.COOP_COLUMNS, CUDA, (e, 5120, 8192)) is capped, e
        assert configs.coop_chunks(configs.COOP_COLUMNS, CUDA, (e, 5120, 8192)) == 32, e
        rocm = configs.coop_config(configs.COOP_COLUMNS, ROCM, (e, 5120, 8192))
        assert rocm is configs.COOP_COLUMNS_ROCM
        assert getattr(rocm, "maxnreg", None) is None
        assert getattr(configs.coop_config(configs.COOP_COLUMNS, INTERPRETER, (e, 48, 64)), "maxnreg", None) is None


@pytest.mark.parametrize("table", [configs.GROUP_TILES, configs.GROUP_COOP], ids=lambda t: t.name)
def test_the_jagged_rule_lists_pick_by_view_on_cuda_and_take_the_fixed_tile_on_rocm(table):
    """The per-group kernels that never autotune (fp8moe.configs._config_by_view): transposing views (x contiguous
    along R, the colwise ops) take the first CUDA candidate, views contiguous along K the second; ROCm its one
    config for both."""
    colwise = {"R": 2048, "K": 16640, "stride_xr": 1, "stride_xk": 2048}
    rowwise = {"R": 2048, "K": 16640, "stride_xr": 16640, "stride_xk": 1}
    assert table.fixed(CUDA, colwise) is table.cuda[0]
    assert table.fixed(CUDA, rowwise) is table.cuda[1]
    assert table.fixed(ROCM, colwise) is table.rocm
    assert table.fixed(ROCM, rowwise) is table.rocm


def test_the_group_coop_cap_caps_the_transposing_views_tile_on_cuda_only(monkeypatch):
    """fp8moe.configs.GROUP_COOP_CAP (None by default: the tile as listed): set, CUDA's transposing views (the colwise
    ops) take GROUP_COOP's first tile with that maxnreg, the same blocks and warps (so the same workspace and
    chunking); views contiguous along K, ROCm and the interpreter keep their tiles uncapped."""
    colwise = {"R": 2048, "K": 16640, "stride_xr": 1, "stride_xk": 2048}
    rowwise = {"R": 2048, "K": 16640, "stride_xr": 16640, "stride_xk": 1}
    assert configs.GROUP_COOP_CAP is None
    assert configs.GROUP_COOP.fixed(CUDA, colwise) is configs.GROUP_COOP.cuda[0]
    monkeypatch.setattr(configs, "GROUP_COOP_CAP", 128)
    capped, first = configs.GROUP_COOP.fixed(CUDA, colwise), configs.GROUP_COOP.cuda[0]
    assert (capped.kwargs, capped.num_warps, capped.maxnreg) == (first.kwargs, first.num_warps, 128)
    assert configs.describe(capped) == "256x64/w4/r128"
    assert configs.GROUP_COOP.fixed(CUDA, colwise) is capped  # made once per cap, not per launch
    assert configs.GROUP_COOP.fixed(CUDA, colwise) is capped  # made once per cap, not per launch
    assert getattr(first, "maxnreg", None) is None  # the listed tile itself is left as it is
    assert configs.GROUP_COOP.fixed(CUDA, rowwise) is configs.GROUP_COOP.cuda[1]
    assert configs.GROUP_COOP.fixed(ROCM, colwise) is configs.GROUP_COOP.rocm
    assert getattr(configs.GROUP_COOP.fixed(INTERPRETER, {**colwise, "R": 48, "K": 64}), "maxnreg", None) is None
