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

    python benchmarks/host_overhead.py --split

splits the replayed call of the two colwise per-group ops (single and dual) into its parts instead: the public call
(which replays its launch's plan, fp8moe.replay "Public calls"), the same with its checks run on every call as before
session 33, the replaying ``launch``, the plan's replay alone, its output allocations
alone, its compiled kernels' runners alone with the arguments already filled in, and the two device queries each
runner makes; then a cProfile of each public call. The dual op's eager call ran 16.4 us over its graph time at
16640x2048x1408 on an H200 in session 33 with its back-to-back loop at 78 us per call (``h200-s33-call5-bench.md``):
which part is that host time?

    python benchmarks/host_overhead.py --points

asks the same at the issue #11 points whose back-to-back loop ran furthest over graph time (the bench's
``loop_us``): per point, after the bench's first two calls (autotune, then the call that records a launch plan),
whether a plan replays, the host time per call (bursts of 10 calls enqueued behind an idle GPU, no sync inside),
the same behind a ~30 ms sleep kernel (a call that waits for the GPU shows the sleep there), the GPU time per
call of 50 eager calls back to back (device events, no flush), the graph time and the bench's loop
time. A loop over graph time with host time under graph time is the GPU's, not the host's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

import fp8moe  # imported before triton, as fp8moe requires
import fp8moe.ops  # registers torch.ops.fp8moe
from fp8moe import replay
from fp8moe.kernels import per_group_colwise_scales as per_group_colwise_kernel
from fp8moe.kernels import per_group_colwise_scales_dual as per_group_colwise_dual_kernel
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


def print_profile(fn, calls: int = 500, top: int = 25) -> None:
    """cProfile of ``calls`` calls of ``fn``, the ``top`` functions by own time."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def the_plan(launch_fn, args: tuple):
    """The launch plan ``launch_fn`` (a replay.replayable launch) holds for ``args``, after one call records it."""
    launch_fn(*args)
    key, _ = replay._plan_key(args)
    plans = [p[key] for p in replay._ALL_PLANS if key in p]
    if len(plans) != 1:
        raise SystemExit(f"expected one plan for {launch_fn.__name__} at these arguments, found {len(plans)}")
    return plans[0]


def split(name: str, public, launch_fn, args: tuple) -> None:
    """The parts of one replayed call (module docstring, --split)."""
    from triton.runtime import driver

    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    plan = the_plan(launch_fn, args)
    device = inputs[0].device
    outputs = plan.replay(inputs, device)
    known = [*inputs, *outputs]
    filled = []
    for launch in plan.launches:
        values = list(launch.values)
        for position, index in launch.slots:
            values[position] = known[index]
        filled.append((launch.runner, values))

    def allocate():
        return [torch.empty_strided(shape, stride, dtype=dtype, device=device) for shape, stride, dtype in plan.outputs]

    def run_kernels():
        for runner, values in filled:
            runner(*values)

    def device_queries():
        driver.active.get_current_stream(driver.active.get_current_device())

    def public_checked():
        replay.PUBLIC_CALLS = False
        try:
            return public()
        finally:
            replay.PUBLIC_CALLS = True

    parts = [
        ("public (replays its launch's plan)", public),
        ("public, checked every call", public_checked),
        ("launch (replayable)", lambda: launch_fn(*args)),
        ("plan replay", lambda: plan.replay(inputs, device)),
        (f"allocations ({len(plan.outputs)} outputs)", allocate),
        (f"kernel runners ({len(filled)}), arguments filled", run_kernels),
        ("runner's device and stream queries", device_queries),
        ("plan key", lambda: replay._plan_key(args)),
    ]
    print(f"## {name}: {len(filled[0][1])} kernel arguments")
    for label, fn in parts:
        print(f"{label:45s} {per_call_us(fn):8.1f} us/call")
    print_profile(public)


def main_split() -> None:
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    y = x.clone()
    offs = torch.tensor([100, 100, 300, 512], device="cuda", dtype=torch.int32)
    backend = fp8moe.backend_for(x.device)
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"x (512, 256) bf16 transposed views, 4 groups, {CALLS} calls each, launch plans on"
    )
    split(
        "per_group_colwise",
        lambda: fp8moe.per_group_colwise_scales(x.t(), offs, E4),
        per_group_colwise_kernel.launch,
        (x.t(), offs, E4, False, backend),
    )
    split(
        "per_group_colwise_dual",
        lambda: fp8moe.per_group_colwise_scales_dual(x.t(), y.t(), offs, E4),
        per_group_colwise_dual_kernel.launch,
        (x.t(), y.t(), offs, E4, False, backend),
    )


#: The points of fp8moe.bench.ISSUE11_POINTS --points times: (op, shape, groups), aligned16 groups.
LOOP_POINTS = (
    ("per_group_colwise_scales_dual", (16640, 2048, 1408), 64),
    ("per_group_colwise_scales_dual", (16640, 2048, 2048), 64),
    ("per_group_colwise_scales", (16640, 2048), 128),
    ("per_group_colwise_scales", (16640, 2048), 64),
)


def host_us_per_call_gpu_busy(fn, burst: int = 10, sleep_cycles: int = 50_000_000) -> float:
    """Wall time per call of ``burst`` calls enqueued behind a ~30 ms sleep kernel: a call that waits for the GPU
    (a hidden synchronization) takes the sleep's time here, a call that only enqueues takes its host time."""
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    start = time.perf_counter()
    for _ in range(burst):
        fn()
    per_call = (time.perf_counter() - start) / burst * 1e6
    torch.cuda.synchronize()
    return per_call


def gpu_us_per_call(fn, calls: int = 50) -> float:
    """Device time per call of ``calls`` eager calls back to back (events around all of them)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def main_points() -> None:
    from triton.testing import do_bench_cudagraph

    from fp8moe import bench
    from fp8ref.contracts import contract

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; aligned16 groups")
    print(
        "| op | shape | G | plans replayed | host us/call | host us/call, GPU busy | eager GPU us/call | graph us "
        "| loop us |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for op, shape, groups in LOOP_POINTS:
        point = bench.Point(op, shape, groups, "aligned16")
        c = contract(op)
        xs, offs = bench.make_inputs(c, point)
        fn = getattr(fp8moe, op)

        def call(fn=fn, c=c, xs=xs, offs=offs):
            return c.call(fn, xs, offs, fp8_dtype=E4, round_scales_to_power_of_2=False)

        before = replay.plan_count()
        call()  # autotunes
        call()  # records the plan that the calls below replay
        recorded = replay.plan_count() - before
        host = bench.host_us(call, "cuda")
        replayed = "yes" if recorded == 1 and replay.plan_count() == before + 1 else f"no ({recorded} recorded)"
        busy = sorted(host_us_per_call_gpu_busy(call) for _ in range(5))[2]
        gpu = gpu_us_per_call(call)
        graph = do_bench_cudagraph(call, rep=50) * 1e3
        loop = bench.loop_us(call, "cuda", graph)
        shape_text = "x".join(map(str, shape))
        times = " | ".join(f"{t:.1f}" for t in (host, busy, gpu, graph, loop))
        print(f"| {op} | {shape_text} | {groups} | {replayed} | {times} |")


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
    print_profile(lambda: fp8moe.rowwise_2d_scale_and_cast(x, E4))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", action="store_true", help="split the colwise per-group ops' replayed calls")
    parser.add_argument("--points", action="store_true", help="host, eager GPU, graph and loop time at LOOP_POINTS")
    options = parser.parse_args()
    main_split() if options.split else main_points() if options.points else main()
