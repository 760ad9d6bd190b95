"""``compare`` for the grouped-GEMM training path: out, grad_A and grad_B_t judged by SQNR, the operands bitwise.

A GEMM whose accumulation order differs from the reference's cannot match it byte for byte, so the three results
of a forward + backward step are judged per group by SQNR against the fp8ref path (fp8ref.grouped_mm, the same
quantizers and an exact GEMM) under the op row's tolerance, whose derivation sits next to its number
(fp8ref.grouped_mm.SQNR_VS_REFERENCE). Beside it the Report lists, per group, the SQNR of the kernel and of the
fp8ref path against the bf16 path: what FP8 costs, side by side. What the quantizers feed the GEMMs is still
compared bitwise when the kernel exposes them: a callable with a ``quantize_operands(A, B_t, offs, grad_out, *,
fp8_dtype)`` attribute returning fp8ref.grouped_mm.PathOperands (fp8moe.grouped_mm has one).

Semantics of one comparison:
    1. Inputs from ``seed`` on the CPU, then moved: A (M, K) and B_t (E, K, N) in ``dtype``, B_t column-major per
       expert ("col_major", how expert weights arrive) or row-major; grad_out (M, N) bf16 (out's dtype); offs one
       group per expert, every size a multiple of the row's ``jagged_unit`` (16: the wgrad GEMM's alignment) unless
       given explicitly.
    2. The kernel runs forward and backward: ``out = kernel(A, B_t, offs, fp8_dtype=...)``, ``out.backward(grad_out)``.
       An exception, a non-tensor, a wrong shape or dtype, or a missing gradient is a structural problem.
    3. The reference runs on the same device (f64 products, exact): fp8ref.grouped_mm.grouped_mm and grouped_mm_bf16.
    4. Per output and group (rows [offs[g-1], offs[g]) of out and grad_A, expert g of grad_B_t): SQNR of the kernel
       against the fp8ref path; a group under the floor, or non-finite where the reference is finite, fails as
       ``sqnr_below_floor``. Rows past offs[-1] are unspecified and not compared; empty groups have no SQNR.
    5. Operands (when exposed): every fp8 byte (NaN as a class unless strict_nan) and scale word of the three GEMMs'
       operands against the fp8ref path's; shape, strides and dtype too. A difference is ``operand_mismatch``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from fp8ref import grouped_mm as ref_path
from fp8ref.contracts import OpContract
from fp8ref.engine.battery import merge_reports
from fp8ref.engine.categories import FailPolicy, same_f32, same_fp8
from fp8ref.engine.inputs import derive_seed
from fp8ref.engine.kernel_call import kernel_traceback, quiet_kernel_warnings
from fp8ref.engine.report import Call, Report
from fp8ref.layouts import make_offs, validate_offs
from fp8ref.tolerances import Sqnr

__all__ = ["GEMM_BATTERY", "compare_grouped_gemm", "run_grouped_gemm"]

#: The default battery of a grouped-GEMM comparison, (offs layout, input dtype, B_t layout) per member: a dominant
#: expert, an empty one in the middle, rows past offs[-1], every input dtype and both weight layouts. An argument
#: the caller passes pins its axis in every member.
GEMM_BATTERY: tuple[tuple[str, torch.dtype, str], ...] = (
    ("dominant", torch.bfloat16, "col_major"),
    ("empty_middle", torch.float32, "row_major"),
    ("tail_past_end", torch.float16, "col_major"),
)

_OUTPUTS = ("out", "grad_A", "grad_B_t")
_OPERAND_FIELDS = ("a", "a_scale", "b", "b_scale")


def _resolve_offs(
    offs: str | Sequence[int] | None, groups: int | None, rows: int, experts: int, unit: int, gen: torch.Generator
) -> tuple[int, ...]:
    if groups is not None and groups != experts:
        raise ValueError(f"the grouped GEMM has one group per expert: groups={groups} but E={experts}")
    if offs is None or isinstance(offs, str):
        if rows % unit:
            raise ValueError(f"M={rows} is not a multiple of {unit}: pass explicit offs (or a multiple of {unit})")
        units = make_offs(offs or "random", rows // unit, experts, gen)
        return tuple(u * unit for u in units)
    offs = validate_offs(offs, rows)
    if len(offs) != experts:
        raise ValueError(f"offs has {len(offs)} groups but B_t has E={experts} experts")
    return offs


def _inputs(shape: Sequence[int], dtype: torch.dtype, layout: str, gen: torch.Generator):
    m, k, n, e = shape
    a = torch.randn(m, k, generator=gen, dtype=torch.float32)
    # (E, K, N) col-major per expert is (E, N, K) contiguous seen transposed; scaled so out stays O(1).
    b_t = torch.randn(e, n, k, generator=gen, dtype=torch.float32).transpose(1, 2) * k**-0.5
    if layout == "row_major":
        b_t = b_t.contiguous()
    elif layout != "col_major":
        raise ValueError(f"layout must be 'col_major' or 'row_major' (of B_t), got {layout!r}")
    # out is bf16 (the GEMM's only output dtype), so autograd hands the backward a bf16 grad_out whatever A's dtype.
    grad_out = torch.randn(m, n, generator=gen, dtype=torch.float32).to(torch.bfloat16)
    return a.to(dtype), b_t.to(dtype), grad_out


def _structure(name: str, got: object, shape: tuple[int, ...], dtype: torch.dtype) -> list[tuple[str, str]]:
    if not isinstance(got, torch.Tensor):
        return [("wrong_return", f"{name}: expected a tensor, got {type(got).__name__}")]
    if tuple(got.shape) != shape or got.dtype != dtype:
        return [("shape_stride_dtype", f"{name}: {tuple(got.shape)} {got.dtype}, expected {shape} {dtype}")]
    return []


def _below_floor(values: Sequence[float], floor: float) -> int:
    """Groups under the floor: NaN (no finite reference element, e.g. empty) is skipped, -inf counts."""
    return sum(1 for v in values if not math.isnan(v) and v < floor)


def _differing(a: torch.Tensor, b: torch.Tensor, strict_nan: bool) -> int:
    """How many elements of two same-shape tensors differ in bytes (fp8 codes or f32 words; NaN as a class)."""
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.element_size() == 1:
        same = same_fp8(a.view(torch.uint8), b.view(torch.uint8), a.dtype, strict_nan)
    else:
        same = same_f32(a, b, strict_nan)
    return int((~same).sum())


def _specified(gemm: str, field: str, t: torch.Tensor, end: int) -> torch.Tensor:
    """The part of an operand the contract specifies: the wgrad operands come from per-group quantization, which
    leaves the tokens past offs[-1] unspecified (SPEC §4); the 2d-2d GEMM never reads them."""
    if gemm != "wgrad" or field.endswith("scale"):
        return t
    return t[:, :end] if field == "a" else t[:end]  # a is qA^T (K, M), b is qG (M, N)


def _compare_operands(kernel_ops, ref_ops, end: int, strict_nan: bool):
    """(problems, n_fp8, n_fp8_diff, n_scales, n_scale_diff) over the three GEMMs' operands."""
    problems, counts = [], [0, 0, 0, 0]
    for gemm in ("forward", "dgrad", "wgrad"):
        got, want = getattr(kernel_ops, gemm), getattr(ref_ops, gemm)
        for field in _OPERAND_FIELDS:
            g, w = getattr(got, field), getattr(want, field)
            name = f"{gemm}.{field}"
            if not isinstance(g, torch.Tensor):
                problems.append(("wrong_return", f"operand {name}: not a tensor ({type(g).__name__})"))
                continue
            if g.shape != w.shape or g.dtype != w.dtype or (w.numel() > 1 and g.stride() != w.stride()):
                problems.append(
                    (
                        "shape_stride_dtype",
                        f"operand {name}: {tuple(g.shape)} strides {g.stride()} {g.dtype}, expected "
                        f"{tuple(w.shape)} strides {w.stride()} {w.dtype}",
                    )
                )
                continue
            g, w = _specified(gemm, field, g, end), _specified(gemm, field, w, end)
            diff = _differing(g, w, strict_nan)
            slot = 0 if "scale" not in field else 2
            counts[slot] += w.numel()
            counts[slot + 1] += diff
            if diff:
                problems.append(("operand_mismatch", f"operand {name}: {diff} of {w.numel()} elements differ"))
    return problems, *counts


def compare_grouped_gemm(
    rk,
    c: OpContract,
    shape: Sequence[int],
    *,
    offs: str | Sequence[int] | None,
    groups: int | None,
    dtype: torch.dtype | None,
    fp8_dtype: torch.dtype | None,
    round_scales_to_power_of_2: bool | None,
    values: str | None,
    layout: str | None,
    device: torch.device,
    seed: int,
    strict_nan: bool,
    kernel_kwargs: dict,
    member: str = "",
) -> Report:
    """One comparison of a grouped-GEMM kernel with the fp8ref path (the module docstring's Semantics).

    Arguments are ``compare``'s; ``rk`` is its resolved kernel and ``c`` the op row. ``values`` must be "normal"
    and ``round_scales_to_power_of_2`` False (the path has neither knob; NaN/inf make SQNR meaningless).

    Raises:
        ValueError: a shape, offs, layout or knob the path does not take.
    """
    c.input_shapes(shape)  # checks the shape's rank
    if round_scales_to_power_of_2:
        raise ValueError(f"{c.name} has no round_scales_to_power_of_2: its scales are the quantizers' defaults")
    if values not in (None, "normal"):
        raise ValueError(f"{c.name} is judged by SQNR: values must be 'normal', got {values!r}")
    dtype = dtype or torch.bfloat16
    fp8_dtype = fp8_dtype or c.fp8_dtypes[0]
    layout = layout or c.input_layouts[0]
    tolerance = c.tolerance
    assert isinstance(tolerance, Sqnr), f"{c.name}: a grouped-GEMM row needs an Sqnr tolerance"
    m, k, n, e = shape
    gen = torch.Generator().manual_seed(derive_seed(c.name, tuple(shape), str(dtype), layout, seed))
    a, b_t, grad_out = _inputs(shape, dtype, layout, gen)
    offs_t = _resolve_offs(offs, groups, m, e, c.jagged_unit, gen)
    call = Call(
        op=c.name,
        kernel=rk.label,
        kernel_expr=rk.expr,
        kernel_import=rk.import_line,
        shape=tuple(shape),
        offs=offs_t,
        dtype=str(dtype).removeprefix("torch."),
        fp8_dtype=str(fp8_dtype).removeprefix("torch."),
        round_scales_to_power_of_2=False,
        values="normal",
        layout=layout,
        seed=seed,
        device=str(device),
        strict_nan=strict_nan,
        kernel_kwargs=dict(kernel_kwargs),
        member=member,
    )
    a_d, b_d, g_d = a.to(device), b_t.to(device), grad_out.to(device)
    offs_d = torch.tensor(offs_t, dtype=torch.int32).to(device)

    problems: list[tuple[str, str]] = []
    error = tb = None
    a_k, b_k = a_d.clone().requires_grad_(), b_d.clone().requires_grad_()
    got = {}
    try:
        with quiet_kernel_warnings():
            out = rk.fn(a_k, b_k, offs_d, fp8_dtype=fp8_dtype, **kernel_kwargs)
            problems += _structure("out", out, (m, n), torch.bfloat16)
            if not problems:
                out.backward(g_d)
                got = {"out": out.detach(), "grad_A": a_k.grad, "grad_B_t": b_k.grad}
    except Exception as exc:
        error, tb = f"{type(exc).__name__}: {exc}", kernel_traceback(exc)
        problems.append(("kernel_raised", error))
    if got:
        problems += _structure("grad_A", got["grad_A"], (m, k), dtype)
        problems += _structure("grad_B_t", got["grad_B_t"], (e, k, n), dtype)

    ref = ref_path.grouped_mm(a_d, b_d, offs_d, g_d, fp8_dtype=fp8_dtype)
    bf16 = ref_path.grouped_mm_bf16(a_d, b_d, offs_d, g_d)
    sqnr_table, below = [], 0
    if got and not problems:
        for name in _OUTPUTS:
            by_rows = name != "grad_B_t"  # grad_B_t's groups are its experts
            group_offs = offs_d if by_rows else None
            judged = ref_path.per_group_sqnr(getattr(ref, name), got[name], group_offs)
            below += _below_floor(judged, tolerance.min_db)
            sqnr_table += [
                (name, f"kernel vs fp8ref path (floor {tolerance.min_db} dB)", tuple(judged)),
                (
                    name,
                    "kernel vs bf16 path",
                    tuple(ref_path.per_group_sqnr(getattr(bf16, name), got[name], group_offs)),
                ),
                (
                    name,
                    "fp8ref path vs bf16 path",
                    tuple(ref_path.per_group_sqnr(getattr(bf16, name), getattr(ref, name), group_offs)),
                ),
            ]
    if below:
        problems.append(("sqnr_below_floor", f"{below} (output, group) pairs under {tolerance.min_db} dB"))

    n_fp8 = n_fp8_diff = n_scales = n_scale_diff = 0
    notes = []
    quantize = getattr(rk.fn, "quantize_operands", None)
    if quantize is None:
        notes.append("operands not compared bitwise: the kernel exposes no quantize_operands(A, B_t, offs, grad_out)")
    elif error is None:
        try:
            with quiet_kernel_warnings():
                kernel_ops = quantize(a_d, b_d, offs_d, g_d, fp8_dtype=fp8_dtype)
            operand_problems, n_fp8, n_fp8_diff, n_scales, n_scale_diff = _compare_operands(
                kernel_ops, ref.operands, offs_t[-1], strict_nan
            )
            problems += operand_problems
        except Exception as exc:
            problems.append(("kernel_raised", f"quantize_operands raised {type(exc).__name__}: {exc}"))

    categories: dict[str, int] = {}
    for category, _ in problems:
        categories[category] = categories.get(category, 0) + 1
    if below:
        categories["sqnr_below_floor"] = below
    policy = FailPolicy.default(strict_nan)
    failing = tuple(cat for cat in categories if policy.fails(cat))
    return Report(
        call=call,
        ok=not failing,
        error=error,
        traceback=tb,
        structure=tuple(text for cat, text in problems if cat not in ("sqnr_below_floor", "operand_mismatch")),
        problems=tuple(problems),
        n_fp8=n_fp8,
        n_fp8_mismatches=n_fp8_diff,
        n_scales=n_scales,
        n_scale_mismatches=n_scale_diff,
        categories=categories,
        failing=failing,
        sqnr_table=tuple(sqnr_table),
        notes=(*notes, f"judged by {tolerance}"),
    )


def run_grouped_gemm(rk, c: OpContract, shape: Sequence[int], *, battery: bool, **kwargs) -> Report:
    """``compare`` of a grouped-GEMM op: GEMM_BATTERY's members (axes the caller pinned stay pinned), merged.

    With ``battery=False``, or offs, dtype and layout all given, one call (defaults: random offs, bf16, col_major).
    """
    pinned = {k: kwargs[k] for k in ("offs", "dtype", "layout")}
    if not battery or all(v is not None for v in pinned.values()):
        return compare_grouped_gemm(rk, c, shape, **kwargs)
    reports = []
    for offs, dtype, layout in GEMM_BATTERY:
        member = {"offs": offs, "dtype": dtype, "layout": layout}
        member = {k: pinned[k] if pinned[k] is not None else v for k, v in member.items()}
        label = ",".join(f"{k}={getattr(v, 'name', None) or str(v).removeprefix('torch.')}" for k, v in member.items())
        reports.append(compare_grouped_gemm(rk, c, shape, **{**kwargs, **member}, member=label))
    return merge_reports(reports, (), 20)
