"""``grouped_mm``: the FP8 rowwise grouped GEMM of MoE training, an autograd op built on the fp8moe kernels.

Forward, grad_A and grad_B_t are each one scaled grouped GEMM (``torch._scaled_grouped_mm``, use_fast_accum) of
operands the Triton kernels quantize: the wiring, the layout rules and the argument checks are fp8ref.grouped_mm's
(shared, not copied), so this path and the reference differ only in the quantizers (bitwise equal) and in the GEMM.
On the CPU, where no scaled grouped GEMM exists, the same autograd Function runs fp8ref's exact GEMM
(:func:`fp8ref.grouped_mm.scaled_grouped_mm`) on operands from the Triton kernels in the interpreter.

No host syncs: offsets are read only on the device. What cannot be checked on the host without reading them is
checked with ``torch._assert_async`` (no sync; on a GPU a failure is a device-side assert, on the CPU a
RuntimeError at once).
"""

from __future__ import annotations

import torch

from fp8moe import configs
from fp8moe import ops as _ops
from fp8moe.backend import Backend, backend_for
from fp8moe.frozen_weights import active_weight_ops
from fp8ref import grouped_mm as _ref
from fp8ref.grouped_mm import GROUP_MULTIPLE, GemmOperands, GroupedMMResult, PathOperands, Quantized

__all__ = [
    "default_fp8_dtype",
    "forward_backward",
    "gemm_scale_reciprocals",
    "grouped_mm",
    "quantize_operands",
    "scaled_grouped_mm",
]

#: Hopper's fast FP8 accumulation, as the issue and upstream MoE training use for all three GEMMs.
_FAST_ACCUM = True


def default_fp8_dtype(device: torch.device | str | Backend) -> torch.dtype:
    """The e4m3 type the backend of ``device`` stores and its GEMM multiplies: float8_e4m3fnuz on MI300 (gfx942,
    which has only fnuz types), float8_e4m3fn everywhere else (NVIDIA, MI350 gfx950, the CPU interpreter).

    NVIDIA and the CPU are answered from the device type alone, without the cached capability queries of
    backend_for, so the call traces cleanly under torch.compile(fullgraph=True)."""
    if not isinstance(device, Backend):
        device = torch.device(device)
        if device.type == "cpu" or (device.type == "cuda" and torch.version.hip is None):
            return torch.float8_e4m3fn
        device = backend_for(device)
    return torch.float8_e4m3fn if torch.float8_e4m3fn in device.fp8_dtypes else torch.float8_e4m3fnuz


@torch.library.custom_op("fp8moe::gemm_scale_reciprocals", mutates_args=())
def _gemm_scale_reciprocals_op(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.reciprocal(a_scale), torch.reciprocal(b_scale)


@_gemm_scale_reciprocals_op.register_fake
def _(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a_scale), torch.empty_like(b_scale)


def gemm_scale_reciprocals(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.reciprocal`` of both GEMM scales, the same bits eager or compiled.

    While torch.compile traces, through the opaque custom op ``torch.ops.fp8moe.gemm_scale_reciprocals``: Inductor
    would otherwise generate its own kernel for 1 / scale, and it lowers an f32 division to Triton's ``/``, which is
    approximate on NVIDIA (SPEC §12), unless its eager-numerics division option is on (torch 2.13's
    torch._inductor.codegen.triton). The compiled GEMMs then received other scales than the eager ones: on the H200
    the compiled grouped_mm was 94-98 dB from eager, not bitwise (benchmarks/results/h200-grouped-mm.md, run 2).
    Eager calls run torch.reciprocal directly: the dispatcher's Python path costs about 57 us a call (SPEC §5.5).
    """
    if torch.compiler.is_compiling():
        return _gemm_scale_reciprocals_op(a_scale, b_scale)
    return torch.reciprocal(a_scale), torch.reciprocal(b_scale)


def scaled_grouped_mm(ops: GemmOperands, offs: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """One scaled grouped GEMM: torch._scaled_grouped_mm with the reciprocal scales on a GPU, fp8ref's exact GEMM on
    the CPU. Operands are checked against the GEMM's layout rules first (ValueError naming the problem)."""
    mode = _ref.check_gemm_operands(ops, offs)
    if ops.a.device.type == "cpu":
        return _ref.scaled_grouped_mm(ops, offs, out_dtype)
    contraction = ops.a.shape[1]
    if contraction == 0:  # 2d-2d over zero rows: every block is an empty sum (the GEMM rejects a 0-length operand)
        return ops.a.new_zeros((offs.shape[0], ops.a.shape[0], ops.b.shape[1]), dtype=out_dtype)
    if mode == "2d3d" and ops.a.shape[0] == 0:
        return ops.a.new_empty((0, ops.b.shape[2]), dtype=out_dtype)
    a_reciprocal, b_reciprocal = gemm_scale_reciprocals(ops.a_scale, ops.b_scale)
    return torch._scaled_grouped_mm(
        ops.a,
        ops.b,
        a_reciprocal,
        b_reciprocal,
        offs=offs,
        out_dtype=out_dtype,
        use_fast_accum=_FAST_ACCUM,
    )


def quantize_operands(
    A: torch.Tensor,
    B_t: torch.Tensor,
    offs: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    *,
    fp8_dtype: torch.dtype | None = None,
) -> PathOperands:
    """The operands :func:`grouped_mm` feeds its three GEMMs (unpadded), from the fp8moe kernels: the debug hook for
    comparing them bitwise with :func:`fp8ref.grouped_mm.quantize_operands`. The same quantizer calls as the
    autograd op (:func:`_quantize_activation`, :func:`_quantize_weight`)."""
    fp8_dtype = default_fp8_dtype(A.device) if fp8_dtype is None else fp8_dtype
    training = grad_out is not None
    fused = training and _fuse_activations(A, offs)
    rows_A, cols_A = _quantize_activation(A, offs, fp8_dtype, rowwise=True, per_group=fused)
    colwise_B, transposed_B = _quantize_weight(B_t, fp8_dtype, _ops, dgrad=training)
    fwd = _ref.forward_gemm(rows_A, colwise_B)
    if not training:
        return PathOperands(fwd, None, None)
    rows_G, cols_G = _quantize_activation(grad_out, offs, fp8_dtype, rowwise=True, per_group=fused)
    dgrad = _ref.dgrad_gemm(rows_G, transposed_B)
    if not fused:
        return PathOperands(fwd, dgrad, _ref.wgrad_operands(grad_out, A, offs, fp8_dtype, _ops))
    return PathOperands(fwd, dgrad, _ref.wgrad_gemm(cols_G, cols_A))


def _fuse_activations(A: torch.Tensor, offs: torch.Tensor) -> bool:
    """fp8moe.configs.fuse_activations for A's backend, rows and groups; the backend from the device type alone
    (traces cleanly under torch.compile, as :func:`default_fp8_dtype`)."""
    kind = "interpreter" if A.device.type == "cpu" else ("rocm" if torch.version.hip is not None else "cuda")
    return configs.fuse_activations(kind, A.shape[0], offs.shape[0])


def _quantize_activation(
    x: torch.Tensor, offs: torch.Tensor, fp8_dtype: torch.dtype, *, rowwise: bool, per_group: bool
) -> tuple[Quantized | None, Quantized | None]:
    """x (A, or grad_out) rowwise (the forward or dgrad GEMM's operand) and per (group, column) (the weight-gradient
    GEMM's), each only where asked; both from one fused call (:func:`fp8moe.rowwise_and_per_group_colwise`: two
    reads of x where the two ops take three)."""
    if rowwise and per_group:
        q_r, s_r, q_c, s_c = _ops.rowwise_and_per_group_colwise(x, offs, fp8_dtype)
        return (q_r, s_r), (q_c, s_c)
    if rowwise:
        return _ops.rowwise_2d_scale_and_cast(x, fp8_dtype), None
    return None, _ops.per_group_colwise_scales(x, offs, fp8_dtype) if per_group else None


def _quantize_weight(
    B_t: torch.Tensor, fp8_dtype: torch.dtype, ops, *, dgrad: bool
) -> tuple[Quantized, Quantized | None]:
    """B_t colwise-3D (the forward GEMM's operand) and, with ``dgrad``, transposed-rowwise (the dgrad GEMM's), both
    from one fused call (:func:`fp8moe.colwise_3d_and_transpose_rhs`: two reads of B_t, where the two ops take
    three to four). ``ops``: fp8moe.ops, or a frozen_weights scope's, which answers from its cache."""
    if dgrad:
        q_c, s_c, q_t, s_t = ops.colwise_3d_and_transpose_rhs(B_t, fp8_dtype)
        return (q_c, s_c), (q_t, s_t)
    return ops.colwise_3d_scale_and_cast(B_t, fp8_dtype), None


class _Fp8GroupedMM(torch.autograd.Function):
    """out = per-group A @ B_t[g] through FP8.

    B_t is quantized once for both GEMMs that take it, in the forward (the fused weight pair), and the forward
    saves the dgrad operand (E*K*N fp8 bytes plus scales, held until the backward). Where
    fp8moe.configs.fuse_activations says so (not by default on CUDA), A and grad_out are too (the fused activation
    pair: A's per-group operand, M*K bytes, saved instead of A); elsewhere the backward quantizes grad_out and A per
    group in one dual launch.
    """

    @staticmethod
    def forward(ctx, A, B_t, offs, out_dtype, fp8_dtype):
        # Detached: the kernels' direct eager call (no dispatcher, SPEC §7 host overhead) needs non-grad inputs.
        # (detach() shares the version counter, which a frozen_weights scope checks.)
        A, B_t = A.detach(), B_t.detach()
        need_dgrad, need_wgrad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        fused = need_wgrad and _fuse_activations(A, offs)
        weight_ops = active_weight_ops()  # a frozen_weights scope quantizes B_t once; None: every call
        rows_A, cols_A = _quantize_activation(A, offs, fp8_dtype, rowwise=True, per_group=fused)
        colwise_B, transposed_B = _quantize_weight(B_t, fp8_dtype, weight_ops or _ops, dgrad=need_dgrad)
        out = scaled_grouped_mm(_ref.forward_gemm(rows_A, colwise_B), offs, out_dtype)
        keep_A = (A,) if need_wgrad and not fused else ()
        ctx.save_for_backward(offs, *keep_A, *(cols_A or ()), *(transposed_B or ()))
        ctx.fused = fused
        ctx.dtypes = (A.dtype, B_t.dtype)
        ctx.fp8_dtype = fp8_dtype
        return out

    @staticmethod
    def backward(ctx, grad_out):
        offs, *saved = ctx.saved_tensors
        need_dgrad, need_wgrad = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        transposed_B = tuple(saved[-2:]) if need_dgrad else None
        rows_G, cols_G = _quantize_activation(grad_out, offs, ctx.fp8_dtype, rowwise=need_dgrad, per_group=ctx.fused)
        grad_A = grad_B_t = None
        if need_dgrad:
            grad_A = scaled_grouped_mm(_ref.dgrad_gemm(rows_G, transposed_B), offs).to(ctx.dtypes[0])
        if need_wgrad:
            if ctx.fused:
                wgrad = _ref.wgrad_gemm(cols_G, tuple(saved[:2]))
            else:
                wgrad = _ref.wgrad_operands(grad_out, saved[0], offs, ctx.fp8_dtype, _ops)
            grad_B_t = scaled_grouped_mm(wgrad, offs).to(ctx.dtypes[1])
        return grad_A, grad_B_t, None, None, None


def _assert_offs(offs: torch.Tensor, rows: int, aligned: bool) -> None:
    """Device-side checks of the offset values (no sync): non-negative, non-decreasing, offs[-1] <= rows, and with
    ``aligned`` every group size a multiple of 16."""
    sizes = torch.diff(offs, prepend=offs.new_zeros(1))
    valid = (sizes >= 0).all() & (offs[-1] <= rows)
    torch._assert_async(valid, f"grouped_mm: offs must be non-negative, non-decreasing and at most M = {rows}")
    if aligned:
        torch._assert_async(
            (sizes % GROUP_MULTIPLE == 0).all(),
            f"grouped_mm: every group size must be a multiple of {GROUP_MULTIPLE} for the weight-gradient GEMM "
            "(its contraction runs over each group's rows); pass pad_groups=True",
        )


def _pad_plan(offs: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Where each row goes when every group is padded to a multiple of 16 rows, computed on the device.

    Returns (dest (rows,) int64, padded offs (G,) int32, padded row count). The padded count is static, a bound
    (rows + 15 per group, rounded up to 16) so no size is read on the host; rows past offs[-1] go past the padded
    offs[-1], into no group.
    """
    mult = GROUP_MULTIPLE
    padded_rows = -(-(rows + (mult - 1) * offs.shape[0]) // mult) * mult
    ends = offs.to(torch.int64)
    sizes = torch.diff(ends, prepend=ends.new_zeros(1))
    padded_sizes = (sizes + mult - 1) // mult * mult
    padded_ends = torch.cumsum(padded_sizes, 0)
    # shift[g] = padded start - start of group g; shift[G] moves the rows past offs[-1] past padded offs[-1].
    shift = torch.cat([(padded_ends - padded_sizes) - (ends - sizes), (padded_ends - ends)[-1:]])
    dest = torch.arange(rows, device=offs.device) + shift.index_select(0, _ref.group_ids(offs, rows))
    return dest, padded_ends.to(torch.int32), padded_rows


def grouped_mm(
    A: torch.Tensor,
    B_t: torch.Tensor,
    offs: torch.Tensor,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    fp8_dtype: torch.dtype | None = None,
    pad_groups: bool = False,
) -> torch.Tensor:
    """FP8 rowwise grouped GEMM with autograd: ``out[rows of g] = A[rows of g] @ B_t[g]`` for each group g.

    The forward GEMM takes A rowwise and B_t colwise-3D; grad_A takes grad_out rowwise and B_t transposed-rowwise;
    grad_B_t takes grad_out and A per group and column. Each fp8 operand is made once, for the GEMMs that run
    (SPEC §11): B_t both ways in the forward (:func:`fp8moe.colwise_3d_and_transpose_rhs`, the dgrad operand held
    until the backward: E*K*N fp8 bytes), A and grad_out rowwise plus the dual op in the backward, or both ways by
    :func:`fp8moe.rowwise_and_per_group_colwise` where fp8moe.configs.fuse_activations says so (never by default on
    CUDA since session 43; where groups average 2048 rows or more under "auto", ROCm's default). Each product is one
    ``torch._scaled_grouped_mm`` (reciprocal scales, use_fast_accum) on a GPU, fp8ref's exact GEMM on the CPU. The
    reference is :func:`fp8ref.grouped_mm.grouped_mm`.

    Args:
        A: (M, K) bf16/f16/f32 tokens sorted by group, any strides.
        B_t: (E, K, N) bf16/f16/f32 expert weights, any strides (column-major per expert reads fastest).
        offs: (E,) int32 end offsets along M on A's device: group g is rows [offs[g-1], offs[g]), offs[-1] := 0.
        out_dtype: torch.bfloat16, the only output of the scaled grouped GEMM.
        fp8_dtype: the e4m3 type to quantize to; None picks the backend's, explicitly: float8_e4m3fnuz on AMD MI300
            (gfx942), float8_e4m3fn on NVIDIA, MI350 (gfx950) and the CPU interpreter (:func:`default_fp8_dtype`).
        pad_groups: pad every group to a multiple of 16 rows on the device (a static bound of M + 15 E rows, no host
            sync), run the GEMMs on the padded rows and gather the result back. Needed for grad_B_t when group sizes
            are not multiples of 16; costs a copy of A and grad_out in and of out and grad_A back.

    Inside ``with fp8moe.frozen_weights():`` B_t's two quantizations are computed once and reused by later calls
    with the same, unmodified weight (gradient accumulation, activation checkpointing): fp8moe.frozen_weights.

    Returns:
        out (M, N) out_dtype. Rows past offs[-1] are unspecified (the GEMM does not write them), as are the same
        rows of grad_A; gradients flow to A and B_t as their dtypes.

    Raises:
        TypeError: a non-tensor, a dtype other than bf16/f16/f32, offs not int32, out_dtype not bf16, fp8_dtype not
            an e4m3 type the backend stores.
        ValueError: wrong ranks, K mismatch, K or N not a multiple of 16, offs not 1-D / on another device /
            non-contiguous / not one entry per expert, and without pad_groups when B_t needs a gradient: M not a
            multiple of 16.
        RuntimeError (on the device, no sync): offs negative, decreasing or past M; without pad_groups, when B_t
            needs a gradient, a group size that is not a multiple of 16.
    """
    if not isinstance(pad_groups, bool):
        raise TypeError(f"pad_groups must be a bool, got {type(pad_groups).__name__}")
    if isinstance(A, torch.Tensor) and fp8_dtype is None:
        fp8_dtype = default_fp8_dtype(A.device)
    need_wgrad = isinstance(B_t, torch.Tensor) and B_t.requires_grad and torch.is_grad_enabled()
    _ref.check_grouped_mm_args(A, B_t, offs, out_dtype, fp8_dtype, need_wgrad=need_wgrad and not pad_groups)
    rows = A.shape[0]
    _assert_offs(offs, rows, aligned=need_wgrad and not pad_groups)
    if not pad_groups:
        return _Fp8GroupedMM.apply(A, B_t, offs, out_dtype, fp8_dtype)
    dest, padded_offs, padded_rows = _pad_plan(offs, rows)
    A_padded = A.new_zeros((padded_rows, A.shape[1])).index_copy(0, dest, A)
    out = _Fp8GroupedMM.apply(A_padded, B_t, padded_offs, out_dtype, fp8_dtype)
    return out.index_select(0, dest)


# The engine's hook (fp8ref.engine.gemm): compare(fp8moe.grouped_mm, ...) checks these operands bitwise against the
# reference path's, besides judging out, grad_A and grad_B_t by SQNR.
grouped_mm.quantize_operands = quantize_operands


def forward_backward(
    A: torch.Tensor,
    B_t: torch.Tensor,
    offs: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    fp8_dtype: torch.dtype | None = None,
    pad_groups: bool = False,
) -> GroupedMMResult:
    """:func:`grouped_mm` forward (and with ``grad_out`` backward through autograd) plus the operands it fed its GEMMs
    (:func:`quantize_operands`), in the shape of :func:`fp8ref.grouped_mm.grouped_mm`'s result, for tests that compare
    the two field by field (``fp8ref.compare`` runs the same steps on any grouped-GEMM callable itself). A and B_t
    are not modified; their gradients are returned, not accumulated."""
    fp8_dtype = default_fp8_dtype(A.device) if fp8_dtype is None else fp8_dtype
    A_leaf = A.detach().requires_grad_(grad_out is not None)
    B_leaf = B_t.detach().requires_grad_(grad_out is not None)
    out = grouped_mm(A_leaf, B_leaf, offs, out_dtype=out_dtype, fp8_dtype=fp8_dtype, pad_groups=pad_groups)
    grad_A = grad_B_t = None
    if grad_out is not None:
        grad_A, grad_B_t = torch.autograd.grad(out, (A_leaf, B_leaf), grad_out)
    operands = quantize_operands(A.detach(), B_t.detach(), offs, grad_out, fp8_dtype=fp8_dtype)
    return GroupedMMResult(out.detach(), grad_A, grad_B_t, operands)
