"""Host cost of one fp8moe call, layer by layer, on a problem small enough that the GPU is never the bottleneck.

    python benchmarks/host_overhead.py > benchmarks/results/h200-host-overhead-<label>.txt

The benchmark (bench_kernels.py) shows calls whose eager time is several times their CUDA-graph time: the host
path, not the kernel, sets their speed. This script splits that path. Per op, the mean wall time per call over many
back-to-back calls (one synchronize at the end; the GPU work per call is a few microseconds) of:

- public: the fp8moe function (argument checks, launch), with launch plans (fp8moe.replay: a repeated call replays
  the compiled kernels it recorded) and with plans off;
- custom op: ``torch.ops.fp8moe.<op>.default`` (dispatcher, autograd fallthrough, the registered impl);
- launch: the kernel module's ``launch`` with a precomputed backend (allocation and the launch plan's replay);
- and two baselines: ``torch.abs`` (one ATen kernel) and an empty Triton kernel with one argument.

The rowwise op is also timed at 2^20 elements, where CUDA autotuning (its cache lookup) is on the path.

Then a cProfile of the public rowwise call, top functions by own time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch

import fp8moe  # imported before triton, as fp8moe requires
import fp8moe.ops  # registers torch.ops.fp8moe
from fp8moe import replay
from fp8moe.kernels import per_group_rowwise_scales as per_group_rowwise_kernel
from fp8moe.kernels import rowwise_2d_scale_and_cast as rowwise_kernel

import triton  # isort: skip

E4 = torch.float8_e4m3fn
CALLS = 2000


@triton.jit
def _empty_kernel(x_ptr):
    pass


def per_call_us(fn, calls: int = CALLS) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    tuned = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)  # AUTOTUNE_MIN_ELEMENTS: autotuned path
    offs = torch.tensor([100, 100, 300, 512], device="cuda", dtype=torch.int32)
    backend = fp8moe.backend_for(x.device)
    x3 = torch.randn(4, 256, 128, device="cuda", dtype=torch.bfloat16)
    y = x.clone()  # the dual op's second input (two views of one tensor alias, and aliased calls are not recorded)
    public = [
        ("rowwise_2d public", lambda: fp8moe.rowwise_2d_scale_and_cast(x, E4)),
        ("rowwise_2d public, autotuned 1024x1024", lambda: fp8moe.rowwise_2d_scale_and_cast(tuned, E4)),
        ("per_group_rowwise public", lambda: fp8moe.per_group_rowwise_scales(x, offs, E4)),
        ("per_group_colwise public", lambda: fp8moe.per_group_colwise_scales(x.t(), offs, E4)),
        ("per_group_colwise_dual public", lambda: fp8moe.per_group_colwise_scales_dual(x.t(), y.t(), offs, E4)),
        ("colwise_3d public", lambda: fp8moe.colwise_3d_scale_and_cast(x3, E4)),
        ("transpose_rhs atomic public", lambda: fp8moe.rowwise_3d_transpose_rhs(x3, E4, method="atomic")),
    ]
    rows = [
        ("torch.abs (ATen baseline)", lambda: torch.abs(x)),
        ("empty Triton kernel (launch baseline)", lambda: _empty_kernel[(1,)](x)),
        *public,
        ("rowwise_2d custom op", lambda: torch.ops.fp8moe.rowwise_2d_scale_and_cast.default(x, E4, False)),
        ("rowwise_2d launch", lambda: rowwise_kernel.launch(x, E4, False, backend)),
        ("backend_for", lambda: fp8moe.backend_for(x.device)),
        ("per_group_rowwise custom op", lambda: torch.ops.fp8moe.per_group_rowwise_scales.default(x, offs, E4, False)),
        ("per_group_rowwise launch", lambda: per_group_rowwise_kernel.launch(x, offs, E4, False, backend)),
    ]
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"x {tuple(x.shape)} bf16, {CALLS} calls each; launch plans (fp8moe.replay) on unless marked"
    )
    for name, fn in rows:
        print(f"{name:40s} {per_call_us(fn):8.1f} us/call")
    print(f"launch plans held after these calls: {replay.plan_count()} (one per op and signature above)")
    replay.ENABLED = False
    for name, fn in public:
        print(f"{name + ', plans off':40s} {per_call_us(fn):8.1f} us/call")
    replay.ENABLED = True
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(500):
        fp8moe.rowwise_2d_scale_and_cast(x, E4)
    torch.cuda.synchronize()
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue())


if __name__ == "__main__":
    main()
