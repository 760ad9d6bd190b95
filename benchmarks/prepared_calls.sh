#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1   # the group-order probe, then the whole GPU suite (about 8 minutes)
#   bash benchmarks/prepared_calls.sh 2   # the per-group bench (about 3 minutes)
#
# Label the files by the device they ran on (h200-s<N>-call<M>-..., h100-...).
# PREPARED_PRINT=1 prints call 1's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 1's probe: does the order in which groups start matter at random group sizes? Session 26 measured the per-group
# ops at random multiples of 16 (random16) at 1.11-1.37x their aligned time on the H200, and a list-scheduling model
# of the grid (benchmarks/grid_schedule_model.py) puts largest-first within 1% of a balanced finish there. Session
# 27 timed a largest-first order ranked inside each program (LARGEST_FIRST) at 1.14-1.38x its twins, the ranking
# costing more than any gain (h200-s27-call2-configs.md), and removed it. Here the order costs nothing: the same
# sizes sorted largest first (random16_desc) and smallest first (random16_asc), tune_configs --points order, each
# tile in both grid orders. Row blocks fastest on random16_desc is the largest-first schedule: if it runs near the
# aligned time, a schedule computed once per call (a permutation of the groups, from offs on the device) is worth
# building; if it runs near random16, imbalance is not what random sizes cost.
P="32x128/w8/g/t,32x128/w8/t,32x128/w8/g,32x128/w8,64x128/w4/g,64x128/w4,32x128/w4/g/o256,32x128/w4/o256"
D="32x128/w4/g,32x128/w4,64x64/w4/g,64x64/w4,64x64/w4/g/t,64x64/w4/t"
order="per_group_scales=$P per_group_colwise_scales_dual=$D"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $order
  exit 0
fi

case "${1:?which call: 1 or 2}" in
  1)  # 66 forced tiles at 9 points (about 80 s), then the suite (375 s of pytest on the H200 in session 27,
      # h200-s27-call1-env.txt). Files: order_env.txt, configs.md, tune.log, env.txt, pytest.log (artifacts.tgz on
      # failures).
    STEPS="tune" TUNE_TIMEOUT=150 TUNE_ARGS="--points order --replace $(printf -- '--candidates %s ' $order)" \
      bash "$here/gpu_session.sh"
    mv "$OUT/env.txt" "$OUT/order_env.txt"  # gpu_session.sh begins its own env.txt
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-420} bash "$here/gpu_session.sh" ;;
  2)  # the per-group bench, each jagged point tuned on its own layout. Files: env.txt, bench.{md,json,png,log}.
    STEPS="bench" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1 or 2" >&2; exit 2 ;;
esac
