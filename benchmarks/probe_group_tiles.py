"""Where the tile kernel's time goes: each point timed with the tile kernel as launched, with every multi-chunk slice
sent down the long-slice path (coop_limit 1: no tile waits, long slices read twice), and with the span kernel; all
in one process, CUDA-graph replay, each output checked against the span kernel's bytes first.

    python benchmarks/probe_group_tiles.py
"""

from __future__ import annotations

import torch

import fp8moe
from fp8moe import configs, replay
from fp8moe.bench import ISSUE11_POINTS, copy_bandwidth_gbps, ideal_bytes, make_inputs, same_outputs
from fp8moe.kernels import _group_tiles
from fp8ref.contracts import contract

E4 = torch.float8_e4m3fn
SELECT = [0, 1, 3, 4, 6, 8, 9, 11]  # rowwise G16/G64/random; colwise G64, G128, G16, random; dual G64


def main() -> None:
    from triton.testing import do_bench_cudagraph

    copy = copy_bandwidth_gbps()
    print(f"copy bandwidth {copy:.0f} GB/s")
    default_limit = _group_tiles.coop_limit
    for index in SELECT:
        point = ISSUE11_POINTS[index]
        c = contract(point.op)
        xs, offs = make_inputs(c, point)
        kernel = getattr(fp8moe, point.op)
        args = {"fp8_dtype": E4, "round_scales_to_power_of_2": False}
        row = []
        expected = None
        for label, kind, limit in (("span", "span", None), ("tiles", "tiles", None), ("tiles-limit1", "tiles", 1)):
            configs.PER_GROUP_KERNEL.update(dict.fromkeys(configs.PER_GROUP_KERNEL, kind))
            _group_tiles.coop_limit = default_limit if limit is None else (lambda b, d, n=limit: n)
            replay.forget()
            out = c.call(kernel, xs, offs, **args)
            ok = True if expected is None else same_outputs(out, expected)
            expected = expected if expected is not None else out
            us = do_bench_cudagraph(lambda c=c, k=kernel, x=xs, o=offs, a=args: c.call(k, x, o, **a), rep=30) * 1e3
            pct = ideal_bytes(c, point.shape, point.groups) / (us * 1e-6) / 1e9 / copy * 100
            row.append(f"{label} {us:.1f} us {pct:.0f}%{'' if ok else ' WRONG'}")
        print(f"{point.op} {point.shape} G={point.groups} {point.offs}: " + " | ".join(row), flush=True)
    _group_tiles.coop_limit = default_limit


if __name__ == "__main__":
    main()
