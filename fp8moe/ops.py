"""The six public ops, Triton twins of fp8ref.ops, and two fusions of two of them, registered with torch.library.

Each public function validates its arguments (raising TypeError/ValueError that name the argument), then runs the
implementation that launches the kernel (fp8moe/kernels/<op>.py). The implementation is registered as the custom
op ``torch.ops.fp8moe.<op>``, whose fake implementation allocates outputs of the exact shapes and strides, so
``torch.compile(fullgraph=True)`` traces through the op (it stays opaque, one node) and returns the eager bytes.
Plain eager calls skip the dispatcher's Python path (see ``_direct_call``); traced calls, tensor subclasses,
dispatch modes and inputs that require grad go through the custom op. Signatures and results are those of
fp8ref.ops (SPEC §5); extra keyword-only arguments select a variant or opt into a check, never change a result.

Checks that depend on the device (which backend runs it, which fp8 dtypes it stores) run inside the custom op, in
both the real and the fake implementation, so a compiled graph refuses an fp8 dtype the device lacks at trace time
just as eager does (the fake implementation reads the device's capability for that).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch._C import _is_torch_function_mode_enabled as _torch_function_mode_enabled
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from fp8moe import replay
from fp8moe.backend import Backend, backend_for
from fp8moe.kernels import colwise_3d_and_transpose_rhs as _pair
from fp8moe.kernels import colwise_3d_scale_and_cast as _colwise_3d
from fp8moe.kernels import per_group_colwise_scales as _per_group_colwise
from fp8moe.kernels import per_group_colwise_scales_dual as _per_group_colwise_dual
from fp8moe.kernels import per_group_rowwise_scales as _per_group_rowwise
from fp8moe.kernels import rowwise_2d_scale_and_cast as _rowwise_2d
from fp8moe.kernels import rowwise_3d_transpose_rhs as _transpose_rhs
from fp8moe.kernels import rowwise_and_per_group_colwise as _jagged_pair
from fp8ref.ops import check_args
from fp8ref.ops import validate_offs as _validate_offs_values

__all__ = [
    "colwise_3d_and_transpose_rhs",
    "colwise_3d_scale_and_cast",
    "per_group_colwise_scales",
    "per_group_colwise_scales_dual",
    "per_group_rowwise_scales",
    "rowwise_2d_scale_and_cast",
    "rowwise_3d_transpose_rhs",
    "rowwise_and_per_group_colwise",
]

Tensor = torch.Tensor
_E4M3 = torch.float8_e4m3fn


# ----------------------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------------------


#: Most groups a per-group op takes: the span kernel's grid has one program per (row block, group) with the groups
#: along its second dim, at most 65535 on CUDA (and HIP). fp8ref has no limit.
MAX_GROUPS = 65535


def _check_offs(offs: torch.Tensor, total: int, validate_offs: bool) -> None:
    """After fp8ref.ops.check_args: the group count, contiguity, and with ``validate_offs`` the values (a host
    read)."""
    if offs.numel() > MAX_GROUPS:
        raise ValueError(f"offs has {offs.numel()} groups; fp8moe's per-group ops take at most {MAX_GROUPS}")
    if offs.numel() > 1 and offs.stride(0) != 1:
        # The kernels read offs[g] at offs_ptr + g: a strided view would be read as other values.
        raise ValueError(f"offs must be contiguous (stride 1), got stride {offs.stride(0)}")
    if validate_offs:
        _validate_offs_values(offs, total)


def _register(name: str, impl):
    """``impl`` as the custom op ``torch.ops.fp8moe.<name>`` (pure: fresh outputs, no input mutated)."""
    return torch.library.custom_op(f"fp8moe::{name}", mutates_args=())(impl)


def _direct_call(*tensors: Tensor) -> bool:
    """Whether an eager call may run the op's implementation without the torch.library dispatcher.

    The dispatcher's Python path (autograd fallthrough, redispatch, the dynamo-disable wrapper) cost 57 us per call
    on the H200 host, 4x an empty Triton launch (benchmarks/results/h200-host-overhead-before.txt), and MoE-sized
    calls were host-bound on it. The direct call runs the same implementation function, so the bytes are the same.
    The dispatcher stays wherever it does something: while torch.compile traces (the op must be one graph node),
    for tensor subclasses (FakeTensor, DTensor, functional tensors), under any dispatch or torch-function mode, and
    for inputs that require grad.
    """
    if torch.compiler.is_compiling() or _torch_function_mode_enabled() or _current_dispatch_mode() is not None:
        return False
    return all(type(t) is Tensor and not t.requires_grad for t in tensors)


#: Each public op below: a repeated direct call replays the launch plan of its first (fp8moe.replay, "Public calls";
#: every op here checks, then makes its one launch on its tensors and returns that launch's outputs).
_replays_public_calls = replay.replays_public_calls(_direct_call)


def _backend(x: torch.Tensor, fp8_dtype: torch.dtype) -> Backend:
    """The backend for x's device; raises ValueError (device) or TypeError (fp8_dtype the backend lacks)."""
    backend = backend_for(x.device)
    backend.check_fp8_dtype(fp8_dtype)
    return backend


# ----------------------------------------------------------------------------------------------------------------
# Dense ops
# ----------------------------------------------------------------------------------------------------------------


def _rowwise_2d_impl(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    return _rowwise_2d.launch(x, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_rowwise_2d_op = _register("rowwise_2d_scale_and_cast", _rowwise_2d_impl)


@_rowwise_2d_op.register_fake
def _(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    _backend(x, fp8_dtype)
    m, k = x.shape
    return x.new_empty((m, k), dtype=fp8_dtype), x.new_empty((m, 1), dtype=torch.float32)


@_replays_public_calls
def rowwise_2d_scale_and_cast(
    x: torch.Tensor, fp8_dtype: torch.dtype = _E4M3, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.rowwise_2d_scale_and_cast` (same bytes, shapes and strides).

    Args:
        x: (M, K) bf16/f16/f32 on a GPU (or the CPU under the interpreter), any strides (read in place, no copy).
        fp8_dtype: an fp8 dtype the backend stores (``fp8moe.backend_for(x.device).fp8_dtypes``).
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.

    Returns:
        q: (M, K) fp8_dtype, row-major. scales: (M, 1) f32.
    """
    check_args("MK", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    run = _rowwise_2d_impl if _direct_call(x) else _rowwise_2d_op
    return run(x, fp8_dtype, round_scales_to_power_of_2)


def _colwise_3d_impl(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    return _colwise_3d.launch(x, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_colwise_3d_op = _register("colwise_3d_scale_and_cast", _colwise_3d_impl)


@_colwise_3d_op.register_fake
def _(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    _backend(x, fp8_dtype)
    e, k, n = x.shape
    q = x.new_empty_strided((e, k, n), (k * n, 1, k), dtype=fp8_dtype)
    return q, x.new_empty((e, 1, n), dtype=torch.float32)


@_replays_public_calls
def colwise_3d_scale_and_cast(
    x: torch.Tensor, fp8_dtype: torch.dtype = _E4M3, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.colwise_3d_scale_and_cast` (same bytes, shapes and strides).

    Args:
        x: (E, K, N) bf16/f16/f32, any strides; the canonical column-major layout (K*N, 1, K) reads contiguously.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.

    Returns:
        q: (E, K, N) fp8_dtype with strides (K*N, 1, K). scales: (E, 1, N) f32.
    """
    check_args("EKN", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    run = _colwise_3d_impl if _direct_call(x) else _colwise_3d_op
    return run(x, fp8_dtype, round_scales_to_power_of_2)


def _transpose_rhs_impl(
    x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, method: str
) -> tuple[Tensor, Tensor]:
    return _transpose_rhs.launch(x, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype), method)


_transpose_rhs_op = _register("rowwise_3d_transpose_rhs", _transpose_rhs_impl)


@_transpose_rhs_op.register_fake
def _(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool, method: str) -> tuple[Tensor, Tensor]:
    _backend(x, fp8_dtype)
    e, k, n = x.shape
    q = x.new_empty_strided((e, n, k), (n * k, 1, n), dtype=fp8_dtype)
    return q, x.new_empty((e, k), dtype=torch.float32)


@_replays_public_calls
def rowwise_3d_transpose_rhs(
    x: torch.Tensor,
    fp8_dtype: torch.dtype = _E4M3,
    round_scales_to_power_of_2: bool = False,
    *,
    method: Literal["atomic", "reduction"] = "reduction",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.rowwise_3d_transpose_rhs` (same bytes, shapes and strides).

    Args:
        x: (E, K, N) bf16/f16/f32, any strides; contiguous reads coalesce along the reduced N.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        method: "reduction" (one launch, one program per block of rows) or "atomic" (two launches: per-tile
            partial amax combined with an int32 atomic max, then quantize). Identical bytes; only speed differs.

    Returns:
        q: (E, N, K) fp8_dtype with strides (N*K, 1, N). scales: (E, K) f32.
    """
    check_args("EKN", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    if method not in _transpose_rhs.METHODS:
        raise ValueError(f"method must be one of {_transpose_rhs.METHODS}, got {method!r}")
    run = _transpose_rhs_impl if _direct_call(x) else _transpose_rhs_op
    return run(x, fp8_dtype, round_scales_to_power_of_2, method)


def _pair_impl(
    x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _pair.launch(x, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_pair_op = _register("colwise_3d_and_transpose_rhs", _pair_impl)


@_pair_op.register_fake
def _(x: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _backend(x, fp8_dtype)
    e, k, n = x.shape
    return (
        x.new_empty_strided((e, k, n), (k * n, 1, k), dtype=fp8_dtype),
        x.new_empty((e, 1, n), dtype=torch.float32),
        x.new_empty_strided((e, n, k), (n * k, 1, n), dtype=fp8_dtype),
        x.new_empty((e, k), dtype=torch.float32),
    )


@_replays_public_calls
def colwise_3d_and_transpose_rhs(
    x: torch.Tensor, fp8_dtype: torch.dtype = _E4M3, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`colwise_3d_scale_and_cast` and :func:`rowwise_3d_transpose_rhs` of one x, bitwise each op's result,
    from two reads of x (fp8moe.kernels.colwise_3d_and_transpose_rhs): the two quantizations of an expert weight
    that the FP8 grouped GEMM's forward and dgrad GEMMs take. Not a row of the op table (fp8ref.contracts): a
    fusion of two of them, tested against both references.

    Args:
        x: (E, K, N) bf16/f16/f32; fused when x has unit stride along K or N (row- or column-major experts), else
            the two ops run one after the other.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.

    Returns:
        (q, scales) of colwise_3d_scale_and_cast: (E, K, N) strides (K*N, 1, K), (E, 1, N); then (q, scales) of
        rowwise_3d_transpose_rhs: (E, N, K) strides (N*K, 1, N), (E, K).
    """
    check_args("EKN", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    run = _pair_impl if _direct_call(x) else _pair_op
    return run(x, fp8_dtype, round_scales_to_power_of_2)


# ----------------------------------------------------------------------------------------------------------------
# Jagged (per-group) ops
# ----------------------------------------------------------------------------------------------------------------


def _per_group_rowwise_impl(
    x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor]:
    return _per_group_rowwise.launch(x, offs, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_per_group_rowwise_op = _register("per_group_rowwise_scales", _per_group_rowwise_impl)


@_per_group_rowwise_op.register_fake
def _(x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    _backend(x, fp8_dtype)
    m, k = x.shape
    return x.new_empty((m, k), dtype=fp8_dtype), x.new_empty((offs.shape[0] * m,), dtype=torch.float32)


@_replays_public_calls
def per_group_rowwise_scales(
    x: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = _E4M3,
    round_scales_to_power_of_2: bool = False,
    *,
    validate_offs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.per_group_rowwise_scales` (same bytes on every column inside a group).

    Args:
        x: (M, Ktot) bf16/f16/f32, any strides.
        offs: (G,) int32 on x's device, exclusive end offsets along the columns. Read only on the device.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        validate_offs: also check the offset values (non-negative, non-decreasing, offs[-1] <= Ktot). This copies
            offs to the host: one device sync, and a graph break under torch.compile. Off by default.

    Returns:
        q: (M, Ktot) fp8_dtype, row-major; columns past offs[-1] are left unwritten. scales: (G * M,) f32,
        ``scales[g * M + m]``.
    """
    check_args("MK", x, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    _check_offs(offs, x.shape[1], validate_offs)
    run = _per_group_rowwise_impl if _direct_call(x, offs) else _per_group_rowwise_op
    return run(x, offs, fp8_dtype, round_scales_to_power_of_2)


def _per_group_colwise_impl(
    x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor]:
    return _per_group_colwise.launch(x, offs, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_per_group_colwise_op = _register("per_group_colwise_scales", _per_group_colwise_impl)


def _fake_colwise(x: Tensor, num_groups: int, fp8_dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    k, n = x.shape
    q = x.new_empty_strided((k, n), (1, k), dtype=fp8_dtype)
    return q, x.new_empty((num_groups * n,), dtype=torch.float32)


@_per_group_colwise_op.register_fake
def _(x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool) -> tuple[Tensor, Tensor]:
    _backend(x, fp8_dtype)
    return _fake_colwise(x, offs.shape[0], fp8_dtype)


@_replays_public_calls
def per_group_colwise_scales(
    x: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = _E4M3,
    round_scales_to_power_of_2: bool = False,
    *,
    validate_offs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.per_group_colwise_scales` (same bytes on every row inside a group).

    Args:
        x: (Ktot, N) bf16/f16/f32, any strides.
        offs: (G,) int32 on x's device, exclusive end offsets along the rows. Read only on the device.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        validate_offs: also check the offset values (one device sync, a graph break under torch.compile).

    Returns:
        q: (Ktot, N) fp8_dtype, column-major (strides (1, Ktot)); rows past offs[-1] are left unwritten.
        scales: (G * N,) f32, ``scales[g * N + n]``.
    """
    check_args("KN", x, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    _check_offs(offs, x.shape[0], validate_offs)
    run = _per_group_colwise_impl if _direct_call(x, offs) else _per_group_colwise_op
    return run(x, offs, fp8_dtype, round_scales_to_power_of_2)


def _per_group_colwise_dual_impl(
    x1: Tensor, x2: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    backend = _backend(x1, fp8_dtype)
    return _per_group_colwise_dual.launch(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2, backend)


_per_group_colwise_dual_op = _register("per_group_colwise_scales_dual", _per_group_colwise_dual_impl)


@_per_group_colwise_dual_op.register_fake
def _(
    x1: Tensor, x2: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _backend(x1, fp8_dtype)
    return (*_fake_colwise(x1, offs.shape[0], fp8_dtype), *_fake_colwise(x2, offs.shape[0], fp8_dtype))


@_replays_public_calls
def per_group_colwise_scales_dual(
    x1: torch.Tensor,
    x2: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = _E4M3,
    round_scales_to_power_of_2: bool = False,
    *,
    validate_offs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton twin of :func:`fp8ref.ops.per_group_colwise_scales_dual`: both tensors in one launch.

    Args:
        x1: (Ktot, N1) bf16/f16/f32, any strides.
        x2: (Ktot, N2), x1's dtype and device, any strides.
        offs: (G,) int32 on the inputs' device, exclusive end offsets along the shared rows.
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        validate_offs: also check the offset values (one device sync, a graph break under torch.compile).

    Returns:
        (q1, s1, q2, s2) as :func:`per_group_colwise_scales` of each input.
    """
    check_args("KN", x1, x2, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    _check_offs(offs, x1.shape[0], validate_offs)
    run = _per_group_colwise_dual_impl if _direct_call(x1, x2, offs) else _per_group_colwise_dual_op
    return run(x1, x2, offs, fp8_dtype, round_scales_to_power_of_2)


def _jagged_pair_impl(
    x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _jagged_pair.launch(x, offs, fp8_dtype, round_scales_to_power_of_2, _backend(x, fp8_dtype))


_jagged_pair_op = _register("rowwise_and_per_group_colwise", _jagged_pair_impl)


@_jagged_pair_op.register_fake
def _(
    x: Tensor, offs: Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    _backend(x, fp8_dtype)
    m, k = x.shape
    return (
        x.new_empty((m, k), dtype=fp8_dtype),
        x.new_empty((m, 1), dtype=torch.float32),
        x.new_empty_strided((m, k), (1, m), dtype=fp8_dtype),
        x.new_empty((offs.shape[0] * k,), dtype=torch.float32),
    )


@_replays_public_calls
def rowwise_and_per_group_colwise(
    x: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = _E4M3,
    round_scales_to_power_of_2: bool = False,
    *,
    validate_offs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`rowwise_2d_scale_and_cast` and :func:`per_group_colwise_scales` of one x, bitwise each op's result, from
    two reads of x (fp8moe.kernels.rowwise_and_per_group_colwise): the two quantizations of an activation (A, or
    grad_out) that the FP8 grouped GEMM's forward (or dgrad) and weight-gradient GEMMs take. Not a row of the op
    table (fp8ref.contracts): a fusion of two of them, tested against both references.

    Args:
        x: (M, K) bf16/f16/f32; fused when x has unit stride along K, else the two ops run one after the other.
        offs: (G,) int32 end offsets along the rows, on x's device, contiguous (as per_group_colwise_scales').
        fp8_dtype: an fp8 dtype the backend stores.
        round_scales_to_power_of_2: apply the "log2" pow2 rule to every scale.
        validate_offs: check the offset values on the host first (a device sync).

    Returns:
        (q, scales) of rowwise_2d_scale_and_cast: (M, K) row-major, (M, 1); then (q, scales) of
        per_group_colwise_scales: (M, K) strides (1, M) (rows past offs[-1] unspecified), (G * K,).
    """
    check_args("KN", x, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    _check_offs(offs, x.shape[0], validate_offs)
    run = _jagged_pair_impl if _direct_call(x, offs) else _jagged_pair_op
    return run(x, offs, fp8_dtype, round_scales_to_power_of_2)
