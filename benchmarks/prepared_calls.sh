#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1   # Nsight Compute, colwise and dual ops at the size points (about 4 minutes)
#   bash benchmarks/prepared_calls.sh 2   # Nsight Compute, rowwise op at the size points (about 2 minutes)
#   bash benchmarks/prepared_calls.sh 3   # the chunked kernel beside the span kernel at the size points (2 minutes)
#   bash benchmarks/prepared_calls.sh 4   # the per-group bench (about 3 minutes)
#
# Label the files by the device they ran on (h200-s<N>-call<M>-..., h100-...).
set -uo pipefail
here="$(dirname "$0")"

# Calls 1 and 2: why do uneven group sizes cost? On the H200 in session 29 (h200-s29-call2-sizes-configs.md, read
# with tune_configs.py --layout-ratios) aligned16's sizes spread apart by 240 tokens, with no group past 496, ran
# 1.01-1.33x the aligned16 time on the same tiles, against random16's 1.08-1.35x; spread 64 and 128 ran 0.95-1.16x.
# The grid model, which runs programs at a fixed speed, predicted 0.94-1.04x for every spread. These calls measure
# DRAM bytes, L2 hit rate, achieved occupancy and stall reasons at the seven layouts of each G = 64 random16 point
# (tune_configs.py SIZE_POINTS: aligned16, its three spreads, random16 and its sizes sorted both ways), each shape
# under the tile the autotuner picks at its aligned16 point: whether the spread layouts move more bytes (pass 2
# re-reading long groups from DRAM) or wait longer for the same bytes.
# --only matches the op name as a substring: per_group_colwise_scales takes the dual op too.
# Call 3 asks the same question another way: the chunked kernel (fp8moe.kernels._group_chunks) cuts every group
# into chunks of at most CHUNK_TILES x BLOCK_K tokens, so no chunk's work grows with its group beyond that. If the
# span kernel's time grows with the spread and the chunked kernel's does not (each over its own aligned16 time), the
# size of a program's group is what costs. GROUP_CHUNKS.cuda indices 5 (64x64/w4, 4 tiles: 256-token chunks, so
# spread240's 496-token groups take two) and 12 (64x128/w8, 4 tiles: 512-token chunks, L2 hints); both are for
# transposing views, so only the colwise and dual points run (the rowwise view's chunked configs take 2048-token
# chunks, longer than any group here).
case "${1:?which call: 1 to 4}" in
  1)  # 14 points. Files: env.txt, ncu.csv, ncu.md, ncu.err.
    STEPS="profile" PROFILE_TIMEOUT=360 PROFILE_ARGS="--points sizes --only per_group_colwise_scales" \
      bash "$here/gpu_session.sh" ;;
  2)  # 7 points. Files: env.txt, ncu.csv, ncu.md, ncu.err.
    STEPS="profile" PROFILE_TIMEOUT=240 PROFILE_ARGS="--points sizes --only per_group_rowwise_scales" \
      bash "$here/gpu_session.sh" ;;
  3)  # 14 points, the span kernel (autotuned at each shape's aligned16 point) and 2 chunked configs, each chunked
      # output checked against the span kernel's bytes. Files: env.txt, kernels.log.
    source "$here/device_setup.sh"
    timeout 300 python3 benchmarks/probe_per_group_kernels.py --points sizes --configs 5,12 --select per_group_colwise \
      >"$OUT/kernels.log" 2>&1
    echo "kernels exit $? after ${SECONDS}s" >>"$OUT/env.txt" ;;
  4)  # the per-group bench, each jagged point tuned on its own layout. Files: env.txt, bench.{md,json,png,log}.
    STEPS="bench" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1 to 4" >&2; exit 2 ;;
esac
