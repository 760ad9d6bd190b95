"""Reference of the FP8 grouped-GEMM training path (``fp8moe.grouped_mm``): quantize, GEMM, backward.

Pure PyTorch, sync-free, device-agnostic. The path computes, for token groups g = [offs[g-1], offs[g]) of A's rows,
``out[rows of g] = A[rows of g] @ B_t[g]`` and its two gradients, each through one scaled grouped GEMM of FP8
operands (the layouts ``torch._scaled_grouped_mm`` takes, SPEC §5 "Training path"):

==========  =====================================  ============================================  ==================
GEMM        mat_a (fp8, scale)                     mat_b (fp8, scale)                            result
==========  =====================================  ============================================  ==================
forward     A (M, K) rowwise, row-major, (M,)      B_t (E, K, N) colwise-3D, col-major, (E, N)   out (M, N)
dgrad       grad_out (M, N) rowwise, (M,)          B_t transposed-rowwise: (E, N, K) col-major,  grad_A (M, K)
                                                   scales (E, K)
wgrad       A per-group colwise, viewed (K, M)     grad_out per-group colwise (M, N) col-major,  grad_B_t (E, K, N)
            row-major, (G * K,)                    (G * N,)  [both from the dual op]
==========  =====================================  ============================================  ==================

forward and dgrad are "2d-3d" GEMMs (jagged rows, one B per group); wgrad is "2d-2d" (jagged contraction: group g
contracts over its own rows). The GEMM receives the reciprocals of the quantizers' scales (SPEC §4).

What is shared with ``fp8moe.grouped_mm`` (one helper, never a copy): the argument checks
(:func:`check_grouped_mm_args`), the operand wiring (:func:`forward_gemm`, :func:`dgrad_gemm`, :func:`wgrad_gemm`
assemble each GEMM's operands from the quantizers' results, whichever calls made them: the reference path's op
table ops, fp8moe's fused pairs; :func:`forward_operands` and its two siblings quantize with a module ``ops`` of
op-table ops first), the
GEMM's layout rules (:func:`check_gemm_operands`) and, on the CPU, the GEMM itself (:func:`scaled_grouped_mm`).
So the two paths differ only in the quantizers (compared bitwise) and, on a GPU, in the GEMM (compared by SQNR).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import NamedTuple

import torch

from fp8ref import ops as _ref_ops
from fp8ref.metrics import sqnr
from fp8ref.ops import INPUT_DTYPES
from fp8ref.tolerances import Sqnr

__all__ = [
    "GEMM_DTYPES",
    "GROUP_MULTIPLE",
    "SQNR_VS_BF16",
    "SQNR_VS_REFERENCE",
    "GemmOperands",
    "GroupedMMResult",
    "PathOperands",
    "Quantized",
    "check_gemm_operands",
    "check_grouped_mm_args",
    "dgrad_gemm",
    "dgrad_operands",
    "forward_gemm",
    "forward_operands",
    "group_ids",
    "grouped_mm",
    "grouped_mm_bf16",
    "path_sqnr",
    "per_group_sqnr",
    "quantize_operands",
    "scaled_grouped_mm",
    "skewed_offs",
    "wgrad_gemm",
    "wgrad_operands",
]

#: The scaled grouped GEMM's alignment: K and N (and, for the wgrad GEMM, M and every group size) must be multiples
#: of 16 elements, i.e. 16 bytes of fp8 (TMA strides and addresses). torch._scaled_grouped_mm checks the dims on the
#: host; the jagged-K group boundaries are checked by a device-side assert in PyTorch's GroupMMCommon.cuh (read in
#: pytorch/pytorch PR 155466, not triggered here).
GROUP_MULTIPLE = 16

#: fp8 dtypes the scaled grouped GEMM multiplies: e4m3 only (e4m3fnuz on MI300, e4m3fn elsewhere).
GEMM_DTYPES: tuple[torch.dtype, ...] = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)

_OUT_DTYPE = torch.bfloat16  # the only output dtype torch._scaled_grouped_mm writes (torch 2.11 and 2.13)

#: FP8 path against the bf16 path (the same A, B_t, grad_out): the loss FP8 training accepts.
SQNR_VS_BF16 = Sqnr(
    28.0,
    "e4m3 keeps 4 significant bits. Round-to-nearest noise is uniform over half an ulp, and an ulp is relative to "
    "each value, so for log-uniform mantissas the per-element SQNR is 6.02 * 4 + 10*log10(12 / (4 * 0.541)) = "
    "24.1 + 7.4 = 31.5 dB (0.541 = E[1/m^2] for m log-uniform in [1, 2); measured 31.54 dB for rowwise e4m3fn of "
    "randn(2048, 4096), torch 2.13 CPU; the fixed-point rule 6.02 b + 10.8 does not apply to a floating format). "
    "Rowwise/colwise scaling maps each slice's amax to 448, so almost no element is subnormal (randn: a 4-sigma "
    "amax puts 2^-6 at 1.4e-4 sigma). Each GEMM multiplies two independently quantized operands: the noise powers "
    "add, 31.5 - 10*log10(2) = 28.5 dB. The bf16 rounding of both outputs (8 bits: 55.6 dB, measured 55.59) "
    "costs < 0.01 dB. Measured on the H200 against torch._grouped_mm at the four MoE shapes of SPEC §7: "
    "28.50-28.63 dB per tensor, 28.47 dB the lowest group (benchmarks/results/h200-grouped-mm-run1-tests.log). "
    "Floor 28.0 dB: 0.5 dB under the expectation, far above a wrong scale or layout (< 10 dB).",
)

#: fp8moe's path against this reference on the SAME fp8 operands (compared bitwise first): only the GEMM differs.
SQNR_VS_REFERENCE = Sqnr(
    40.0,
    "the operands are bitwise equal, so only the GEMM's arithmetic differs from the exact one here: its bf16 output "
    "rounding (8 significant bits: 55.6 dB if every element were off by a random half ulp; both sides round nearly "
    "the same value, so most agree exactly) and Hopper's fast accumulation. Measured on the H200 (torch 2.11, "
    "benchmarks/results/h200-grouped-mm-run1-tests.log): 50.9-59.3 dB for out, grad_A and grad_B_t at "
    "(16384, 7168, 2048, 8) and (16640, 2048, 1408, 64), 65-84% of elements bitwise equal. Floor 40 dB leaves "
    ">= 10 dB of margin and still catches one wrong group scale (< 20 dB on that group), a transposed or "
    "misaligned operand (~0 dB) and a GEMM that reads the wrong group (~0 dB).",
)


class GemmOperands(NamedTuple):
    """What one scaled grouped GEMM multiplies: fp8 operands in the GEMM's layouts, and their scales.

    ``a_scale`` and ``b_scale`` are the quantizers' multipliers (fp8_max / amax), reshaped to the GEMM's scale
    shapes; the GEMM receives ``1 / scale`` (torch.reciprocal, f32). 2d-3d: a (M, K) row-major, a_scale (M,),
    b (E, K, N) column-major per group, b_scale (E, N). 2d-2d: a (K, Mtot) row-major, a_scale (G * K,),
    b (Mtot, N) column-major, b_scale (G * N,).
    """

    a: torch.Tensor
    a_scale: torch.Tensor
    b: torch.Tensor
    b_scale: torch.Tensor


class PathOperands(NamedTuple):
    """The operands of the path's three GEMMs (dgrad/wgrad None when no gradient was asked for)."""

    forward: GemmOperands
    dgrad: GemmOperands | None
    wgrad: GemmOperands | None


class GroupedMMResult(NamedTuple):
    """out (M, N), grad_A (M, K), grad_B_t (E, K, N) (None without grad_out), and the GEMMs' operands (None for
    the bf16 path). Rows past offs[-1] of out and grad_A are zero here; fp8moe leaves them unspecified."""

    out: torch.Tensor
    grad_A: torch.Tensor | None
    grad_B_t: torch.Tensor | None
    operands: PathOperands | None


# ----------------------------------------------------------------------------------------------------------------
# Validation (shared with fp8moe.grouped_mm)
# ----------------------------------------------------------------------------------------------------------------


def _check_tensor(name: str, x: object, ndim: int, dims: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in INPUT_DTYPES:
        raise TypeError(f"{name} must have dtype bfloat16, float16 or float32, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D ({dims}), got shape {tuple(x.shape)}")


def check_grouped_mm_args(
    A: object, B_t: object, offs: object, out_dtype: object, fp8_dtype: object, *, need_wgrad: bool = False
) -> None:
    """Host-side checks of a grouped_mm call (metadata only: no device sync). Raises TypeError or ValueError.

    Checks: A (M, K) and B_t (E, K, N) tensors of bf16/f16/f32 on one device, K and N multiples of 16 (the GEMM's
    alignment), offs a contiguous 1-D int32 tensor of E entries on A's device, out_dtype bfloat16, fp8_dtype an e4m3
    type, and with ``need_wgrad`` M a multiple of 16 (the wgrad GEMM's contraction length). The offset VALUES are
    checked on the device (see fp8moe.grouped_mm), never here.
    """
    _check_tensor("A", A, 2, "M, K")
    _check_tensor("B_t", B_t, 3, "E, K, N")
    if B_t.device != A.device:
        raise ValueError(f"A and B_t must be on the same device, got {A.device} and {B_t.device}")
    m, k = A.shape
    e, k_b, n = B_t.shape
    if k_b != k:
        raise ValueError(f"A (M, K) and B_t (E, K, N) must share K, got A {tuple(A.shape)} and B_t {tuple(B_t.shape)}")
    if e == 0:
        raise ValueError("B_t must hold at least one group (E >= 1), got E = 0")
    for dim, size in (("K", k), ("N", n)):
        if size % GROUP_MULTIPLE:
            raise ValueError(
                f"{dim} = {size} is not a multiple of {GROUP_MULTIPLE}: the scaled grouped GEMM needs 16-byte aligned "
                f"fp8 rows (pad the weights' {dim} dimension)"
            )
    _ref_ops.check_offs(offs, A)
    if offs.shape[0] != e:
        raise ValueError(
            f"offs must hold one end offset per group of B_t: {e} groups, got offs of shape {tuple(offs.shape)}"
        )
    if offs.numel() > 1 and offs.stride(0) != 1:
        raise ValueError(f"offs must be contiguous (stride 1), got stride {offs.stride(0)}")
    if out_dtype != _OUT_DTYPE:
        raise TypeError(
            f"out_dtype must be torch.bfloat16 (the only output torch._scaled_grouped_mm writes), got {out_dtype!r}"
        )
    if fp8_dtype not in GEMM_DTYPES:
        raise TypeError(
            "fp8_dtype must be torch.float8_e4m3fn or torch.float8_e4m3fnuz (the GEMM multiplies e4m3), "
            f"got {fp8_dtype!r}"
        )
    if need_wgrad and m % GROUP_MULTIPLE:
        raise ValueError(
            f"M = {m} rows is not a multiple of {GROUP_MULTIPLE}: the weight-gradient GEMM contracts over the rows, "
            "which must be 16-byte aligned fp8; pass pad_groups=True"
        )


def check_gemm_operands(ops: GemmOperands, offs: torch.Tensor) -> str:
    """Raise ValueError unless torch._scaled_grouped_mm takes these operands; return the mode ("2d3d" or "2d2d").

    The rules (torch 2.11 and 2.13, ScaledBlas/GroupedBlas.cpp): mat_a row-major and mat_b column-major with 16-byte
    aligned leading strides, both the same e4m3 dtype; a's trailing dim and b's last two dims multiples of 16;
    f32 scales: a 1-D contiguous (rows of a, times G in 2d-2d); b (E, N) with unit last stride in 2d-3d, (G * N,)
    in 2d-2d.
    """
    a, a_scale, b, b_scale = ops
    if a.dtype not in GEMM_DTYPES or b.dtype != a.dtype:
        raise ValueError(
            f"the scaled grouped GEMM multiplies two e4m3 operands of one dtype, got {a.dtype} and {b.dtype}"
        )
    if a.ndim != 2 or b.ndim not in (2, 3):
        raise ValueError(
            f"the scaled grouped GEMM takes a 2-D mat_a and a 2-D or 3-D mat_b, got {a.ndim}-D and {b.ndim}-D"
        )
    if not (a.stride(1) == 1 and a.stride(0) >= max(1, a.shape[1]) and a.stride(0) % GROUP_MULTIPLE == 0):
        raise ValueError(
            f"mat_a must be row-major with a 16-byte aligned row stride, got strides {a.stride()} for {tuple(a.shape)}"
        )
    if not (b.stride(-2) == 1 and b.stride(-1) >= max(1, b.shape[-2]) and b.stride(-1) % GROUP_MULTIPLE == 0):
        raise ValueError(
            "mat_b must be column-major with a 16-byte aligned column stride, "
            f"got strides {b.stride()} for {tuple(b.shape)}"
        )
    if a.shape[1] % GROUP_MULTIPLE or b.shape[-2] % GROUP_MULTIPLE or b.shape[-1] % GROUP_MULTIPLE:
        raise ValueError(
            f"the scaled grouped GEMM needs dims in multiples of 16, got mat_a {tuple(a.shape)}, mat_b {tuple(b.shape)}"
        )
    groups = offs.shape[0]
    mode = "2d3d" if b.ndim == 3 else "2d2d"
    if mode == "2d3d":
        if a.shape[1] != b.shape[1] or b.shape[0] != groups:
            raise ValueError(
                f"2d-3d GEMM: mat_a {tuple(a.shape)}, mat_b {tuple(b.shape)} and {groups} offsets do not fit"
            )
        want_a, want_b = (a.shape[0],), (b.shape[0], b.shape[2])
    else:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"2d-2d GEMM: mat_a {tuple(a.shape)} and mat_b {tuple(b.shape)} must share the jagged dim")
        want_a, want_b = (groups * a.shape[0],), (groups * b.shape[1],)
    for name, scale, want in (("a", a_scale, want_a), ("b", b_scale, want_b)):
        if scale.dtype != torch.float32 or tuple(scale.shape) != want or (scale.numel() > 1 and scale.stride(-1) != 1):
            raise ValueError(
                f"{mode} GEMM: {name}_scale must be float32 of shape {want} with unit last stride, "
                f"got {scale.dtype} {tuple(scale.shape)} strides {scale.stride()}"
            )
    return mode


# ----------------------------------------------------------------------------------------------------------------
# Operand wiring (shared with fp8moe: ``ops`` is fp8ref.ops or fp8moe.ops)
# ----------------------------------------------------------------------------------------------------------------


#: One quantizer's result: (q, scales).
Quantized = tuple[torch.Tensor, torch.Tensor]


def forward_gemm(rowwise_A: Quantized, colwise_B: Quantized) -> GemmOperands:
    """The forward GEMM's operands from A rowwise ((M, K) row-major, (M, 1)) and B_t colwise-3D ((E, K, N) strides
    (K*N, 1, K), (E, 1, N)): scales as the GEMM takes them, (M,) and (E, N)."""
    (q_a, s_a), (q_b, s_b) = rowwise_A, colwise_B
    return GemmOperands(q_a, s_a.view(-1), q_b, s_b.view(s_b.shape[0], s_b.shape[2]))


def dgrad_gemm(rowwise_grad_out: Quantized, transposed_B: Quantized) -> GemmOperands:
    """The grad_A GEMM's operands from grad_out rowwise ((M, N), (M, 1)) and B_t transposed-rowwise ((E, N, K)
    strides (N*K, 1, N), (E, K)): grad_A[rows of g] = grad_out[rows of g] @ B_t[g]^T."""
    (q_g, s_g), (q_b, s_b) = rowwise_grad_out, transposed_B
    return GemmOperands(q_g, s_g.view(-1), q_b, s_b)


def wgrad_gemm(per_group_grad_out: Quantized, per_group_A: Quantized) -> GemmOperands:
    """The grad_B_t GEMM's operands from grad_out and A quantized per (group, column) ((M, N) and (M, K)
    column-major, scales (G * N,) and (G * K,)): grad_B_t[g] = A[rows of g]^T @ grad_out[rows of g], mat_a = qA^T
    (K, M) row-major, mat_b = qG (M, N) column-major."""
    (q_g, s_g), (q_a, s_a) = per_group_grad_out, per_group_A
    return GemmOperands(q_a.t(), s_a, q_g, s_g)


def forward_operands(
    A: torch.Tensor, B_t: torch.Tensor, fp8_dtype: torch.dtype, ops: ModuleType = _ref_ops
) -> GemmOperands:
    """Forward GEMM operands (:func:`forward_gemm`): A rowwise, B_t colwise-3D, quantized by ``ops``."""
    return forward_gemm(ops.rowwise_2d_scale_and_cast(A, fp8_dtype), ops.colwise_3d_scale_and_cast(B_t, fp8_dtype))


def dgrad_operands(
    grad_out: torch.Tensor, B_t: torch.Tensor, fp8_dtype: torch.dtype, ops: ModuleType = _ref_ops
) -> GemmOperands:
    """grad_A GEMM operands (:func:`dgrad_gemm`): grad_out rowwise, B_t transposed-rowwise, quantized by ``ops``."""
    return dgrad_gemm(ops.rowwise_2d_scale_and_cast(grad_out, fp8_dtype), ops.rowwise_3d_transpose_rhs(B_t, fp8_dtype))


def wgrad_operands(
    grad_out: torch.Tensor, A: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, ops: ModuleType = _ref_ops
) -> GemmOperands:
    """grad_B_t GEMM operands (:func:`wgrad_gemm`): grad_out and A per (group, column) along the rows, in one dual
    launch of ``ops``. Different dtypes (f32 A, bf16 grad_out) are both upcast to f32 first, which is exact,
    because the dual op quantizes one dtype."""
    if grad_out.dtype != A.dtype:
        grad_out, A = grad_out.to(torch.float32), A.to(torch.float32)
    q_g, s_g, q_a, s_a = ops.per_group_colwise_scales_dual(grad_out, A, offs, fp8_dtype)
    return wgrad_gemm((q_g, s_g), (q_a, s_a))


def quantize_operands(
    A: torch.Tensor,
    B_t: torch.Tensor,
    offs: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    *,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    ops: ModuleType = _ref_ops,
) -> PathOperands:
    """The operands of all three GEMMs of the path, quantized by ``ops`` (dgrad/wgrad only with grad_out)."""
    fwd = forward_operands(A, B_t, fp8_dtype, ops)
    if grad_out is None:
        return PathOperands(fwd, None, None)
    return PathOperands(
        fwd, dgrad_operands(grad_out, B_t, fp8_dtype, ops), wgrad_operands(grad_out, A, offs, fp8_dtype, ops)
    )


# ----------------------------------------------------------------------------------------------------------------
# The GEMM
# ----------------------------------------------------------------------------------------------------------------


def group_ids(offs: torch.Tensor, length: int) -> torch.Tensor:
    """(length,) int64 group of each index along the jagged dim, on offs' device; G for indices past offs[-1]."""
    idx = torch.arange(length, dtype=torch.int32, device=offs.device)
    return torch.searchsorted(offs, idx, right=True)


def _masked_grouped_matmul(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, mode: str) -> torch.Tensor:
    """Per-group a @ b without reading offs on the host: one full matmul per group, masked (cost G x, no sync).

    2d3d: a (M, K), b (G, K, N) -> (M, N), rows past offs[-1] zero. 2d2d: a (K, M), b (M, N) -> (G, K, N).
    """
    groups = offs.shape[0]
    if mode == "2d3d":
        group = group_ids(offs, a.shape[0])
        out = a.new_zeros(a.shape[0], b.shape[2])
        for g in range(groups):
            out = torch.where((group == g).unsqueeze(1), a @ b[g], out)
        return out
    # Masked with where, not a multiply: values past offs[-1] are unspecified (a kernel may leave NaN there).
    group = group_ids(offs, a.shape[1])
    blocks = [torch.where(group == g, a, 0.0) @ torch.where((group == g).unsqueeze(1), b, 0.0) for g in range(groups)]
    return torch.stack(blocks) if blocks else a.new_zeros(0, a.shape[0], b.shape[1])


def scaled_grouped_mm(ops: GemmOperands, offs: torch.Tensor, out_dtype: torch.dtype = _OUT_DTYPE) -> torch.Tensor:
    """The scaled grouped GEMM, exactly: what ``torch._scaled_grouped_mm(a, b, 1/a_scale, 1/b_scale, offs)`` computes
    in infinite precision, rounded once more per scale and once to ``out_dtype``.

    Semantics:
        1. Check the operands as the GEMM does (:func:`check_gemm_operands`, ValueError).
        2. acc = sum over the contraction of f64(q_a) * f64(q_b), per group (2d-3d: row m uses b[group(m)]; 2d-2d:
           group g contracts over its own rows). Exact, hence independent of summation order: every product of two
           e4m3 values is a multiple of 2^-20 below 240^2 or 448^2, so partial sums stay exact in f64 while
           contraction * 448^2 < 2^33, i.e. for contractions under 42,000 elements (all MoE shapes of SPEC §7;
           beyond that, one f64 rounding per addition).
        3. out = (acc * f64(1/a_scale)) * f64(1/b_scale), the reciprocals rounded to f32 first as the GEMM receives
           them; then rounded to out_dtype. Rows past offs[-1] (2d-3d) are 0; an empty group's block (2d-2d) is 0.

    Equivalent, up to f64 rounding, to dequantizing with the reciprocal scales and multiplying per group in f64.
    """
    mode = check_gemm_operands(ops, offs)
    a, a_scale, b, b_scale = ops
    r_a = torch.reciprocal(a_scale).to(torch.float64)
    r_b = torch.reciprocal(b_scale).to(torch.float64)
    acc = _masked_grouped_matmul(a.to(torch.float64), b.to(torch.float64), offs, mode)
    if mode == "2d3d":
        group = group_ids(offs, a.shape[0]).clamp(max=b.shape[0] - 1)
        out = (acc * r_a.unsqueeze(1)) * r_b.index_select(0, group)
    else:
        groups, k, n = acc.shape
        out = (acc * r_a.view(groups, k, 1)) * r_b.view(groups, 1, n)
    return out.to(out_dtype)


# ----------------------------------------------------------------------------------------------------------------
# The paths
# ----------------------------------------------------------------------------------------------------------------


def grouped_mm(
    A: torch.Tensor,
    B_t: torch.Tensor,
    offs: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
) -> GroupedMMResult:
    """Reference of ``fp8moe.grouped_mm``: its forward, and with ``grad_out`` its backward, on the reference ops.

    Args:
        A: (M, K) bf16/f16/f32 tokens, grouped along M by offs.
        B_t: (E, K, N) bf16/f16/f32 expert weights, any strides.
        offs: (E,) int32 end offsets along M on A's device (SPEC §4); offs[-1] <= M, non-decreasing (not checked
            here: the values are never read on the host).
        grad_out: (M, N) gradient of out; None for the forward only.
        out_dtype: bfloat16 (the GEMM's only output dtype).
        fp8_dtype: float8_e4m3fn or float8_e4m3fnuz (explicit here; fp8moe picks it by backend).

    Returns:
        GroupedMMResult(out, grad_A, grad_B_t, operands): out (M, N) out_dtype; grad_A (M, K) in A's dtype;
        grad_B_t (E, K, N) in B_t's dtype; the operands of the three GEMMs.

    Semantics:
        forward: :func:`forward_operands` (rowwise A, colwise-3D B_t), :func:`scaled_grouped_mm` (2d-3d).
        grad_A: :func:`dgrad_operands` (rowwise grad_out, transposed-rowwise B_t), 2d-3d GEMM, then A's dtype.
        grad_B_t: :func:`wgrad_operands` (dual per-group colwise of grad_out and A), 2d-2d GEMM, then B_t's dtype.
        Every GEMM result is rounded to bf16 first, as the GPU GEMM writes it.
    """
    check_grouped_mm_args(A, B_t, offs, out_dtype, fp8_dtype, need_wgrad=grad_out is not None)
    operands = quantize_operands(A, B_t, offs, grad_out, fp8_dtype=fp8_dtype)
    out = scaled_grouped_mm(operands.forward, offs, out_dtype)
    if grad_out is None:
        return GroupedMMResult(out, None, None, operands)
    grad_A = scaled_grouped_mm(operands.dgrad, offs, out_dtype).to(A.dtype)
    grad_B_t = scaled_grouped_mm(operands.wgrad, offs, out_dtype).to(B_t.dtype)
    return GroupedMMResult(out, grad_A, grad_B_t, operands)


def grouped_mm_bf16(
    A: torch.Tensor, B_t: torch.Tensor, offs: torch.Tensor, grad_out: torch.Tensor | None = None
) -> GroupedMMResult:
    """The bf16 baseline of the same path: A, B_t and grad_out rounded to bf16, each GEMM exact in f64 per group,
    each result rounded to bf16 (an ideal bf16 grouped GEMM; torch._grouped_mm accumulates in f32, within one bf16
    rounding of this). Rows past offs[-1] are 0. Same arguments as :func:`grouped_mm`; operands is None."""
    check_grouped_mm_args(A, B_t, offs, torch.bfloat16, torch.float8_e4m3fn)

    def f64(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16).to(torch.float64)

    a, b = f64(A), f64(B_t)
    out = _masked_grouped_matmul(a, b, offs, "2d3d").to(torch.bfloat16)
    if grad_out is None:
        return GroupedMMResult(out, None, None, None)
    g = f64(grad_out)
    grad_A = _masked_grouped_matmul(g, b.transpose(1, 2), offs, "2d3d").to(torch.bfloat16).to(A.dtype)
    grad_B_t = _masked_grouped_matmul(a.t(), g, offs, "2d2d").to(torch.bfloat16).to(B_t.dtype)
    return GroupedMMResult(out, grad_A, grad_B_t, None)


def skewed_offs(
    rows: int, groups: int, *, seed: int = 0, multiple: int = GROUP_MULTIPLE, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """End offsets of a routing-like layout over ``rows``: uneven group sizes (log-normal weights, the largest
    group several times the mean), group 1 empty (when groups > 2), every size a multiple of ``multiple`` (1 for
    unaligned), offs[-1] == rows. Built on the CPU from ``seed``, then moved: identical on every device."""
    g = torch.Generator().manual_seed(seed)
    units = rows // multiple
    weights = torch.randn(groups, generator=g, dtype=torch.float64).mul(0.8).exp()
    if groups > 2:
        weights[1] = 0.0
    sizes = torch.floor(weights / weights.sum() * units).to(torch.int64)
    sizes[int(torch.argmax(weights))] += units - int(sizes.sum())
    ends = torch.cumsum(sizes * multiple, 0)
    ends[-1] = rows
    return ends.to(torch.int32).to(device)


# ----------------------------------------------------------------------------------------------------------------
# SQNR reporting
# ----------------------------------------------------------------------------------------------------------------


def per_group_sqnr(ref: torch.Tensor, actual: torch.Tensor, offs: torch.Tensor | None = None) -> list[float]:
    """SQNR in dB (fp8ref.metrics.sqnr) of each group: rows [offs[g-1], offs[g]) with offs, else each ref[g].

    A reporting helper: it reads offs on the host (one device sync). Never raises on values: an empty group or one
    without finite reference elements gives NaN, identical groups +inf, a zero reference with error -inf, a
    non-finite ``actual`` where ref is finite -inf.
    """
    if offs is None:
        return [sqnr(ref[g], actual[g]) for g in range(ref.shape[0])]
    ends = offs.tolist()
    starts = [0, *ends[:-1]]
    return [sqnr(ref[s:e], actual[s:e]) if e > s else math.nan for s, e in zip(starts, ends)]


def path_sqnr(ref: GroupedMMResult, actual: GroupedMMResult, offs: torch.Tensor) -> dict[str, float]:
    """Whole-tensor SQNR of out, grad_A and grad_B_t (rows past offs[-1] excluded; absent gradients skipped)."""
    end = int(offs[-1]) if offs.numel() else 0
    pairs = {"out": (ref.out[:end], actual.out[:end])}
    if ref.grad_A is not None and actual.grad_A is not None:
        pairs["grad_A"] = (ref.grad_A[:end], actual.grad_A[:end])
    if ref.grad_B_t is not None and actual.grad_B_t is not None:
        pairs["grad_B_t"] = (ref.grad_B_t, actual.grad_B_t)
    return {name: sqnr(r, a) for name, (r, a) in pairs.items()}
