"""Long transposing slices: can few programs with a deep load pipeline read x once from DRAM and still keep it busy?

    python benchmarks/probe_long_slices.py --out results.md      # on a CUDA GPU; a Markdown table
    python benchmarks/probe_long_slices.py --points short --variants short   # short slices, tensor descriptors

Why: where a slice is thousands of tokens long, fp8moe's two-pass span loop reads x twice from DRAM: colwise 3D on
row-major input (E, K, N) reads 1.66-1.92x its input at K = 2048-8192, per-group colwise at G = 16 1.85x
(Nsight Compute, benchmarks/results/h200-bench-2026-12-02-s8-summary.md), and they run at 46-59% and 56% of copy
bandwidth. Pass 2 misses L2 because the slices in flight (hundreds of MB) outgrow it. Every design that kept them
inside L2 read the ideal bytes but kept DRAM 36-49% busy: one persistent 4-warp program per SM with 16-column
slabs ran 1.25-1.5x slower than the plain tile (h200-s8-tune-persistent.md), and the chunked kernel's 2 programs
per SM at 37.6% of DRAM peak (h200-s15-call4-ncu.md). Those programs loaded one tile ahead at most, held in
registers. The ledger's open question (per-group-ledger.md) is whether few programs can have ideal bytes and enough
loads in flight together. This probe holds everything else fixed and varies that:

- a persistent grid of ``p`` programs per SM (``/p<p>``; ``/p0``: one program per slab, the plain grid), each taking
  whole slabs (an expert's or group's ``BLOCK_N`` columns over all its K tokens) in order, so that the slabs in
  flight are ``p * SMs * K * BLOCK_N * 2`` bytes (16 columns, p = 1, K = 8192: 34 MB, inside the H200's L2);
- both passes as ``tl.range(..., num_stages=S)`` loops (``/s<S>``), which Triton 3.6 compiles to cp.async copies
  into S shared-memory stages: S - 1 tiles in flight per program without holding them in registers;
- pass 2 walks backwards (the tiles pass 1 read last come first, as in fp8moe's span loop);
- ``/h``: L2 eviction priorities, pass 1's loads evict-last, pass 2's loads and the stores evict-first, so that the
  slabs waiting for their second read are the last lines L2 drops (they took the chunked kernel's DRAM reads from
  1.49x to 1.27x the ideal, h200-s15-call4-ncu.md). Triton 3.6 keeps only the stores' hint once it turns the loads
  into cp.async copies (PTX of 512x16/w8/s4/p1/h: 2 stores with an L2 cache hint, none of the 32 cp.async), so
  here ``/h`` keeps the fp8 stores from pushing x out of L2, nothing more.

- ``/d``: x read through a tensor descriptor (Triton's ``TensorDescriptor``), which sm_90 compiles to the bulk
  tensor copy engine (TMA: ``cp.async.bulk.tensor`` into shared memory, completing on an mbarrier, UTMALDG in SASS),
  S stages deep with ``/s<S>``: the loads in flight hold shared memory, not registers, and no thread computes an
  address (HOPPER.md of the device notes names this the tile pattern for memory-bound code). Session 18's
  pipelines (cp.async, ``h200-s18-call1-tune-stages.md``) and session 24's (this probe, long slices) lost; neither
  used TMA. ``SHORT_POINTS`` are the other regime: uniform groups of 128 and 256 tokens at 2048 and 5120 columns,
  the per-group colwise op's G = 64 and 128 points, where its slices move the ideal bytes with DRAM 41-51% busy
  (``h200-s8-ncu.md``) and the H200 runs 66-73% of copy against the H100's 82-89% (sessions 31-32): too few bytes
  in flight for the H200's bandwidth. The box of a descriptor is at most 256 tokens and at least 16 bytes wide.

fp8ref's semantics, through fp8moe's own helpers (NaN-keeping amax of bit patterns, the f64 scale, the saturating
cast): every variant is checked bitwise against fp8ref (codes, scales and q's strides; NaN as a class, as
fp8ref.testing compares; outputs poisoned first) before it is timed, beside fp8moe's own op (autotuned) at the same
shape. Variants are named ``BLOCK_KxBLOCK_N/w<warps>/s<S>/p<p>[/h]``. Times are CUDA-graph medians; % of copy is the
op's ideal bytes (x read once, fp8 written once, the scales) over the copy bandwidth timed in the same run.

Two kinds of point: ``colwise_3d`` (x (E, K, N) row-major, q (E, K, N) with strides (K*N, 1, K), scales (E, 1, N):
colwise_3d_scale_and_cast on row-major input) and ``per_group`` (x (E*K, N) row-major in E groups of K tokens, q
(E*K, N) with strides (1, E*K), scales (E*N,): per_group_colwise_scales at uniform groups). The kernel is the same;
only q's strides differ.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from functools import partial

import torch

import fp8moe  # before triton: without a GPU it turns the interpreter on first

# isort: split
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from fp8moe.backend import backend_for
from fp8moe.kernels._common import amax_of_magnitude_bits, fp8_constexprs, magnitude_bits, quantize, scale_from_amax
from fp8ref import ops as ref
from fp8ref.engine.poison import POISON_BYTES, poisoned_allocations
from fp8ref.testing import same_bits

E4 = torch.float8_e4m3fn
#: The shapes of issue #11 where slices are long: colwise 3D on row-major input, and per-group colwise at G = 16.
POINTS = ("colwise_3d:16x8192x5120", "colwise_3d:1x8192x5120", "colwise_3d:64x2048x1408", "per_group:16x4096x4096")
#: BLOCK_KxBLOCK_N/w<warps>/s<stages>/p<programs per SM>[/h]; p0 = one program per slab, /h = L2 hints.
VARIANTS = (
    "256x16/w4/s1/p0",
    "512x16/w8/s1/p1",
    "512x16/w8/s3/p1",
    "512x16/w8/s4/p1",
    "512x16/w8/s4/p1/h",
    "1024x16/w16/s3/p1",
    "1024x16/w16/s4/p1",
    "1024x16/w16/s3/p1/h",
    "256x32/w8/s4/p1",
    "512x32/w16/s4/p1",
    "512x16/w8/s4/p2",
    "128x64/w4/s3/p0",
)
#: The per-group colwise op's short-slice points (uniform groups: E groups of K tokens, N columns) and the variants
#: for them: the op's own tile shapes read by plain loads (s1, the control), then through descriptors one to three
#: stages deep, one program per slab (p0) and two resident per SM (p2, a persistent grid).
SHORT_POINTS = ("per_group:64x256x2048", "per_group:128x128x2048", "per_group:64x256x5120", "per_group:128x128x5120")
SHORT_VARIANTS = (
    "64x64/w4/s1/p0",
    "128x64/w4/s1/p0",
    "64x64/w4/s1/p0/d",
    "64x64/w4/s2/p0/d",
    "128x64/w4/s2/p0/d",
    "128x64/w4/s3/p0/d",
    "64x128/w4/s2/p0/d",
    "128x32/w4/s3/p0/d",
    "128x64/w8/s3/p2/d",
)
#: --points and --variants take these names for their sets.
POINT_SETS = {"long": POINTS, "short": SHORT_POINTS}
VARIANT_SETS = {"long": VARIANTS, "short": SHORT_VARIANTS}
#: A descriptor's box: at most this many elements along each dimension, and at least this many bytes along the last.
DESCRIPTOR_BOX_MAX = 256
DESCRIPTOR_MIN_BYTES = 16


@triton.jit
def _load_tile(x_slab, x_desc, row0, k0, tokens, stride_xk, col0, EVICT: tl.constexpr, DESCRIPTOR: tl.constexpr):
    """The tile of a slab at tokens k0 + ``tokens`` and the strip's columns: plain loads from ``x_slab`` (the strip's
    pointers at token 0), or, with DESCRIPTOR, one descriptor load of the box at (row0 + k0, col0) of x viewed as
    (E*K, N)."""
    if DESCRIPTOR:
        return x_desc.load([row0 + k0, col0])
    return tl.load(x_slab + (k0 + tokens)[:, None] * stride_xk, eviction_policy=EVICT)


@triton.jit
def _long_slices_kernel(
    x_ptr, x_desc, q_ptr, s_ptr, E, K, N, stride_xe, stride_xk, stride_qe, stride_qn,
    BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr, PERSISTENT: tl.constexpr,
    L2_HINTS: tl.constexpr, DESCRIPTOR: tl.constexpr, FP8_DTYPE: tl.constexpr, FP8_MAX: tl.constexpr,
    MAN_BITS: tl.constexpr, EMIN: tl.constexpr, FNUZ: tl.constexpr, ROUND_POW2: tl.constexpr, CAST_MODE: tl.constexpr,
):  # fmt: skip
    """Slab (e, strip): x[e, :, strip] (K tokens x BLOCK_N columns, N contiguous) -> q[e*stride_qe + n*stride_qn + k]
    and s[e*N + n]. K must be a multiple of BLOCK_K and N of BLOCK_N (the caller's shapes). PERSISTENT: the grid's
    programs take slabs pid, pid + grid, ... in order; else one slab per program. L2_HINTS: pass 1 loads
    evict-last, pass 2 loads and stores evict-first (the stores alone with DESCRIPTOR). DESCRIPTOR: x is read through
    ``x_desc``, a descriptor of x viewed as (E*K, N) with a BLOCK_K x BLOCK_N box (x is contiguous: stride_xe = K*N)."""
    KEEP: tl.constexpr = "evict_last" if L2_HINTS else ""
    DROP: tl.constexpr = "evict_first" if L2_HINTS else ""
    strips = N // BLOCK_N
    slabs = E * strips
    first = tl.program_id(0)
    step = tl.num_programs(0) if PERSISTENT else slabs
    num_tiles = K // BLOCK_K
    tokens = tl.arange(0, BLOCK_K)
    for slab in range(first, slabs, step):
        e = slab // strips
        col0 = (slab % strips) * BLOCK_N
        cols = col0 + tl.arange(0, BLOCK_N)
        x_slab = x_ptr + e.to(tl.int64) * stride_xe + cols[None, :]
        acc = magnitude_bits(tl.zeros((BLOCK_K, BLOCK_N), dtype=x_ptr.dtype.element_ty))
        for i in tl.range(0, num_tiles, num_stages=STAGES):
            x = _load_tile(x_slab, x_desc, e * K, i * BLOCK_K, tokens, stride_xk, col0, KEEP, DESCRIPTOR)
            acc = tl.maximum(acc, magnitude_bits(x))
        scale = scale_from_amax(amax_of_magnitude_bits(acc, x_ptr.dtype.element_ty, 0), FP8_MAX, ROUND_POW2)
        tl.store(s_ptr + e * N + cols, scale)
        q_slab = q_ptr + e.to(tl.int64) * stride_qe + cols[None, :].to(tl.int64) * stride_qn
        for i in tl.range(0, num_tiles, num_stages=STAGES):
            k0 = (num_tiles - 1 - i) * BLOCK_K  # backwards: the tiles pass 1 read last are likeliest in L2
            ks = k0 + tokens
            x = _load_tile(x_slab, x_desc, e * K, k0, tokens, stride_xk, col0, DROP, DESCRIPTOR)
            q = quantize(x, scale[None, :], FP8_DTYPE, FP8_MAX, MAN_BITS, EMIN, FNUZ, CAST_MODE)
            tl.store(q_slab + ks[:, None], q, eviction_policy=DROP)


_VARIANT = re.compile(
    r"(?P<block_k>\d+)x(?P<block_n>\d+)/w(?P<warps>\d+)/s(?P<stages>\d+)/p(?P<per_sm>\d+)(?P<hints>/h)?"
    r"(?P<descriptor>/d)?"
)


def parse_variant(name: str) -> dict:
    """``256x16/w4/s3/p1[/h][/d]`` -> the launch parameters (BLOCK_K, BLOCK_N, warps, stages, programs per SM, L2
    hints, descriptor loads). A descriptor's box must fit the bulk copy engine: at most DESCRIPTOR_BOX_MAX tokens and
    columns, at least DESCRIPTOR_MIN_BYTES of bf16 columns."""
    match = _VARIANT.fullmatch(name)
    if not match:
        raise ValueError(f"variant {name!r} is not BLOCK_KxBLOCK_N/w<warps>/s<stages>/p<programs per SM>[/h][/d]")
    fields = {k: int(v) for k, v in match.groupdict().items() if k not in ("hints", "descriptor")}
    descriptor = match.group("descriptor") is not None
    box_fits = max(fields["block_k"], fields["block_n"]) <= DESCRIPTOR_BOX_MAX
    if descriptor and not (box_fits and 2 * fields["block_n"] >= DESCRIPTOR_MIN_BYTES):
        raise ValueError(
            f"variant {name!r}: a descriptor box is at most {DESCRIPTOR_BOX_MAX} x {DESCRIPTOR_BOX_MAX} elements and "
            f"at least {DESCRIPTOR_MIN_BYTES} bytes wide"
        )
    return {**fields, "hints": match.group("hints") is not None, "descriptor": descriptor}


def parse_point(point: str) -> tuple[str, tuple[int, int, int]]:
    """``colwise_3d:16x8192x5120`` -> ("colwise_3d", (E, K, N)); ``per_group:16x4096x4096``: E groups of K tokens."""
    kind, _, shape = point.partition(":")
    if kind not in ("colwise_3d", "per_group"):
        raise ValueError(f"point {point!r}: the kind is colwise_3d or per_group")
    e, k, n = (int(v) for v in shape.split("x"))
    return kind, (e, k, n)


def make_input(kind: str, shape: tuple[int, int, int], device: str, seed: int = 0) -> torch.Tensor:
    """x of the point, bf16 normal values: (E, K, N) for colwise_3d, (E*K, N) for per_group; row-major."""
    e, k, n = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((e, k, n), device=device, generator=gen).to(torch.bfloat16)
    return x if kind == "colwise_3d" else x.view(e * k, n)


def uniform_offs(shape: tuple[int, int, int], device: str) -> torch.Tensor:
    e, k, _ = shape
    return torch.arange(k, e * k + 1, k, dtype=torch.int32, device=device)


def reference(kind: str, x: torch.Tensor, shape: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8ref's (q, scales) of the point, e4m3fn, no pow2 rounding; scales flattened to (E*N,)."""
    if kind == "colwise_3d":
        q, s = ref.colwise_3d_scale_and_cast(x, E4, False)
    else:
        q, s = ref.per_group_colwise_scales(x, uniform_offs(shape, x.device.type), E4, False)
    return q, s.reshape(-1)


def sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: a few programs, so that a persistent program walks several slabs


def variant_call(variant: str, kind: str, x: torch.Tensor, shape: tuple[int, int, int]):
    """(call, outputs) of one variant: call launches it into outputs (q, scales), allocated here."""
    v = parse_variant(variant)
    e, k, n = shape
    if k % v["block_k"] or n % v["block_n"]:
        raise ValueError(f"{variant}: K = {k} and N = {n} must be multiples of the tile {v['block_k']}x{v['block_n']}")
    if kind == "colwise_3d":
        q = torch.empty_strided((e, k, n), (k * n, 1, k), dtype=E4, device=x.device)
        stride_qe, stride_qn, stride_xe, stride_xk = k * n, k, k * n, n
    else:
        q = torch.empty_strided((e * k, n), (1, e * k), dtype=E4, device=x.device)
        stride_qe, stride_qn, stride_xe, stride_xk = k, e * k, k * n, n
    s = torch.empty((e * n,), dtype=torch.float32, device=x.device)
    slabs = e * (n // v["block_n"])
    grid = (min(slabs, v["per_sm"] * sm_count(x.device)) if v["per_sm"] else slabs,)
    constants = fp8_constexprs(E4, False, backend_for(x.device.type).cast_mode)

    x_desc = TensorDescriptor.from_tensor(x.view(e * k, n), [v["block_k"], v["block_n"]]) if v["descriptor"] else x

    def call():
        return _long_slices_kernel[grid](
            x, x_desc, q, s, e, k, n, stride_xe, stride_xk, stride_qe, stride_qn,
            BLOCK_K=v["block_k"], BLOCK_N=v["block_n"], STAGES=v["stages"], PERSISTENT=v["per_sm"] > 0,
            L2_HINTS=v["hints"], DESCRIPTOR=v["descriptor"], **constants, num_warps=v["warps"],
        )  # fmt: skip

    return call, (q, s)


def slabs_in_flight(compiled, variant: str, shape: tuple[int, int, int], sms: int) -> tuple[int, float]:
    """(programs per SM, MB of slabs in flight) of a launched variant: its compiled kernel's registers and shared
    memory give the programs an SM holds (benchmarks/residency.py), each resident program works on one slab of
    K x BLOCK_N bf16. Set beside the L2 size, this is what decides whether pass 2 re-reads DRAM."""
    from residency import blocks_per_sm

    v = parse_variant(variant)
    e, k, n = shape
    per_sm = blocks_per_sm(compiled.n_regs, v["warps"], compiled.metadata.shared)
    slabs = e * (n // v["block_n"])
    grid = min(slabs, v["per_sm"] * sms) if v["per_sm"] else slabs
    resident = min(grid, per_sm * sms)
    return per_sm, resident * k * v["block_n"] * 2 / 1e6


def _same(q: torch.Tensor, s: torch.Tensor, expected) -> bool:
    """Codes and scales bit for bit, NaN as a class (fp8ref.testing.same_bits), q's strides included. Equal bytes
    are checked on the device first: same_bits compares on the CPU, seconds per call at the bench shapes."""
    q_ref, s_ref = expected
    if q.stride() != q_ref.stride():
        return False
    pairs = ((q.view(torch.uint8), q_ref.view(torch.uint8)), (s.view(torch.int32), s_ref.view(torch.int32)))
    if all(torch.equal(a, b) for a, b in pairs):
        return True
    return bool(same_bits(q, q_ref).all()) and bool(same_bits(s, s_ref).all())


def check(call, outputs, expected) -> bool:
    """Run ``call`` on poisoned outputs; True when codes and scales are fp8ref's (:func:`_same`)."""
    q, s = outputs
    q.view(torch.uint8).fill_(POISON_BYTES[0])
    s.view(torch.int32).fill_(-1)
    call()
    return _same(q, s, expected)


def checked_call(variant: str, kind: str, x: torch.Tensor, shape: tuple[int, int, int], expected, sms: int):
    """(call, bitwise, programs per SM, MB of slabs in flight) of a variant or of ``op``, its outputs checked against
    ``expected`` (probe_timing.check_and_time's ``prepare``); the op's residency is not this probe's: ``-``."""
    if variant == "op":
        call, op_check = op_call(kind, x, shape)
        return call, op_check(expected), "-", "-"
    call, outputs = variant_call(variant, kind, x, shape)
    ok = check(call, outputs, expected)
    per_sm, megabytes = slabs_in_flight(call(), variant, shape, sms)
    return call, ok, per_sm, f"{megabytes:.0f}"


def op_call(kind: str, x: torch.Tensor, shape: tuple[int, int, int]):
    """fp8moe's own op at the point (autotuned as a user's call is), and its check against fp8ref."""
    offs = uniform_offs(shape, x.device.type) if kind == "per_group" else None

    def call():
        if kind == "colwise_3d":
            return fp8moe.colwise_3d_scale_and_cast(x, E4, False)
        return fp8moe.per_group_colwise_scales(x, offs, E4, False)

    def op_check(expected) -> bool:
        with poisoned_allocations(POISON_BYTES[0]):
            q, s = call()
        return _same(q, s.reshape(-1), expected)

    return call, op_check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the Markdown table here")
    parser.add_argument("--points", default="long", help="kind:ExKxN, comma-separated, or a set: long, short")
    parser.add_argument("--variants", default="long", help="variants, comma-separated, or a set: long, short")
    args = parser.parse_args(argv)
    points = POINT_SETS.get(args.points) or args.points.split(",")
    variants = VARIANT_SETS.get(args.variants) or args.variants.split(",")
    for variant in variants:
        parse_variant(variant)  # a typo stops the run before the GPU does anything
    from probe_timing import check_and_time, timing_cells

    from fp8moe.bench import copy_bandwidth_gbps

    bw = copy_bandwidth_gbps()
    lines = [
        f"# long slices: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
        f"copy bandwidth {bw:.0f} GB/s, {sm_count(torch.device('cuda'))} SMs",
        "",
        "| point | variant | us | % of copy | x op | programs per SM | slabs in flight (MB) | bitwise |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    print("\n".join(lines), flush=True)
    status = 0
    sms = sm_count(torch.device("cuda"))
    for point in points:
        kind, shape = parse_point(point)
        e, k, n = shape
        x = make_input(kind, shape, "cuda")
        expected = reference(kind, x, shape)
        ideal_bytes = 3 * e * k * n + 4 * e * n
        op_us = None
        for variant in itertools.chain(("op",), variants):
            timed = check_and_time(f"{point} {variant}", partial(checked_call, variant, kind, x, shape, expected, sms))
            if timed is None:
                status = 1
                continue
            us, ok, (per_sm, megabytes) = timed
            status |= 0 if ok else 1
            op_us = us if variant == "op" else op_us
            cells = timing_cells(us, ideal_bytes, bw, op_us)
            row = f"| {point} | {variant} | {cells} | {per_sm} | {megabytes} | {'yes' if ok else 'NO'} |"
            print(row, flush=True)
            lines.append(row)
        del x, expected
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
