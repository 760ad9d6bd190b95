"""GPU claims of the FP8 grouped-GEMM path (issue #12): SQNR vs bf16 at the MoE shapes, operands bitwise equal to the
reference on the GPU, compile == eager without graph breaks, no device syncs.

Run with ``--device cuda -s``: each test prints its measurements (the committed log is
benchmarks/results/h200-grouped-mm-run1-tests.log).
"""

from __future__ import annotations

import pytest
import torch

from fp8moe.grouped_mm import grouped_mm, quantize_operands
from fp8ref import grouped_mm as ref
from fp8ref.metrics import sqnr
from fp8ref.testing import assert_same_bits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]

#: (M tokens, K, N, E experts): the shapes of SPEC §7.
MOE_SHAPES = [(16384, 7168, 2048, 8), (16640, 2048, 1408, 64), (32768, 5120, 8192, 16), (65536, 4096, 14336, 8)]


def _shape_id(shape):
    return "x".join(map(str, shape))


def _inputs(shape, device, seed=0):
    """bf16 A, B_t, grad_out drawn on the device (the largest are 10^9 elements: too slow to draw on the CPU)."""
    m, k, n, e = shape
    g = torch.Generator(device=device).manual_seed(seed)
    A = torch.randn(m, k, generator=g, device=device, dtype=torch.bfloat16)
    B_t = torch.randn(e, k, n, generator=g, device=device, dtype=torch.bfloat16) * k**-0.5
    grad_out = torch.randn(m, n, generator=g, device=device, dtype=torch.bfloat16)
    return A, B_t, grad_out


def _fwd_bwd(fn, A, B_t, offs, grad_out, **kwargs):
    A, B_t = A.detach().requires_grad_(), B_t.detach().requires_grad_()
    out = fn(A, B_t, offs, **kwargs)
    grad_A, grad_B_t = torch.autograd.grad(out, (A, B_t), grad_out)
    return ref.GroupedMMResult(out.detach(), grad_A, grad_B_t, None)


def _bf16(A, B_t, offs):
    return torch._grouped_mm(A, B_t, offs=offs, out_dtype=torch.bfloat16)


@pytest.mark.parametrize("shape", MOE_SHAPES, ids=_shape_id)
def test_sqnr_vs_bf16_at_moe_shapes_with_uneven_and_empty_groups(shape, device):
    m, _, _, e = shape
    A, B_t, grad_out = _inputs(shape, device)
    offs = ref.skewed_offs(m, e, seed=1, device=device)  # group 1 empty, sizes multiples of 16, one dominant
    fp8 = _fwd_bwd(grouped_mm, A, B_t, offs, grad_out)
    bf16 = _fwd_bwd(_bf16, A, B_t, offs, grad_out)
    got = ref.path_sqnr(bf16, fp8, offs)
    per_group = ref.per_group_sqnr(bf16.out, fp8.out, offs)
    per_expert = ref.per_group_sqnr(bf16.grad_B_t, fp8.grad_B_t)
    finite = [db for db in per_group if db == db]
    print(
        f"\n[sqnr-vs-bf16] {_shape_id(shape)}: "
        + ", ".join(f"{k} {v:.2f} dB" for k, v in got.items())
        + f"; out per group min {min(finite):.2f} dB; grad_B_t per expert min "
        + f"{min(db for i, db in enumerate(per_expert) if i != 1):.2f} dB; empty expert grad max "
        + f"{fp8.grad_B_t[1].abs().max().item()}"
    )
    assert torch.count_nonzero(fp8.grad_B_t[1]) == 0  # the empty group's weight gradient is exactly zero
    for name, db in got.items():
        assert db >= ref.SQNR_VS_BF16.min_db, (name, db, str(ref.SQNR_VS_BF16))


@pytest.mark.parametrize("shape", MOE_SHAPES[:2], ids=_shape_id)
def test_matches_reference_path_on_the_gpu(shape, device):
    """Operands bitwise equal to fp8ref's on the same GPU tensors; out/grad_A/grad_B_t within SQNR_VS_REFERENCE of
    the exact f64 GEMM of those operands (so only the vendor GEMM's arithmetic differs)."""
    m, _, _, e = shape
    A, B_t, grad_out = _inputs(shape, device, seed=2)
    offs = ref.skewed_offs(m, e, seed=3, device=device)
    for gemm, got, want in zip(
        ref.PathOperands._fields,
        quantize_operands(A, B_t, offs, grad_out),
        ref.quantize_operands(A, B_t, offs, grad_out),
    ):
        for field, x, y in zip(got._fields, got, want):
            assert_same_bits(x, y, what=f"{gemm}.{field}")
    fp8 = _fwd_bwd(grouped_mm, A, B_t, offs, grad_out)
    exact = ref.grouped_mm(A, B_t, offs, grad_out)
    got = ref.path_sqnr(exact, fp8, offs)
    bits = {
        name: float((a.view(torch.int16) == b.view(torch.int16)).double().mean())
        for name, a, b in [("out", fp8.out, exact.out), ("grad_A", fp8.grad_A, exact.grad_A)]
    }
    print(
        f"\n[sqnr-vs-reference] {_shape_id(shape)}: "
        + ", ".join(f"{k} {v:.2f} dB" for k, v in got.items())
        + "; bitwise-equal fraction "
        + ", ".join(f"{k} {v:.4f}" for k, v in bits.items())
    )
    for name, db in got.items():
        assert db >= ref.SQNR_VS_REFERENCE.min_db, (name, db, str(ref.SQNR_VS_REFERENCE))


def test_padding_unaligned_groups_on_the_gpu(device):
    shape = (16640, 2048, 1408, 64)
    A, B_t, grad_out = _inputs(shape, device, seed=4)
    offs = ref.skewed_offs(shape[0], shape[3], seed=5, multiple=1, device=device)  # arbitrary sizes, one empty
    fp8 = _fwd_bwd(grouped_mm, A, B_t, offs, grad_out, pad_groups=True)
    bf16 = _fwd_bwd(_bf16, A, B_t, offs, grad_out)
    got = ref.path_sqnr(bf16, fp8, offs)
    print(f"\n[sqnr-vs-bf16, pad_groups] {_shape_id(shape)}: " + ", ".join(f"{k} {v:.2f} dB" for k, v in got.items()))
    assert torch.count_nonzero(fp8.grad_B_t[1]) == 0
    for name, db in got.items():
        assert db >= ref.SQNR_VS_BF16.min_db, (name, db)


@pytest.mark.parametrize("pad_groups", [False, True], ids=["aligned", "padded"])
def test_forward_and_backward_make_no_device_sync(pad_groups, device):
    shape = (4096, 1024, 512, 8)
    A, B_t, grad_out = _inputs(shape, device, seed=6)
    offs = ref.skewed_offs(shape[0], shape[3], seed=7, multiple=16 if not pad_groups else 1, device=device)
    _fwd_bwd(grouped_mm, A, B_t, offs, grad_out, pad_groups=pad_groups)  # warm-up: autotuning may sync
    torch.cuda.synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        _fwd_bwd(grouped_mm, A, B_t, offs, grad_out, pad_groups=pad_groups)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_compiled_grouped_mm_fullgraph_equals_eager(device):
    """grouped_mm alone under torch.compile(fullgraph=True): the quantizers and the GEMMs' scale reciprocals are
    opaque custom ops (fp8moe.grouped_mm.gemm_scale_reciprocals) and the GEMM an ATen call, so the compiled step runs
    eager's kernels on eager's operands: bitwise. Before the reciprocals were an op of their own Inductor computed
    them with Triton's approximate division, 94-98 dB from eager (benchmarks/results/h200-grouped-mm.md, run 2)."""
    shape = (4096, 1024, 512, 8)
    A, B_t, grad_out = _inputs(shape, device, seed=8)
    offs = ref.skewed_offs(shape[0], shape[3], seed=9, device=device)
    eager = _fwd_bwd(grouped_mm, A, B_t, offs, grad_out)
    compiled = _fwd_bwd(torch.compile(grouped_mm, fullgraph=True), A, B_t, offs, grad_out)
    report = []
    for name, a, b in zip(("out", "grad_A", "grad_B_t"), compiled[:3], eager[:3]):
        same, db = bool(torch.equal(a, b)), sqnr(b, a)
        report.append(f"{name} bitwise={same} sqnr={db:.1f} dB")
        assert same, (name, db)
    print("\n[compile-vs-eager grouped_mm] " + "; ".join(report))


def test_compiled_moe_layer_fullgraph_without_syncs_stays_within_fp8_noise(device):
    """A small MoE layer on the FP8 path under torch.compile(fullgraph=True): fullgraph raises on any graph break;
    the compiled forward and backward run under set_sync_debug_mode("error").

    Compiled and eager are not bitwise equal here (run 1, H200: grad_x 32.2 dB apart): Inductor fuses the router
    softmax, SiLU and the weighted sum and rounds some bf16 values an ulp differently; an ulp on a row's largest
    element changes that row's FP8 scale and so re-rounds the whole row. So both are held to the FP8 floor against
    the bf16 layer (two FP8 GEMMs in series: 28.5 - 10*log10(2) ~ 25.5 dB expected, floor 23 dB as issue #12), and
    to each other at that floor too.
    """
    from fp8moe.moe import MoE, bf16_grouped_mm, convert_to_fp8_moe

    torch.manual_seed(0)
    layer = MoE(dim=512, hidden=1024, num_experts=8, top_k=2).to(device)
    x = torch.randn(4096, 512, device=device, dtype=torch.bfloat16)
    grad = torch.randn_like(x)

    def step(fn):
        xs = x.detach().requires_grad_()
        out = fn(xs)
        grads = torch.autograd.grad(out, (xs, layer.w_up, layer.w_down), grad)
        return out.detach(), *grads

    bf16 = step(layer)
    convert_to_fp8_moe(layer)
    eager = step(layer)
    compiled_layer = torch.compile(layer, fullgraph=True)
    step(compiled_layer)  # compiles forward and backward (and autotunes: may sync)
    torch.cuda.synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        compiled = step(compiled_layer)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert layer.expert_mm is not bf16_grouped_mm
    report = []
    for name, c, e, b in zip(["out", "grad_x", "grad_w_up", "grad_w_down"], compiled, eager, bf16):
        dbs = (sqnr(e, c), sqnr(b, e), sqnr(b, c))
        report.append(
            f"{name} bitwise={bool(torch.equal(c, e))} compiled-vs-eager {dbs[0]:.1f}, eager-vs-bf16 "
            f"{dbs[1]:.1f}, compiled-vs-bf16 {dbs[2]:.1f} dB"
        )
        assert min(dbs) >= 23.0, (name, dbs)
    print("\n[compile-vs-eager MoE] " + "; ".join(report))
