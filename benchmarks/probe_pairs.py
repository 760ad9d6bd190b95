"""The fused pairs against their two ops one after the other, on the H200, CUDA-graph replay, every output checked
against the two ops' bytes first.

    python benchmarks/probe_pairs.py [--shapes E,K,N;...] [--activations M,K,G;...] [--sweep]

- The weight pair (fp8moe.colwise_3d_and_transpose_rhs) per (E, K, N) and expert layout: colwise_3d_scale_and_cast
  and rowwise_3d_transpose_rhs (its default method), their sum, the fused call.
- The activation pair (fp8moe.rowwise_and_per_group_colwise) per (M, K, G), routing-like groups
  (fp8ref.grouped_mm.skewed_offs, multiples of 16): rowwise_2d_scale_and_cast and per_group_colwise_scales (the
  default per-group kernel), their sum, the fused call.

Each row gives the speed-up and the fused call's % of copy bandwidth for the bytes both ops move at their roofline
(x read twice, both fp8 outputs written once). ``--sweep`` also times the weight pair with each candidate of
fp8moe.configs.PAIR_AMAX forced (the cast kernel autotuned) and each of PAIR_CAST forced.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

import fp8moe
from fp8moe import configs, replay
from fp8moe.bench import copy_bandwidth_gbps
from fp8ref.grouped_mm import skewed_offs

E4 = torch.float8_e4m3fn
#: Issue #11's four 3D shapes, then the weights of the grouped-GEMM step's shapes not among them (SPEC §7).
SHAPES = ((1, 8192, 5120), (16, 8192, 5120), (64, 2048, 1408), (128, 5120, 8192), (8, 7168, 2048), (16, 5120, 8192))
#: A and grad_out of the grouped-GEMM step's four shapes (M, K or N, E).
ACTIVATIONS = (
    (16384, 7168, 8), (16384, 2048, 8), (16640, 2048, 64), (16640, 1408, 64),
    (32768, 5120, 16), (32768, 8192, 16), (65536, 4096, 8), (65536, 14336, 8),
)  # fmt: skip


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int32)


def _same(a: tuple, b: tuple) -> bool:
    """Bitwise, NaN-free inputs: every byte and stride equal."""
    return all(x.stride() == y.stride() and torch.equal(_bits(x), _bits(y)) for x, y in zip(a, b, strict=True))


def _label(config) -> str:
    """A pair kernel's config: tile and warps, and chunk length in tiles."""
    if config is None:
        return "-"
    return f"{configs.describe(config)}/c{config.kwargs['CHUNK_TILES']}"


def _forced(name: str, candidate) -> None:
    """Make ``name`` (PAIR_AMAX or PAIR_CAST) autotune over ``candidate`` alone (a fresh tuner and cache key)."""
    original = _ORIGINAL[name]
    cands = original.cuda if candidate is None else (candidate,)
    suffix = "" if candidate is None else f"-forced-{_label(candidate)}"
    setattr(configs, name, dataclasses.replace(original, name=original.name + suffix, cuda=cands))
    replay.forget()


_ORIGINAL = {"PAIR_AMAX": configs.PAIR_AMAX, "PAIR_CAST": configs.PAIR_CAST}


def main(argv: list[str] | None = None) -> None:
    from triton.testing import do_bench_cudagraph

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=None, help="E,K,N;E,K,N... instead of SHAPES")
    parser.add_argument("--activations", default=None, help="M,K,G;M,K,G... instead of ACTIVATIONS ('' for none)")
    parser.add_argument("--sweep", action="store_true", help="also time every amax and cast candidate forced")
    args = parser.parse_args(argv)
    shapes = SHAPES
    if args.shapes is not None:
        shapes = [tuple(map(int, s.split(","))) for s in args.shapes.split(";") if s]
    activations = ACTIVATIONS
    if args.activations is not None:
        activations = [tuple(map(int, a.split(","))) for a in args.activations.split(";") if a]

    def us(fn) -> float:
        return do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3

    copy = copy_bandwidth_gbps()
    print(f"copy bandwidth {copy:.0f} GB/s; {torch.cuda.get_device_name()}", flush=True)
    print(
        "| E, K, N | layout | colwise-3D us | transpose us | sum us | fused us | speed-up | fused % of copy | bitwise |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|", flush=True)
    sweeps = []
    for shape in shapes:
        e, k, n = shape
        x_row = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        for layout in ("row_major", "col_major"):
            t0 = time.time()
            x = x_row if layout == "row_major" else x_row.mT.contiguous().mT
            separate = (*fp8moe.colwise_3d_scale_and_cast(x, E4), *fp8moe.rowwise_3d_transpose_rhs(x, E4))
            fused = fp8moe.colwise_3d_and_transpose_rhs(x, E4)
            ok = _same(fused, separate)
            del separate, fused
            t_c = us(lambda x=x: fp8moe.colwise_3d_scale_and_cast(x, E4))
            t_t = us(lambda x=x: fp8moe.rowwise_3d_transpose_rhs(x, E4))
            t_f = us(lambda x=x: fp8moe.colwise_3d_and_transpose_rhs(x, E4))
            ideal = e * k * n * (2 * x.element_size() + 2)
            print(
                f"| {e}, {k}, {n} | {layout} | {t_c:.1f} | {t_t:.1f} | {t_c + t_t:.1f} | {t_f:.1f} | "
                f"{(t_c + t_t) / t_f:.2f}x | {100 * ideal / (t_f * 1e-6) / 1e9 / copy:.0f}% | "
                f"{'yes' if ok else 'NO'} | ({time.time() - t0:.0f} s; amax "
                f"{_label(configs.LAST_CONFIG.get(configs.PAIR_AMAX.name))}, cast "
                f"{_label(configs.LAST_CONFIG.get(configs.PAIR_CAST.name))})",
                flush=True,
            )
            if args.sweep:
                for name in ("PAIR_AMAX", "PAIR_CAST"):
                    for cand in _ORIGINAL[name].cuda:
                        _forced(name, cand)
                        t = us(lambda x=x: fp8moe.colwise_3d_and_transpose_rhs(x, E4))
                        sweeps.append(f"| {e}, {k}, {n} | {layout} | {name} | {_label(cand)} | {t:.1f} |")
                    _forced(name, None)
            del x
        del x_row
        torch.cuda.empty_cache()
    print(
        "\n| M, K, G | rowwise us | per-group colwise us | sum us | fused us | speed-up | fused % of copy | bitwise |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|", flush=True)
    for m, k, groups in activations:
        t0 = time.time()
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        offs = skewed_offs(m, groups, seed=1, device="cuda")
        separate = (*fp8moe.rowwise_2d_scale_and_cast(x, E4), *fp8moe.per_group_colwise_scales(x, offs, E4))
        fused = fp8moe.rowwise_and_per_group_colwise(x, offs, E4)
        ok = _same(fused, separate)
        del separate, fused
        t_r = us(lambda x=x: fp8moe.rowwise_2d_scale_and_cast(x, E4))
        t_c = us(lambda x=x, offs=offs: fp8moe.per_group_colwise_scales(x, offs, E4))
        t_f = us(lambda x=x, offs=offs: fp8moe.rowwise_and_per_group_colwise(x, offs, E4))
        ideal = m * k * (2 * x.element_size() + 2)
        print(
            f"| {m}, {k}, {groups} | {t_r:.1f} | {t_c:.1f} | {t_r + t_c:.1f} | {t_f:.1f} | {(t_r + t_c) / t_f:.2f}x | "
            f"{100 * ideal / (t_f * 1e-6) / 1e9 / copy:.0f}% | {'yes' if ok else 'NO'} | ({time.time() - t0:.0f} s; "
            f"amax {_label(configs.LAST_CONFIG.get(configs.JAGGED_PAIR_AMAX.name))}, cast "
            f"{_label(configs.LAST_CONFIG.get(configs.JAGGED_PAIR_CAST.name))})",
            flush=True,
        )
        del x
        torch.cuda.empty_cache()
    if sweeps:
        print("\nForced candidates (the other kernel autotuned), fused call us:\n")
        print("| E, K, N | layout | kernel | config | us |\n|---|---|---|---|---:|")
        print("\n".join(sweeps), flush=True)


if __name__ == "__main__":
    main()
