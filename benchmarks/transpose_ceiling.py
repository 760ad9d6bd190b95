"""How fast can Triton cast bf16 -> fp8 while transposing, by mechanism? The ceiling of the transposing ops.

    python benchmarks/transpose_ceiling.py --out results.md      # on a CUDA GPU (sm_90 for the TMA rows)

The transposing ops (per-group colwise, the dual op, colwise 3D on row-major input) read x (Ktot, N) along N and
write q^T (N, Ktot) along Ktot. They sit at 53-62% of copy bandwidth on the H200 while the row kernels over the same
bytes reach 88-103% (benchmarks/results/h200-bench-2026-12-01-s6-summary.md). This script times stripped-down
kernels that do only the data movement of those ops: with a constant scale (one pass, ``--slices 0``), or with a
per-slice amax over fixed-size token slices, in two passes as the per-group kernel does for a group (slice longer
than the tile) or read once with the slice held in registers (slice = the tile's token extent). Each way Triton
offers to move a tile:

- ``ptr``: pointer loads and stores; ``tl.trans`` of the fp8 tile, which Triton turns into a layout conversion
  through shared memory;
- ``join4``: fp8moe's current word packing (four interleaved token tiles joined before the conversion);
- ``tma``: host-made tensor descriptors (the Hopper bulk tensor copy engine) for the load and the store, the
  transposition done on the way from registers into the store's shared-memory box;
- ``ptr+tma`` and ``tma+ptr``: one side each;
- ``rows``: the non-transposing control (x and q both along N).

Every kernel's output is checked against torch before it is timed (all bytes; ``bitwise`` column). Times are
CUDA-graph medians; percentages are of ideal bytes (2 read + 1 written per element) over the device copy
bandwidth timed in the same run (fp8moe.bench.copy_bandwidth_gbps).
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch
import triton
import triton.language as tl

MODES = {"ptr": 0, "tma": 1, "ptr+tma": 2, "tma+ptr": 3, "join4": 4, "rows": 5}


@triton.jit
def _load_tile(x_ptr, x_desc, k0, n0, N, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr):
    """x[k0:k0+BLOCK_K, n0:n0+BLOCK_N] as (BLOCK_K, BLOCK_N)."""
    if TMA:
        return x_desc.load([k0, n0])
    ks = k0 + tl.arange(0, BLOCK_K)
    ns = n0 + tl.arange(0, BLOCK_N)
    return tl.load(x_ptr + ks[:, None] * N + ns[None, :])


@triton.jit
def _store_tile_t(q_ptr, q_desc, q, k0, n0, KT, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr):
    """q^T[n0:n0+BLOCK_N, k0:k0+BLOCK_K] = q.T for q (BLOCK_K, BLOCK_N)."""
    qt = tl.trans(q)
    if TMA:
        q_desc.store([n0, k0], qt)
    else:
        ks = k0 + tl.arange(0, BLOCK_K)
        ns = n0 + tl.arange(0, BLOCK_N)
        tl.store(q_ptr + ns[:, None] * KT + ks[None, :], qt)


@triton.jit
def _store_join4_t(q_ptr, x_ptr, k0, n0, N, KT, scale, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """The join4 tile: four token tiles k0 + 4w + j, scaled by ``scale`` (BLOCK_N,), cast, joined so four
    consecutive tokens sit in one thread, stored as q^T."""
    BW: tl.constexpr = BLOCK_K // 4
    ks = k0 + 4 * tl.arange(0, BW)
    ns = n0 + tl.arange(0, BLOCK_N)
    x0 = tl.load(x_ptr + ks[:, None] * N + ns[None, :])
    x1 = tl.load(x_ptr + (ks + 1)[:, None] * N + ns[None, :])
    x2 = tl.load(x_ptr + (ks + 2)[:, None] * N + ns[None, :])
    x3 = tl.load(x_ptr + (ks + 3)[:, None] * N + ns[None, :])
    t0 = tl.trans(x0.to(tl.float32) * scale[None, :])
    t1 = tl.trans(x1.to(tl.float32) * scale[None, :])
    t2 = tl.trans(x2.to(tl.float32) * scale[None, :])
    t3 = tl.trans(x3.to(tl.float32) * scale[None, :])
    q = tl.reshape(tl.join(tl.join(t0, t2), tl.join(t1, t3)).to(tl.float8e4nv), (BLOCK_N, BLOCK_K))
    kk = k0 + tl.arange(0, BLOCK_K)
    tl.store(q_ptr + ns[:, None] * KT + kk[None, :], q)


@triton.jit
def _store_scaled(
    q_ptr, q_desc, x, k0, n0, N, KT, scale, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr
):  # fmt: skip
    """Cast the loaded tile x (BLOCK_K, BLOCK_N) times ``scale`` (BLOCK_N,) and store it: q^T, or q (rows mode)."""
    q = (x.to(tl.float32) * scale[None, :]).to(tl.float8e4nv)
    if MODE == 5:
        ks = k0 + tl.arange(0, BLOCK_K)
        ns = n0 + tl.arange(0, BLOCK_N)
        tl.store(q_ptr + ks[:, None] * N + ns[None, :], q)
    else:
        _store_tile_t(q_ptr, q_desc, q, k0, n0, KT, BLOCK_K, BLOCK_N, MODE == 1 or MODE == 2)


@triton.jit
def _quantize_tile(
    x_ptr, q_ptr, x_desc, q_desc, k0, n0, N, KT, scale, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
    MODE: tl.constexpr,
):  # fmt: skip
    """Load tile (k0, n0), scale, cast and store it the way MODE does."""
    if MODE == 4:
        _store_join4_t(q_ptr, x_ptr, k0, n0, N, KT, scale, BLOCK_K, BLOCK_N)
    else:
        x = _load_tile(x_ptr, x_desc, k0, n0, N, BLOCK_K, BLOCK_N, MODE == 1 or MODE == 3)
        _store_scaled(q_ptr, q_desc, x, k0, n0, N, KT, scale, BLOCK_K, BLOCK_N, MODE)


@triton.jit
def _slice_scale(acc, BLOCK_N: tl.constexpr):
    """448 / max over the slice of the running |x| maximum ``acc`` (BLOCK_K, BLOCK_N), correctly rounded."""
    return tl.math.div_rn(tl.full((BLOCK_N,), 448.0, tl.float32), tl.maximum(tl.max(acc, 0), 1e-12))


@triton.jit
def _cast_t_kernel(
    x_ptr, q_ptr, x_desc, q_desc, KT, N,
    SLICE: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr,
    COLUMNS_FASTEST: tl.constexpr = False,
):  # fmt: skip
    """Program (slice s, column block): scale = 448 / max|x| over its SLICE tokens, then its tiles cast and stored.
    SLICE == 0: one pass at the constant scale 64; SLICE == BLOCK_K: the slice is one tile, read once and kept in
    registers (join4 stores it like ptr there); SLICE > BLOCK_K: two passes, the second walking backwards. MODE:
    see MODES. Grid (slices, column blocks), or with COLUMNS_FASTEST (column blocks, slices): fp8moe's per-group
    kernel orders its grid that way by default (row blocks of the (N, Ktot) view fastest)."""
    if COLUMNS_FASTEST:
        pid_s = tl.program_id(1)
        n0 = tl.program_id(0) * BLOCK_N
    else:
        pid_s = tl.program_id(0)
        n0 = tl.program_id(1) * BLOCK_N
    TMA_LOAD: tl.constexpr = MODE == 1 or MODE == 3
    if SLICE == 0:
        scale = tl.full((BLOCK_N,), 64.0, tl.float32)
        _quantize_tile(x_ptr, q_ptr, x_desc, q_desc, pid_s * BLOCK_K, n0, N, KT, scale, BLOCK_K, BLOCK_N, MODE)
    elif SLICE == BLOCK_K:
        k0 = pid_s * BLOCK_K
        x = _load_tile(x_ptr, x_desc, k0, n0, N, BLOCK_K, BLOCK_N, TMA_LOAD)
        scale = _slice_scale(tl.abs(x.to(tl.float32)), BLOCK_N)
        _store_scaled(q_ptr, q_desc, x, k0, n0, N, KT, scale, BLOCK_K, BLOCK_N, 0 if MODE == 4 else MODE)
    else:
        base = pid_s * SLICE
        acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
        for k0 in range(base, base + SLICE, BLOCK_K):
            x = _load_tile(x_ptr, x_desc, k0, n0, N, BLOCK_K, BLOCK_N, TMA_LOAD)
            acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
        scale = _slice_scale(acc, BLOCK_N)
        for i in range(SLICE // BLOCK_K):
            k0 = base + SLICE - (i + 1) * BLOCK_K  # backwards: the latest tiles are likeliest in L2
            _quantize_tile(x_ptr, q_ptr, x_desc, q_desc, k0, n0, N, KT, scale, BLOCK_K, BLOCK_N, MODE)


def expected(x: torch.Tensor, slice_len: int, mode: str) -> torch.Tensor:
    """What the kernel must write: q^T (N, KT), or q (KT, N) for the rows control."""
    xf = x.float()
    if slice_len == 0:
        scale = torch.full((1, x.shape[1]), 64.0, device=x.device)
    else:
        amax = xf.abs().view(-1, slice_len, x.shape[1]).amax(dim=1, keepdim=True).clamp(min=1e-12)
        scale = (448.0 / amax.double()).float()  # correctly rounded, as div_rn: torch's 448.0 / amax is
        # amax.reciprocal() * 448, two roundings (27% of 1M random f32 quotients differ, torch 2.13 CPU)
    # clamped: torch 2.11's CUDA cast turns an x * scale one ulp over 448 into NaN, the kernels' satfinite into 448
    q = (xf.view(-1, slice_len or 1, x.shape[1]) * scale).clamp(-448, 448).view_as(xf).to(torch.float8_e4m3fn)
    return q if mode == "rows" else q.t().contiguous()


def run_point(x, slice_len, block_k, block_n, warps, mode):
    """(us, bitwise ok) of one variant; raises where this Triton cannot build the mode (main reports it, goes on)."""
    from triton.testing import do_bench_cudagraph
    from triton.tools.tensor_descriptor import TensorDescriptor

    kt, n = x.shape
    q = torch.empty((kt, n) if mode == "rows" else (n, kt), dtype=torch.float8_e4m3fn, device=x.device)
    x_desc = TensorDescriptor.from_tensor(x, [block_k, block_n])
    q_desc = TensorDescriptor.from_tensor(q, [block_n, block_k]) if mode != "rows" else x_desc
    slices = kt // (slice_len or block_k)

    def call():
        _cast_t_kernel[(slices, n // block_n)](
            x, q, x_desc, q_desc, kt, n, SLICE=slice_len, BLOCK_K=block_k, BLOCK_N=block_n, MODE=MODES[mode],
            num_warps=warps,
        )  # fmt: skip

    q.view(torch.uint8).fill_(0xAA)
    call()
    ok = torch.equal(q.view(torch.uint8), expected(x, slice_len, mode).view(torch.uint8))
    us = do_bench_cudagraph(call, rep=30, return_mode="median") * 1e3
    return us, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="Markdown table path")
    parser.add_argument("--shapes", default="16640x5120", help="KTxN, comma-separated")
    parser.add_argument("--slices", default="0,256", help="tokens per slice; 0 = one pass, constant scale")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--tiles", default="64x64/w4,128x64/w4,64x128/w4,128x128/w8,32x128/w4", help="BKxBN/wW")
    args = parser.parse_args(argv)
    from fp8moe.bench import copy_bandwidth_gbps

    bw = copy_bandwidth_gbps()
    tiles = [(*map(int, t.split("/w")[0].split("x")), int(t.split("/w")[1])) for t in args.tiles.split(",")]
    lines = [
        f"# transpose ceiling: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__};"
        f" copy bandwidth {bw:.0f} GB/s",
        "",
        "| shape | slice | mode | tile | us | % of copy | bitwise |",
        "|---|---:|---|---|---:|---:|---|",
    ]
    best: dict[tuple, tuple] = {}
    g = torch.Generator(device="cuda").manual_seed(0)
    for shape in args.shapes.split(","):
        kt, n = (int(v) for v in shape.split("x"))
        x = torch.randn(kt, n, device="cuda", generator=g).to(torch.bfloat16)
        for slice_len, mode, (bk, bn, w) in itertools.product(
            (int(s) for s in args.slices.split(",")), args.modes.split(","), tiles
        ):
            if slice_len and (slice_len % bk or kt % slice_len):
                continue
            try:
                us, ok = run_point(x, slice_len, bk, bn, w, mode)
            except Exception as exc:  # a mode this Triton cannot build: say so, go on
                print(f"{shape} {slice_len} {mode} {bk}x{bn}/w{w}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
                continue
            pct = 100 * 3 * kt * n / (us * 1e-6) / 1e9 / bw
            row = (
                f"| {shape} | {slice_len} | {mode} | {bk}x{bn}/w{w} | {us:.1f} | {pct:.0f}% | {'yes' if ok else 'NO'} |"
            )
            print(row, flush=True)
            lines.append(row)
            key = (shape, slice_len, mode)
            if ok and (key not in best or us < best[key][0]):
                best[key] = (us, pct, f"{bk}x{bn}/w{w}")
    lines += ["", "Best bitwise tile per (shape, slice, mode):", "", "| shape | slice | mode | tile | us | % of copy |"]
    lines.append("|---|---:|---|---|---:|---:|")
    for (shape, slice_len, mode), (us, pct, tile) in best.items():
        lines.append(f"| {shape} | {slice_len} | {mode} | {tile} | {us:.1f} | {pct:.0f}% |")
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[-len(best) - 2 :]))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
