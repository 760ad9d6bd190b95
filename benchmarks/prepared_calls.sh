#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1   # the whole GPU suite (about 7 minutes on an H200, 8 on an H100)
#   bash benchmarks/prepared_calls.sh 2   # the size-spread points with the candidates forced (about 4 minutes)
#   bash benchmarks/prepared_calls.sh 3   # DRAM bytes and stalls of the group-order points (about 4 minutes)
#   bash benchmarks/prepared_calls.sh 4   # the per-group bench (about 3 minutes)
#   bash benchmarks/prepared_calls.sh 5   # the /h (LOOP_HALVES) tiles beside their sources at the per-group points
#   bash benchmarks/prepared_calls.sh 6   # colwise G = 64 at column counts that fill the last wave differently
#
# Label the files by the device they ran on (h200-s<N>-call<M>-..., h100-...).
# PREPARED_PRINT=1 prints the candidate lists of calls 2, 5 and 6 (tune_configs --candidates arguments, one per line)
# instead of running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the
# device.
set -uo pipefail
here="$(dirname "$0")"

# Calls 2 and 3: what do random group sizes cost? At the same tiles random16 (random multiples of 16) ran 1.08-1.49x
# its aligned16 time on the H200 (h200-s27-call2-configs.md). Four explanations are out, each by a committed
# measurement (benchmarks/results/issue11-misses.md, "Random group sizes"): the grid's imbalance with row blocks
# fastest (the sizes sorted largest first ran 0.98-1.06x random16, h100-s27-call5-order-configs.md); with groups
# fastest the grid model does charge a 1040-token group 1.14-1.33x; the one-read path's share (tiles that send
# every group through the two-pass loop, /t, pay 1.09-1.37x too); L2 misses in pass 2 (colwise at `random`, which
# shares random16's draws and so its groups of up to 1041 tokens, read 69.4 MB from DRAM against aligned16's 68.3,
# h200-s18-call4-ncu.md); and group starts off 32- or 128-byte boundaries (aligned16 has as many: 32 of 64 starts on
# a multiple of 32 tokens, random16 35).
# Call 2 times the candidates at aligned16's sizes spread apart by 64, 128 and 240 tokens (fp8ref.layouts
# SIZE_SPREAD; 240 gives random16's spread with no group past 496) beside aligned16, random16 and its sorted orders
# (tune_configs.py --points sizes): a time that grows with the spread says uneven sizes cost, whatever their order;
# spread240 near aligned16 puts the cost in random16's longest groups.
# Call 3 measures DRAM bytes, L2 hit rate and stalls at the order points (profile_kernels.py --points order), the
# first such numbers for the rowwise and dual ops at random sizes.
P="32x128/w8/g/t,32x128/w8/t,32x128/w8/g,32x128/w8,64x128/w4/g,64x128/w4,32x128/w4/g/o256,32x128/w4/o256"
D="32x128/w4/g,32x128/w4,64x64/w4/g,64x64/w4,64x64/w4/g/t,64x64/w4/t"
sizes="per_group_scales=$P per_group_colwise_scales_dual=$D"

# Call 5: LOOP_HALVES (/h, fp8moe.kernels._per_group.quantize_group_rows; new in session 28, bitwise in the CPU
# tests, never timed). The two-pass loop takes a program's rows in two halves, so beside the full one-read tile it
# holds three half tiles: compiled for sm_90 under triton 3.6 (benchmarks/results/cpu-sm90-registers-s28.md) the
# dual op's 64x64/w4/g and 32x128/w4/g drop to 128 registers (3 -> 4 programs per SM), its 64x128/w8/g from 138 to
# 128 (1 -> 2 programs of 8 warps), and rowwise 64x128/w4 to 116 (3 -> 4). The largest factor the one-read gap
# ladder leaves on the H200 is the loop's registers beside the one-read path (1.15-1.21x), and the dual op is at
# 69-74% of copy. Each /h tile is timed beside its source at the 17 per-group points of issue #11.
HP="64x128/w4,64x128/w4/h,64x128/w4/g,64x128/w4/g/h,64x128/w4/g/o256/l,64x128/w4/g/o256/h/l,64x64/w4/g,64x64/w4/g/h"
HD="64x64/w4/g,64x64/w4/g/h,32x128/w4/g,32x128/w4/g/h,128x32/w4/g,128x32/w4/g/h,64x128/w8/g,64x128/w8/g/h"
halves="per_group_scales=$HP per_group_colwise_scales_dual=$HD"

# Call 6: does the last, partial wave of programs cost the colwise op at 16640x2048 G = 64? 64-row tiles make 2048
# programs there, 5.17 waves of the 396 that 3 programs per SM hold; the stripped one-read ceiling reaches only
# 79-83% of copy at that shape against 87-90% at 16640x5120. tune_configs.py --points waves times the op at 1792,
# 2048, 2304, 2368 and 2560 columns (WAVE_POINTS, where the grid model's predictions are; read the table with
# tune_configs.py --tile-percentages): if programs run at a fixed speed, 2304 columns take about the time of 2048. Two tiles at 3 programs per SM (the autotuner's pick and its
# /g twin) beside two at 4 (64x64/w4/g/o128/x1/l, 32x128/w8/g/t; benchmarks/results/cpu-sm90-registers-s26.md) and
# one at 2: 64x128/w8/g/o256/l, the listed 64x128/w4/g/o256/l with 8 warps (sm_90, triton 3.6: 128 registers,
# 2 programs of 8 warps per SM, so 264 programs per wave and 7.76 waves at 2048 columns, where the grid model
# finishes within 1.02-1.04x of balanced at every column count).
waves="per_group_scales=64x128/w4,64x128/w4/g,64x64/w4/g/o128/x1/l,32x128/w8/g/t,64x128/w8/g/o256/l"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $sizes $halves $waves
  exit 0
fi

case "${1:?which call: 1 to 6}" in
  1)  # 375 s of pytest on the H200 in session 27 (h200-s27-call1-env.txt), 453 s on an H100 in session 26. Files:
      # env.txt, pytest.log (artifacts.tgz on failures).
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-540} bash "$here/gpu_session.sh" ;;
  2)  # 22 candidates at 7 layouts of the three G = 64 points: 154 forced runs, each checked bitwise (88 took about
      # 100 s in session 27). Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=300 TUNE_ARGS="--points sizes --replace $(printf -- '--candidates %s ' $sizes)" \
      bash "$here/gpu_session.sh" ;;
  3)  # Nsight Compute at the 12 order points, each shape under the tile tuned at its aligned16 point (about 3
      # minutes). Files: env.txt, ncu.csv, ncu.md, ncu.err.
    STEPS="profile" PROFILE_TIMEOUT=360 PROFILE_ARGS="--points order" bash "$here/gpu_session.sh" ;;
  4)  # the per-group bench, each jagged point tuned on its own layout. Files: env.txt, bench.{md,json,png,log}.
    STEPS="bench" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  5)  # 8 per-group tiles at the 13 rowwise and colwise points and 8 dual tiles at the 4 dual ones: 136 forced runs,
      # each checked bitwise. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=300 TUNE_ARGS="--only per_group --replace $(printf -- '--candidates %s ' $halves)" \
      bash "$here/gpu_session.sh" ;;
  6)  # 5 tiles at 5 shapes: 25 forced runs, each checked bitwise (about 1 minute). Files: env.txt, configs.md,
      # tune.log.
    STEPS="tune" TUNE_TIMEOUT=150 TUNE_ARGS="--points waves --replace --candidates $waves" \
      bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1 to 6" >&2; exit 2 ;;
esac
