"""The six reference ops of SPEC §5: rowwise, colwise and per-group FP8 scale-and-cast.

Every op is the same three steps applied per slice (a row, a column, or a row/column restricted to one group):
``amax = max |x|`` over the slice (:func:`fp8ref.scaling.tensor_to_amax` semantics), ``scale =
amax_to_scale(amax)``, ``q = to_fp8_saturated(f32(x) * scale)``. The ops differ only in what a slice is and in the
output layout. The kernels in :mod:`fp8moe` must match these functions bit for bit (SPEC §4).

The jagged ops (``per_group_*``) never read ``offs`` on the host: each element's group id is computed on the device
with ``torch.searchsorted`` and amax is reduced per (group, slice) with ``scatter_reduce``, so they run under
``torch.compile(fullgraph=True)`` and cost no device sync. Call :func:`validate_offs` (which does sync) to check
offsets first.
"""

from __future__ import annotations

import itertools

import torch

from fp8ref.formats import FP8_DTYPES
from fp8ref.scaling import amax_to_scale, tensor_to_amax, to_fp8_saturated

__all__ = [
    "INPUT_DTYPES",
    "check_args",
    "check_input",
    "check_offs",
    "colwise_3d_scale_and_cast",
    "per_group_colwise_scales",
    "per_group_colwise_scales_dual",
    "per_group_rowwise_scales",
    "rowwise_2d_scale_and_cast",
    "rowwise_3d_transpose_rhs",
    "validate_offs",
]

#: Source dtypes every op accepts. Each converts to f32 exactly, so amax and the product see the input's exact values.
INPUT_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)


# ----------------------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------------------


def check_input(name: str, x: object, dims: str) -> None:
    """Raise unless ``x`` is a tensor of an accepted dtype with one dimension per letter of ``dims``.

    Shared with the kernel wrappers (fp8moe.ops), so both name a bad argument the same way.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in INPUT_DTYPES:
        raise TypeError(f"{name} must have dtype bfloat16, float16 or float32, got {x.dtype}")
    if x.ndim != len(dims):
        raise ValueError(f"{name} must be {len(dims)}-D ({', '.join(dims)}), got shape {tuple(x.shape)}")


def _check_options(fp8_dtype: object, round_scales_to_power_of_2: object) -> None:
    if not (isinstance(fp8_dtype, torch.dtype) and fp8_dtype in FP8_DTYPES):
        names = [str(d).removeprefix("torch.") for d in FP8_DTYPES]
        raise TypeError(f"fp8_dtype must be one of {names}, got {fp8_dtype!r}")
    if not isinstance(round_scales_to_power_of_2, bool):
        # A tensor flag would be read with a hidden device sync; an int would silently mean True or False.
        raise TypeError(f"round_scales_to_power_of_2 must be a bool, got {type(round_scales_to_power_of_2).__name__}")


def _check_pair(x1: torch.Tensor, x2: torch.Tensor) -> None:
    if x1.shape[0] != x2.shape[0]:
        raise ValueError(f"x1 and x2 must share their rows (Ktot), got shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    if x1.dtype != x2.dtype:
        raise TypeError(f"x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    if x1.device != x2.device:
        raise ValueError(f"x1 and x2 must be on the same device, got {x1.device} and {x2.device}")


#: ``check_args``' default for ``offs``: the op takes none (None is a bad offs, not "no offs").
_NO_OFFS = object()


def check_args(
    dims: str,
    *xs: object,
    offs: object = _NO_OFFS,
    fp8_dtype: object,
    round_scales_to_power_of_2: object,
) -> None:
    """Every argument check an op shares with its kernel twin (fp8moe.ops), in one order, so that the same bad call
    raises the same exception with the same message from both.

    The order: each input (named "x", or "x1" and "x2" for the dual op: a tensor, an accepted dtype, one dimension
    per letter of ``dims``), the dual op's pair (same rows, dtype and device), ``offs`` for the jagged ops (metadata
    only: no device sync), then ``fp8_dtype`` (one of the four fp8 dtypes) and ``round_scales_to_power_of_2`` (a
    bool: an int or a tensor is refused, a tensor flag would cost a hidden device sync). Kernel-only constraints
    (contiguous offs, the backend's fp8 dtypes, a variant name) are the kernel wrapper's own, checked after these.

    Raises:
        TypeError: a wrong type or dtype. ValueError: a wrong shape, device or pair.
    """
    names = ("x",) if len(xs) == 1 else tuple(f"x{i + 1}" for i in range(len(xs)))
    for name, x in zip(names, xs):
        check_input(name, x, dims)
    if len(xs) == 2:
        _check_pair(*xs)
    if offs is not _NO_OFFS:
        check_offs(offs, xs[0])
    _check_options(fp8_dtype, round_scales_to_power_of_2)


def check_offs(offs: object, x: torch.Tensor) -> None:
    """Metadata-only checks (no device sync); values are checked by :func:`validate_offs`."""
    if not isinstance(offs, torch.Tensor):
        raise TypeError(f"offs must be a torch.Tensor, got {type(offs).__name__}")
    if offs.dtype != torch.int32:
        raise TypeError(f"offs must have dtype int32, got {offs.dtype}")
    if offs.ndim != 1:
        raise ValueError(f"offs must be 1-D (G,), got shape {tuple(offs.shape)}")
    if offs.device != x.device:
        raise ValueError(f"offs must be on the input's device {x.device}, got {offs.device}")


def validate_offs(offs: torch.Tensor, total: int) -> None:
    """Check that ``offs`` are valid exclusive end offsets into a jagged dimension of length ``total``.

    Opt-in: it reads the offsets on the host (one device sync), which the ops themselves never do.

    Raises:
        TypeError: offs is not an int32 tensor.
        ValueError: offs is not 1-D, has a negative entry, decreases, or its last entry exceeds ``total``.
    """
    if not isinstance(offs, torch.Tensor) or offs.dtype != torch.int32:
        raise TypeError(f"offs must be an int32 tensor, got {getattr(offs, 'dtype', type(offs).__name__)}")
    if offs.ndim != 1:
        raise ValueError(f"offs must be 1-D (G,), got shape {tuple(offs.shape)}")
    values = offs.tolist()
    bounds = [0, *values]
    if any(b < a for a, b in itertools.pairwise(bounds)):
        raise ValueError(f"offs must be non-negative and non-decreasing, got {values}")
    if values and values[-1] > total:
        raise ValueError(f"offs[-1] = {values[-1]} exceeds the jagged dimension's length {total}")


# ----------------------------------------------------------------------------------------------------------------
# Shared steps
# ----------------------------------------------------------------------------------------------------------------


def _slice_amax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """tensor_to_amax over ``dim`` (keepdim); an empty slice has amax 0 (torch.amax rejects a zero-size dim)."""
    if x.shape[dim] == 0:
        shape = list(x.shape)
        shape[dim] = 1
        return x.new_zeros(shape)
    return tensor_to_amax(x, dim=dim, keepdim=True)


def _scale_and_cast(x: torch.Tensor, scale: torch.Tensor, fp8_dtype: torch.dtype) -> torch.Tensor:
    """to_fp8_saturated(f32(x) * scale): one f32 multiply (RNE), clamp, one RNE cast. Layout follows x."""
    return to_fp8_saturated(x.to(torch.float32) * scale, fp8_dtype)


def _into(values: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """A fresh tensor with exactly ``size``/``stride`` holding ``values``.

    Allocating the strides literally (rather than relying on ``.contiguous()``) keeps them exact for size-1 dims,
    where PyTorch treats many strides as contiguous and would keep the input's.
    """
    out = torch.empty_strided(size, stride, dtype=values.dtype, device=values.device)
    out.copy_(values)
    return out


def _jagged_rows_scale_and_cast(
    x: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, round_scales_to_power_of_2: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-column-per-group scale and cast of ``x`` (L, C), jagged along dim 0 by ``offs`` (G,).

    Returns q (L, C) in x's layout (rows past offs[-1] hold +0) and scales (G * C,) with s[g * C + c].
    """
    length, cols = x.shape
    num_groups = offs.shape[0]
    # (L,) group id in [0, G]: row r is in group g iff offs[g-1] <= r < offs[g]; id G marks rows past offs[-1].
    # searchsorted(right=True) counts the offsets <= r, which is exactly that g, and skips empty groups.
    rows = torch.arange(length, dtype=torch.int32, device=x.device)
    group = torch.searchsorted(offs, rows, right=True)
    index = group.unsqueeze(1).expand(length, cols)  # (L, C)

    # amax per (group, column), with an extra row G collecting the rows past offs[-1]. |x| is exact in f32.
    # NaN travels in a separate count channel so torch.amax semantics hold by construction: scatter_reduce("amax")
    # did propagate NaN where measured (torch 2.13 CPU; torch 2.11 CUDA, H200), but no documentation promises it
    # and ROCm is untested.
    magnitude = torch.abs(x.to(torch.float32))
    is_nan = torch.isnan(magnitude)
    # Starting from 0 is harmless (|x| >= 0) and gives empty groups amax 0 -> the EPS-derived scale.
    amax = magnitude.new_zeros(num_groups + 1, cols).scatter_reduce(
        0, index, torch.where(is_nan, 0.0, magnitude), reduce="amax"
    )
    nan_count = torch.zeros(num_groups + 1, cols, dtype=torch.int32, device=x.device).scatter_add(
        0, index, is_nan.to(torch.int32)
    )
    amax = torch.where(nan_count > 0, torch.nan, amax)

    scales = amax_to_scale(amax, fp8_dtype, round_scales_to_power_of_2)  # (G + 1, C) f32
    scaled = x.to(torch.float32) * scales.index_select(0, group)
    # Rows past offs[-1] belong to no group: write +0 there (kernels may leave them unwritten, SPEC §4).
    scaled = torch.where((group < num_groups).unsqueeze(1), scaled, 0.0)
    q = to_fp8_saturated(scaled, fp8_dtype)
    return q, scales[:num_groups].reshape(-1)


# ----------------------------------------------------------------------------------------------------------------
# Dense ops
# ----------------------------------------------------------------------------------------------------------------


def rowwise_2d_scale_and_cast(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each row of ``x`` to the FP8 range and cast (the training forward's A and grad_out).

    Args:
        x: (M, K) bf16/f16/f32, any strides.
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" rule of
            :func:`fp8ref.scaling.round_scale_to_power_of_2`.

    Returns:
        q: (M, K) fp8_dtype, row-major, strides (K, 1).
        scales: (M, 1) f32, contiguous; ``scales[m]`` is the multiplier of row m (the GEMM receives 1/scales).

    Semantics:
        1. amax[m] = max_k |x[m, k]| in x's dtype (exact). A NaN anywhere in the row makes amax NaN; +-inf makes it
           +inf; -0 counts as +0; subnormal inputs are kept (no flush to zero). K = 0: amax = 0.
        2. scales[m] = amax_to_scale(amax[m]): f32(f64(fp8_max) / max(f64(amax), 1e-12)), one rounding; then the pow2
           rule if requested. All-zero row -> EPS-derived scale (e4m3fn 447999985582080.0, pow2 2^48); NaN -> NaN;
           +-inf -> 0.
        3. q[m, k] = to_fp8_saturated(f32(x[m, k]) * scales[m]): the product is rounded once to f32 (RNE), clamped to
           +-fp8_max, and rounded once to the fp8 grid (RNE, subnormals kept). A NaN row is all NaN codes; a row
           with an inf has scale 0, so its infs become NaN (inf * 0) and its finite values +-0 (sign kept: -x * 0 =
           -0, code 0x80 in fn formats, 0x00 in fnuz). -0 stays -0 in fn formats and becomes 0x00 in fnuz formats.
    """
    check_args("MK", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    m, k = x.shape
    scales = amax_to_scale(_slice_amax(x, dim=1), fp8_dtype, round_scales_to_power_of_2)  # (M, 1)
    q = _into(_scale_and_cast(x, scales, fp8_dtype), (m, k), (k, 1))
    return q, scales.contiguous()


def colwise_3d_scale_and_cast(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each column of each expert's (K, N) matrix and cast (the expert weights B_t of the forward GEMM).

    Args:
        x: (E, K, N) bf16/f16/f32, any strides (upstream passes column-major per expert).
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" pow2 rule.

    Returns:
        q: (E, K, N) fp8_dtype, column-major per expert: strides (K * N, 1, K).
        scales: (E, 1, N) f32, contiguous; ``scales[e, 0, n]`` is the multiplier of column (e, :, n).

    Semantics:
        1. amax[e, n] = max_k |x[e, k, n]| in x's dtype (exact), NaN-propagating; +-inf -> +inf; -0 counts as +0;
           no flush of subnormals. K = 0: amax = 0.
        2. scales[e, 0, n] = amax_to_scale(amax[e, n]) (f64 divide, one f32 rounding, optional pow2).
           All-zero column -> EPS-derived scale; NaN -> NaN; inf -> 0.
        3. q[e, k, n] = to_fp8_saturated(f32(x[e, k, n]) * scales[e, 0, n]) (f32 RNE product, clamp, RNE cast).
           NaN, inf and -0 behave per column as in :func:`rowwise_2d_scale_and_cast` per row.
    """
    check_args("EKN", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    e, k, n = x.shape
    scales = amax_to_scale(_slice_amax(x, dim=1), fp8_dtype, round_scales_to_power_of_2)  # (E, 1, N)
    q = _into(_scale_and_cast(x, scales, fp8_dtype), (e, k, n), (k * n, 1, k))
    return q, scales.contiguous()


def rowwise_3d_transpose_rhs(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn, round_scales_to_power_of_2: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each row of each expert's (K, N) matrix, cast, and return it transposed (B for the dgrad GEMM).

    Args:
        x: (E, K, N) bf16/f16/f32, any strides.
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" pow2 rule.

    Returns:
        q: (E, N, K) fp8_dtype with strides (N * K, 1, N): ``q[e, n, k]`` quantizes ``x[e, k, n]``, and the bytes are
            laid out as a contiguous (E, K, N) tensor viewed transposed.
        scales: (E, K) f32, contiguous; ``scales[e, k]`` is the multiplier of row (e, k, :).

    Semantics:
        1. amax[e, k] = max_n |x[e, k, n]| in x's dtype (exact), NaN-propagating; +-inf -> +inf; -0 counts as +0;
           no flush of subnormals. N = 0: amax = 0.
        2. scales[e, k] = amax_to_scale(amax[e, k]) (f64 divide, one f32 rounding, optional pow2).
           All-zero row -> EPS-derived scale; NaN -> NaN; inf -> 0.
        3. q[e, n, k] = to_fp8_saturated(f32(x[e, k, n]) * scales[e, k]) (f32 RNE product, clamp, RNE cast).
           NaN, inf and -0 behave per row as in :func:`rowwise_2d_scale_and_cast`.
    """
    check_args("EKN", x, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    e, k, n = x.shape
    scales = amax_to_scale(_slice_amax(x, dim=2), fp8_dtype, round_scales_to_power_of_2)  # (E, K, 1)
    q = _into(_scale_and_cast(x, scales, fp8_dtype).transpose(1, 2), (e, n, k), (n * k, 1, n))
    return q, scales.reshape(e, k).contiguous()


# ----------------------------------------------------------------------------------------------------------------
# Jagged (per-group) ops
# ----------------------------------------------------------------------------------------------------------------


def per_group_rowwise_scales(
    x: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    round_scales_to_power_of_2: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each row within each column group of ``x`` and cast (jagged along the columns).

    Args:
        x: (M, Ktot) bf16/f16/f32, any strides.
        offs: (G,) int32 on x's device: exclusive end offsets along the columns; group g is columns
            [offs[g-1], offs[g]) with offs[-1] := 0. Must be non-decreasing with offs[G-1] <= Ktot (not checked
            here: that would read the device; see :func:`validate_offs`).
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" pow2 rule.

    Returns:
        q: (M, Ktot) fp8_dtype, row-major, strides (Ktot, 1).
        scales: (G * M,) f32; ``scales[g * M + m]`` is the multiplier of row m in group g.

    Semantics:
        1. Group of column j: the g with offs[g-1] <= j < offs[g], computed on the device (no host read of offs).
        2. amax[g, m] = max |x[m, j]| over the columns j of group g, exact (|x| in f32, which holds every bf16/f16
           value), NaN-propagating like torch.amax (one NaN -> NaN), +-inf -> +inf, -0 counts as +0, no flush of
           subnormals. An empty group (offs[g-1] == offs[g]) has amax 0.
        3. scales[g * M + m] = amax_to_scale(amax[g, m]) (f64 divide, one f32 rounding, optional pow2). Empty group
           or all-zero slice -> EPS-derived scale (e4m3fn 447999985582080.0, pow2 2^48); NaN -> NaN; inf -> 0.
        4. q[m, j] = to_fp8_saturated(f32(x[m, j]) * scales[g * M + m]) for j in group g (f32 RNE product, clamp,
           RNE cast; NaN/inf/-0 per slice as in :func:`rowwise_2d_scale_and_cast`). An empty group writes nothing.
        5. Columns j >= offs[G-1] are in no group: this reference writes +0 (0x00) there; kernels may leave them
           unspecified, and comparisons exclude them (SPEC §4).
    """
    check_args("MK", x, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    m, k = x.shape
    q_t, scales = _jagged_rows_scale_and_cast(x.t(), offs, fp8_dtype, round_scales_to_power_of_2)
    return _into(q_t.t(), (m, k), (k, 1)), scales


def per_group_colwise_scales(
    x: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    round_scales_to_power_of_2: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale each column within each row group of ``x`` and cast (jagged along the rows).

    Args:
        x: (Ktot, N) bf16/f16/f32, any strides.
        offs: (G,) int32 on x's device: exclusive end offsets along the rows; group g is rows [offs[g-1], offs[g])
            with offs[-1] := 0. Must be non-decreasing with offs[G-1] <= Ktot (see :func:`validate_offs`).
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" pow2 rule.

    Returns:
        q: (Ktot, N) fp8_dtype, column-major, strides (1, Ktot).
        scales: (G * N,) f32; ``scales[g * N + n]`` is the multiplier of column n in group g.

    Semantics:
        1. Group of row i: the g with offs[g-1] <= i < offs[g], computed on the device (no host read of offs).
        2. amax[g, n] = max |x[i, n]| over the rows i of group g, exact (|x| in f32), NaN-propagating like
           torch.amax, +-inf -> +inf, -0 counts as +0, no flush of subnormals. An empty group has amax 0.
        3. scales[g * N + n] = amax_to_scale(amax[g, n]) (f64 divide, one f32 rounding, optional pow2). Empty group
           or all-zero slice -> EPS-derived scale; NaN -> NaN; inf -> 0.
        4. q[i, n] = to_fp8_saturated(f32(x[i, n]) * scales[g * N + n]) for i in group g (f32 RNE product, clamp,
           RNE cast; NaN/inf/-0 per slice as in :func:`rowwise_2d_scale_and_cast`). An empty group writes nothing.
        5. Rows i >= offs[G-1] are in no group: this reference writes +0 (0x00) there; kernels may leave them
           unspecified, and comparisons exclude them (SPEC §4).
    """
    check_args("KN", x, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    k, n = x.shape
    q, scales = _jagged_rows_scale_and_cast(x, offs, fp8_dtype, round_scales_to_power_of_2)
    return _into(q, (k, n), (1, k)), scales


def per_group_colwise_scales_dual(
    x1: torch.Tensor,
    x2: torch.Tensor,
    offs: torch.Tensor,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    round_scales_to_power_of_2: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`per_group_colwise_scales` of two tensors that share their rows and ``offs`` (grad_out and A in grad_B).

    Args:
        x1: (Ktot, N1) bf16/f16/f32, any strides.
        x2: (Ktot, N2), same dtype and device as x1, any strides.
        offs: (G,) int32 end offsets along the shared rows.
        fp8_dtype: one of the four FP8 dtypes.
        round_scales_to_power_of_2: round every scale with the "log2" pow2 rule.

    Returns:
        (q1, s1, q2, s2): q1 (Ktot, N1) strides (1, Ktot), s1 (G * N1,); q2 (Ktot, N2) strides (1, Ktot),
        s2 (G * N2,).

    Semantics:
        Exactly ``per_group_colwise_scales(x1, offs, ...) + per_group_colwise_scales(x2, offs, ...)``: the two
        tensors never influence each other's amax. See that function for every step.
    """
    check_args("KN", x1, x2, offs=offs, fp8_dtype=fp8_dtype, round_scales_to_power_of_2=round_scales_to_power_of_2)
    q1, s1 = per_group_colwise_scales(x1, offs, fp8_dtype, round_scales_to_power_of_2)
    q2, s2 = per_group_colwise_scales(x2, offs, fp8_dtype, round_scales_to_power_of_2)
    return q1, s1, q2, s2
