#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files:
#
#   bash benchmarks/prepared_calls.sh 1    # the whole GPU test suite under the per-view per-group lists
#   bash benchmarks/prepared_calls.sh 2    # the per-group bench under those lists, then both one-read gap ladders
#   bash benchmarks/prepared_calls.sh 3    # the edge-loop (/l) candidates forced at the 14 points, the transpose bench
#   bash benchmarks/prepared_calls.sh 4    # for a short budget: call 3's candidates, call 2's bench, the 128 ladder
#
# Session 24 ran the previous three on an H200 (h200-s24-summary.md). Calls 1 and 2 each fit an H100 too; label
# the files by the device they ran on.
# PREPARED_PRINT=1 prints call 3's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 3. Session 24's H200 winners came from /l (the edge chunks one at a time) and wider one-read tiles; these
# are their neighbours never timed, beside the listed tiles that decide each point. Registers (triton 3.6, sm_90,
# `sass_counts.py --candidates`), rowwise / colwise: 64x64/w4/g/o128/l 96 / 126; 32x128/w4/g/o256/l 96 / 120;
# 32x128/w4/g/o256/x1/l 96 / 121; 32x128/w8/g/o256/l 61 / 110; 64x128/w4/g/t/l 138 / 166; 64x64/w4/g/t/l 68 / 96;
# 32x128/w8/g/l 48 / 80; dual 64x64/w4/g/t/l 144, 64x64/w4/g/o128/l 150.
P="4x1024/w8/g,32x128/w8/g,32x128/w8/g/t,32x128/w4/g/o256,64x64/w4/g/o128/x1/l,64x64/w4/g/o128/e,64x128/w4"
P="$P,64x128/w4/g,64x128/w4/g/t,64x64/w4/g/t"
P="$P,64x64/w4/g/o128/l,32x128/w4/g/o256/l,32x128/w4/g/o256/x1/l,32x128/w8/g/o256/l,64x128/w4/g/t/l"
P="$P,64x64/w4/g/t/l,32x128/w8/g/l"
D="64x64/w4/g,64x64/w4/g/t,128x32/w4/g/t,64x64/w4/g/t/l,64x64/w4/g/o128/l"
candidates="per_group_scales=$P per_group_colwise_scales_dual=$D"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $candidates
  exit 0
fi

case "${1:?which call: 1, 2 or 3}" in
  1)  # about 8 minutes (the suite took 438 s on 12 workers on the H200, h200-s24-call2-pytest.log); files: env.txt,
      # pytest.log, artifacts.tgz on failures.
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-540} bash "$here/gpu_session.sh" ;;
  2)  # about 7 minutes (99 s for the bench with 12 candidates, h200-s24-call1-env.txt; the ladders up to 150 s
      # each); files: env.txt, bench.{log,json,md,png}, one_read_gap_{128,256}.log. The bench: the autotuner and
      # its first-call cost with 9 candidates per view (12 for both views in session 24: 1.35-1.48 s per new key). The ladders: whether /l brings the one-read path to the stripped
      # kernel's time on the H200 as it did on the H100 (h100-s23-summary.md section 2), where uniform groups that
      # all fit the one-read tile still ran at 68-76% of copy (h200-s24-summary.md section 3).
    STEPS="bench gap" BENCH_TIMEOUT=185 BENCH_ARGS="--only per_group --compile none" GAP_GROUPS="128 256" \
      GAP_TIMEOUT=150 bash "$here/gpu_session.sh" ;;
  3)  # about 6 minutes (22 candidates at the 14 points: session 24 timed 38 in 294 s; the transpose bench, its 8
      # points beside torch.compile, which session 24's full bench did not reach); files: ab_env.txt, main.md,
      # main.log, env.txt (the bench's), bench.{log,json,md,png}.
    TREES="main=" AB_CANDIDATES="$candidates" AB_TIMEOUT=${AB_TIMEOUT:-280} bash "$here/ab_trees.sh"
    mv "$OUT/env.txt" "$OUT/ab_env.txt"
    STEPS="bench" BENCH_TIMEOUT=${BENCH_TIMEOUT:-240} BENCH_ARGS="--only rowwise_3d_transpose_rhs" \
      bash "$here/gpu_session.sh" ;;
  4)  # about 7 minutes, for a session whose budget fits two calls, not three: call 3's forced candidates, then
      # call 2's per-group bench and its 128-token ladder (no transpose bench, no 256 ladder); files: ab_env.txt
      # (the AB's log appended), main.md, env.txt, bench.{log,json,md,png}, one_read_gap_128.log.
    TREES="main=" AB_CANDIDATES="$candidates" AB_TIMEOUT=${AB_TIMEOUT:-230} bash "$here/ab_trees.sh"
    cat "$OUT/main.log" >>"$OUT/env.txt" && rm "$OUT/main.log"
    mv "$OUT/env.txt" "$OUT/ab_env.txt"
    STEPS="bench gap" BENCH_TIMEOUT=150 BENCH_ARGS="--only per_group --compile none" GAP_GROUPS="128" \
      GAP_TIMEOUT=140 bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1, 2, 3 or 4" >&2; exit 2 ;;
esac
