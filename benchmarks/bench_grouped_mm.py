"""FP8 grouped-GEMM training step vs bf16, side by side in one run (issue #12 item 6).

    python benchmarks/bench_grouped_mm.py --out benchmarks/results/h200-grouped-mm-run1-bench.md

Per MoE shape (M tokens, K, N, E experts; SPEC §7), with routing-like uneven groups (one empty, sizes multiples of
16, fp8ref.grouped_mm.skewed_offs), the GPU time (CUDA-graph replay, median of triton.testing.do_bench_cudagraph)
of:

- ``bf16 step``: torch._grouped_mm forward + autograd backward (grad of A and B_t);
- ``fp8 step``: fp8moe.grouped_mm forward + backward (three quantization calls, one per tensor, each fusing the
  tensor's two quantizations: fp8moe.rowwise_and_per_group_colwise for A and grad_out,
  fp8moe.colwise_3d_and_transpose_rhs for B_t; + three scaled grouped GEMMs);
- ``bf16 GEMMs`` / ``fp8 GEMMs``: the three GEMMs alone (fwd, dgrad, wgrad), the fp8 ones on pre-quantized
  operands: the ceiling a quantized step can reach;
- ``quant``: the step's fp8moe quantization calls alone, and their share of the fp8 GEMM time;
- ``quant floor``: the fewest bytes any per-step quantization moves (:func:`quantization_floor_bytes`) over the
  copy bandwidth measured in the run, and its share of the fp8 GEMM time: a share target below it cannot be met
  by faster kernels, only by quantizing fewer tensors per step (frozen weights) or fusing into their producers.

The eager time (triton.testing.do_bench, host overhead included) is given next to the graph time of each step.
Before timing, the fp8 step's SQNR against the bf16 step is printed, so a fast wrong path cannot post a number.
``--triton-gemm`` also times Inductor's Triton template for the scaled grouped GEMM (max-autotune, Triton backend
only) on the small-group shape: what a Triton FP8 grouped GEMM reaches where the vendor one loses.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import torch

import fp8moe  # noqa: F401  (imported before triton, as fp8moe requires)
from fp8moe import configs, frozen_weights
from fp8moe import ops as qops
from fp8moe.grouped_mm import grouped_mm, quantize_operands, scaled_grouped_mm
from fp8ref import grouped_mm as ref

SHAPES = [(16384, 7168, 2048, 8), (16640, 2048, 1408, 64), (32768, 5120, 8192, 16), (65536, 4096, 14336, 8)]
E4 = torch.float8_e4m3fn
QUANT_CALLS = (
    "rowwise A",
    "colwise-3D B_t",
    "rowwise grad_out",
    "transpose-rowwise B_t",
    "dual grad_out, A",
    "both B_t ops fused",
    "both A ops fused",
    "both grad_out ops fused",
)
#: The calls of one step with fused activations (fp8moe.configs.fuse_activations): each tensor once, both its
#: quantizations from one fused call; without, A and grad_out rowwise and the dual op.
STEP_CALLS = ("both A ops fused", "both B_t ops fused", "both grad_out ops fused")
UNFUSED_STEP_CALLS = ("rowwise A", "both B_t ops fused", "rowwise grad_out", "dual grad_out, A")


DEVICE = "cuda"  # --device cpu: a smoke run of this script's logic (interpreter kernels, wall-clock times)


def _wall_ms(fn) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[1]


def _graph_ms(fn) -> float:
    if DEVICE == "cpu":
        return _wall_ms(fn)
    from triton.testing import do_bench_cudagraph

    try:
        return do_bench_cudagraph(fn, rep=100, return_mode="median")
    except Exception as exc:  # a capture failure falls back to eager timing, said on stderr, never fatal
        print(f"CUDA graph capture failed ({type(exc).__name__}: {exc}); eager time instead", file=sys.stderr)
        torch.cuda.synchronize()
        return _eager_ms(fn)


def _eager_ms(fn) -> float:
    if DEVICE == "cpu":
        return _wall_ms(fn)
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def _inputs(shape, pad: bool):
    m, k, n, e = shape
    g = torch.Generator(device=DEVICE).manual_seed(0)
    A = torch.randn(m, k, generator=g, device=DEVICE, dtype=torch.bfloat16).requires_grad_()
    B_t = (torch.randn(e, k, n, generator=g, device=DEVICE, dtype=torch.bfloat16) * k**-0.5).requires_grad_()
    grad_out = torch.randn(m, n, generator=g, device=DEVICE, dtype=torch.bfloat16)
    offs = ref.skewed_offs(m, e, seed=1, multiple=1 if pad else 16, device=DEVICE)
    return A, B_t, grad_out, offs


def _steps(A, B_t, grad_out, offs, pad: bool):
    def bf16_step():
        out = torch._grouped_mm(A, B_t, offs=offs, out_dtype=torch.bfloat16)
        return torch.autograd.grad(out, (A, B_t), grad_out)

    def fp8_step():
        out = grouped_mm(A, B_t, offs, pad_groups=pad)
        return torch.autograd.grad(out, (A, B_t), grad_out)

    return bf16_step, fp8_step


def _gemms(A, B_t, grad_out, offs):
    """The three GEMMs of a step alone, each as (name, bf16 fn, fp8 fn on pre-quantized operands)."""
    a, b, g = A.detach(), B_t.detach(), grad_out
    b_nk = b.transpose(1, 2)  # (E, N, K) view
    q = quantize_operands(a, b, offs, g)
    return [
        ("fwd", lambda: torch._grouped_mm(a, b, offs=offs), lambda: scaled_grouped_mm(q.forward, offs)),
        ("dgrad", lambda: torch._grouped_mm(g, b_nk, offs=offs), lambda: scaled_grouped_mm(q.dgrad, offs)),
        ("wgrad", lambda: torch._grouped_mm(a.t(), g, offs=offs), lambda: scaled_grouped_mm(q.wgrad, offs)),
    ]


def _step_calls(A, offs) -> tuple[str, ...]:
    """The quantization calls fp8moe.grouped_mm makes in one step at this shape (names as QUANT_CALLS)."""
    kind = "cuda" if DEVICE == "cuda" else "interpreter"
    return STEP_CALLS if configs.fuse_activations(kind, A.shape[0], offs.shape[0]) else UNFUSED_STEP_CALLS


def _quant(A, B_t, grad_out, offs):
    """The quantization calls of one step (:func:`_step_calls`), as one function."""
    calls = dict(_quant_calls(A, B_t, grad_out, offs))

    def run():
        for name in _step_calls(A, offs):
            calls[name]()

    return run


def _quant_calls(A, B_t, grad_out, offs):
    """Each quantization call a step may make, one by one: (name, fn), names as QUANT_CALLS."""
    a, b = A.detach(), B_t.detach()
    fns = [
        lambda: qops.rowwise_2d_scale_and_cast(a, E4),
        lambda: qops.colwise_3d_scale_and_cast(b, E4),
        lambda: qops.rowwise_2d_scale_and_cast(grad_out, E4),
        lambda: qops.rowwise_3d_transpose_rhs(b, E4),
        lambda: qops.per_group_colwise_scales_dual(grad_out, a, offs, E4),
        lambda: qops.colwise_3d_and_transpose_rhs(b, E4),
        lambda: qops.rowwise_and_per_group_colwise(a, offs, E4),
        lambda: qops.rowwise_and_per_group_colwise(grad_out, offs, E4),
    ]
    return list(zip(QUANT_CALLS, fns, strict=True))


def quantization_floor_bytes(m: int, k: int, n: int, e: int, *, frozen_weights: bool = False) -> int:
    """The fewest device-memory bytes the quantization of one fwd+bwd step of (M, K, N, E) can move: A (M, K),
    grad_out (M, N) and B_t (E, K, N) each read once in bf16 (2 bytes) with both of its fp8 operands written once
    (1 byte each), plus the f32 scales (A and grad_out: one per row and one per (group, column); B_t: one per (e, n)
    and one per (e, k)). With ``frozen_weights`` B_t is quantized outside the step (fp8moe.frozen_weights) and only
    the activations count.

    Every kernel design is bound by it, fused or not: today's fused pairs read their tensor twice (SPEC §5.6), so
    they move 6 bytes per element where this counts 4.
    """
    activations = 4 * (m * k + m * n) + 4 * (2 * m + e * k + e * n)
    weights = 0 if frozen_weights else 4 * e * k * n + 4 * (e * n + e * k)
    return activations + weights


def _copy_gbs() -> float:
    """Device-to-device copy bandwidth (read + write bytes) of a 2 GiB buffer: the quantization roofline. On CUDA
    fp8moe.bench's measurement (after a warm-up: the cold first copy gave 2775 GB/s instead of ~4270 in
    benchmarks/results/h200-s13-call1-quant_layouts.md)."""
    if DEVICE == "cuda":
        from fp8moe.bench import copy_bandwidth_gbps

        return copy_bandwidth_gbps()
    src = torch.empty(2**20, dtype=torch.bfloat16, device=DEVICE).normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * src.element_size() / _graph_ms(lambda: dst.copy_(src)) / 1e6


def quant_layouts(shapes, emit) -> None:
    """Each quantization call's graph time with B_t row-major (E, K, N) contiguous vs column-major per expert
    (strides (K*N, 1, K)): the five ops a step needs, then the three fused calls; the step's calls
    (:func:`_step_calls`) in total; and the copy-roofline time of the five ops (each op's bf16 read once + fp8
    written once, which is also what the three fused calls move: each reads its tensor twice and writes both
    outputs)."""
    copy_gbs = _copy_gbs()
    emit(f"Quantization calls, GPU time in us with B_t row-major / column-major. Copy bandwidth {copy_gbs:.0f} GB/s.")
    emit()
    emit("| M, K, N, E | " + " | ".join(QUANT_CALLS) + " | step total | all five at copy roofline |")
    emit("|---|" + "---:|" * (len(QUANT_CALLS) + 2))
    for shape in shapes:
        A, B_t, grad_out, offs = _inputs(shape, pad=False)
        B_col = B_t.detach().transpose(1, 2).contiguous().transpose(1, 2)
        row = [_graph_ms(fn) for _, fn in _quant_calls(A, B_t, grad_out, offs)]
        col = [_graph_ms(fn) for _, fn in _quant_calls(A, B_col, grad_out, offs)]
        step = [i for i, name in enumerate(QUANT_CALLS) if name in _step_calls(A, offs)]
        m, k, n, e = shape
        ideal_bytes = 3 * (m * k + 2 * e * k * n + m * n) + 3 * (m * n + m * k)  # A, B twice, G; then the dual
        emit(
            f"| {', '.join(map(str, shape))} | "
            + " | ".join(f"{r * 1e3:.0f} / {c * 1e3:.0f}" for r, c in zip(row, col))
            + f" | {sum(row[i] for i in step) * 1e3:.0f} / {sum(col[i] for i in step) * 1e3:.0f}"
            + f" | {ideal_bytes / copy_gbs / 1e3:.0f} |"
        )
        del A, B_t, B_col, grad_out
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


def micro_batches(shapes, count: int, emit) -> None:
    """Per micro-batch GPU time of ``count`` fwd+bwd micro-batches on one weight (gradient accumulation): bf16, fp8,
    and fp8 inside fp8moe.frozen_weights() (each weight quantized once per ``count`` micro-batches). One graph
    replays all ``count`` steps, scope included, so the frozen run pays its one weight quantization each replay."""
    emit(f"Gradient accumulation: {count} fwd+bwd micro-batches on the same weights, GPU time per micro-batch in ms.")
    emit()
    emit("| M, K, N, E | bf16 | fp8 | fp8, frozen_weights | speed-up fp8 / frozen vs bf16 | outputs equal |")
    emit("|---|---:|---:|---:|---:|---|")
    for shape in shapes:
        A, B_t, grad_out, offs = _inputs(shape, pad=False)
        bf16_step, fp8_step = _steps(A, B_t, grad_out, offs, pad=False)

        def repeated(step):
            return lambda: [step() for _ in range(count)]

        def frozen(step=fp8_step):
            with frozen_weights():
                return [step() for _ in range(count)]

        plain_out, frozen_out = fp8_step(), frozen()[-1]
        equal = all(torch.equal(a, b) for a, b in zip(plain_out, frozen_out))
        t_bf16, t_fp8, t_frozen = (_graph_ms(fn) / count for fn in (repeated(bf16_step), repeated(fp8_step), frozen))
        emit(
            f"| {', '.join(map(str, shape))} | {t_bf16:.3f} | {t_fp8:.3f} | {t_frozen:.3f} | "
            f"{t_bf16 / t_fp8:.2f}x / **{t_bf16 / t_frozen:.2f}x** | {'yes' if equal else 'NO'} |"
        )
        del A, B_t, grad_out
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


def _triton_gemm(ops, offs) -> str:
    """One scaled grouped GEMM through Inductor's Triton template (max-autotune, Triton backend only): graph time
    and SQNR against the vendor GEMM on the same operands."""
    import torch._inductor.config as inductor_config

    args = (ops.a, ops.b, torch.reciprocal(ops.a_scale), torch.reciprocal(ops.b_scale), offs)

    def gemm(a, b, ra, rb, offs):
        return torch._scaled_grouped_mm(a, b, ra, rb, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)

    with inductor_config.patch(max_autotune_gemm_backends="TRITON", max_autotune=True):
        compiled = torch.compile(gemm, fullgraph=True, dynamic=False)
        out = compiled(*args)
    db = ref.sqnr(scaled_grouped_mm(ops, offs), out)
    return f"{_graph_ms(lambda: compiled(*args)) * 1e3:.0f} us ({db:.0f} dB vs vendor)"


def _triton_gemm_cells(A, B_t, grad_out, offs, which: list[str]) -> list[str]:
    q = quantize_operands(A.detach(), B_t.detach(), offs, grad_out)
    cells = []
    for name, ops in zip(("fwd", "dgrad", "wgrad"), q):
        if name not in which:
            continue
        try:
            cells.append(f"{name} {_triton_gemm(ops, offs)}")
        except Exception as exc:  # reported, never fatal: the template may not cover this layout on this torch
            cells.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the Markdown tables to this file (row by row)")
    parser.add_argument(
        "--triton-gemm", default="", help="comma list of fwd,dgrad,wgrad: time Inductor's Triton template (E=64 shape)"
    )
    parser.add_argument("--device", default="cuda", help="cpu: smoke-run the logic (with --shapes small ones)")
    parser.add_argument("--shapes", default=None, help="M,K,N,E;M,K,N,E... instead of the four MoE shapes")
    parser.add_argument(
        "--quant-layouts", action="store_true", help="only: quantization time per call, both B_t layouts"
    )
    parser.add_argument(
        "--micro-batches", type=int, default=0, help="only: N micro-batches per weight, with / without frozen_weights"
    )
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes.split(";")] if args.shapes else SHAPES
    device_name = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    lines: list[str] = []

    def emit(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)
        if args.out:
            with open(args.out, "w") as f:
                f.write("\n".join(lines) + "\n")

    emit(f"# FP8 grouped GEMM fwd+bwd vs bf16 on {device_name}")
    emit()
    versions = (
        f"torch {torch.__version__}, triton {sys.modules['triton'].__version__}, python {platform.python_version()}."
    )
    if args.quant_layouts or args.micro_batches:
        emit(versions)
        emit()
        if args.quant_layouts:
            quant_layouts(shapes, emit)
        else:
            micro_batches(shapes, args.micro_batches, emit)
        return 0
    copy_gbs = _copy_gbs()
    emit(
        f"{versions} GPU time of CUDA-graph replays (median, triton.testing.do_bench_cudagraph); `eager` is "
        "do_bench's median with host overhead. Groups: fp8ref.grouped_mm.skewed_offs (uneven, one empty, "
        "multiples of 16). Speed-up = bf16 time / fp8 time. quant = the fp8moe quantization calls of a step "
        f"(fused activations, fp8moe.configs.fuse_activations: {', '.join(STEP_CALLS)}; else "
        f"{', '.join(UNFUSED_STEP_CALLS)}); its share is of the fp8 GEMMs. quant floor = "
        f"quantization_floor_bytes (each tensor read once, both fp8 operands written once) at the {copy_gbs:.0f} GB/s "
        "copy bandwidth measured in this run."
    )
    emit()
    emit(
        "| M, K, N, E | bf16 step ms | fp8 step ms | step speed-up | eager bf16 / fp8 ms | bf16 GEMMs ms | "
        "fp8 GEMMs ms | GEMM speed-up | quant ms | quant / fp8 GEMMs | quant floor ms | floor / fp8 GEMMs | "
        "SQNR out/dA/dB dB |"
    )
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    details = []
    for shape in shapes:
        t0 = time.time()
        A, B_t, grad_out, offs = _inputs(shape, pad=False)
        bf16_step, fp8_step = _steps(A, B_t, grad_out, offs, pad=False)
        fp8 = ref.GroupedMMResult(grouped_mm(A, B_t, offs).detach(), *fp8_step(), None)
        bf16 = ref.GroupedMMResult(torch._grouped_mm(A, B_t, offs=offs).detach(), *bf16_step(), None)
        sq = ref.path_sqnr(bf16, fp8, offs)
        del fp8, bf16
        t_bf16, t_fp8 = _graph_ms(bf16_step), _graph_ms(fp8_step)
        e_bf16, e_fp8 = _eager_ms(bf16_step), _eager_ms(fp8_step)
        per_gemm = [(name, _graph_ms(fb), _graph_ms(ff)) for name, fb, ff in _gemms(A, B_t, grad_out, offs)]
        g_bf16, g_fp8 = sum(p[1] for p in per_gemm), sum(p[2] for p in per_gemm)
        t_quant = _graph_ms(_quant(A, B_t, grad_out, offs))
        t_floor = quantization_floor_bytes(*shape) / copy_gbs / 1e6  # ms
        emit(
            f"| {', '.join(map(str, shape))} | {t_bf16:.3f} | {t_fp8:.3f} | **{t_bf16 / t_fp8:.2f}x** | "
            f"{e_bf16:.3f} / {e_fp8:.3f} | {g_bf16:.3f} | {g_fp8:.3f} | {g_bf16 / g_fp8:.2f}x | {t_quant:.3f} | "
            f"{100 * t_quant / g_fp8:.0f}% | {t_floor:.3f} | {100 * t_floor / g_fp8:.1f}% | "
            f"{sq['out']:.1f} / {sq['grad_A']:.1f} / {sq['grad_B_t']:.1f} |"
        )
        details.append(
            f"| {', '.join(map(str, shape))} | "
            + " | ".join(f"{b * 1e3:.0f} / {f * 1e3:.0f} ({b / f:.2f}x)" for _, b, f in per_gemm)
            + f" | {t_fp8 - g_fp8 - t_quant:.3f} | {time.time() - t0:.0f} s |"
        )
        del A, B_t, grad_out
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    emit()
    emit("Per GEMM, bf16 / fp8 us (speed-up), and what the fp8 step spends outside GEMMs and quantization:")
    emit()
    emit("| M, K, N, E | fwd | dgrad | wgrad | fp8 step - GEMMs - quant, ms | wall |")
    emit("|---|---|---|---|---:|---:|")
    for line in details:
        emit(line)

    # Unaligned groups need pad_groups=True: the copy in and out of the padded rows, at the many-small-groups shape.
    shape = shapes[min(1, len(shapes) - 1)]
    A, B_t, grad_out, offs = _inputs(shape, pad=True)
    bf16_step, fp8_step = _steps(A, B_t, grad_out, offs, pad=True)
    t_bf16, t_fp8 = _graph_ms(bf16_step), _graph_ms(fp8_step)
    emit()
    emit(
        f"Unaligned groups (skewed_offs multiple=1), pad_groups=True, {shape}: bf16 step {t_bf16:.3f} ms, fp8 step "
        f"{t_fp8:.3f} ms, speed-up {t_bf16 / t_fp8:.2f}x."
    )
    if args.triton_gemm:
        A, B_t, grad_out, offs = _inputs(shape, pad=False)
        emit()
        emit(
            f"Inductor Triton template for the scaled grouped GEMM at {shape}: "
            + "; ".join(_triton_gemm_cells(A, B_t, grad_out, offs, args.triton_gemm.split(",")))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
