#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1   # the whole GPU suite (about 7 minutes on an H200, 8 on an H100)
#   bash benchmarks/prepared_calls.sh 2   # DRAM bytes and time of the group-order points (about 5 minutes)
#   bash benchmarks/prepared_calls.sh 3   # the per-group bench (about 3 minutes)
#
# Label the files by the device they ran on (h200-s<N>-call<M>-..., h100-...).
# PREPARED_PRINT=1 prints call 2's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 2: what do random group sizes cost, if not imbalance? At random multiples of 16 (random16) the per-group ops
# ran 1.10-1.15x their aligned16 time on session 27's H100 with the same tiles (h100-s27-call6-aligned-configs.md
# against h100-s27-call5-order-configs.md; 1.11-1.37x on the H200 in session 26). The largest-first schedule
# (random16_desc with row blocks fastest) ran 0.98-1.06x random16's time and smallest first 0.98-1.12x, where the
# grid model (benchmarks/grid_schedule_model.py) predicted 0.85-0.94x and 1.05-1.21x: imbalance is not the cost.
# random16 puts 74% of the tokens in groups longer than 256 (aligned16: 26%), up to 1040 tokens: such groups take
# the two-pass loop, and a program's slice (64 columns x 1040 tokens x 2 bytes = 133 KB) x the resident programs
# may exceed L2 before pass 2 re-reads it, the long-slice cost the ledger measured at G = 16. Sorted largest first,
# the long groups all run at once, which would explain why that order ran slower, not faster. Nsight Compute's DRAM
# bytes at aligned16, random16, random16_desc and random16_asc (profile_kernels.py --points order, each shape under
# the tile tuned at its aligned16 point) test it; then the same points with tiles forced, on the H200.
P="32x128/w8/g/t,32x128/w8/t,32x128/w8/g,32x128/w8,64x128/w4/g,64x128/w4,32x128/w4/g/o256,32x128/w4/o256"
D="32x128/w4/g,32x128/w4,64x64/w4/g,64x64/w4,64x64/w4/g/t,64x64/w4/t"
order="per_group_scales=$P per_group_colwise_scales_dual=$D"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $order
  exit 0
fi

case "${1:?which call: 1, 2 or 3}" in
  1)  # 375 s of pytest on the H200 in session 27 (h200-s27-call1-env.txt), 453 s on an H100 in session 26. Files:
      # env.txt, pytest.log (artifacts.tgz on failures).
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-540} bash "$here/gpu_session.sh" ;;
  2)  # Nsight Compute at the 12 order points (about 3 minutes), then 88 forced tiles there (about 100 s). Files:
      # profile_env.txt, ncu.csv, ncu.md, ncu.err, env.txt, configs.md, tune.log.
    STEPS="profile" PROFILE_TIMEOUT=300 PROFILE_ARGS="--points order" bash "$here/gpu_session.sh"
    mv "$OUT/env.txt" "$OUT/profile_env.txt"  # gpu_session.sh begins its own env.txt
    STEPS="tune" TUNE_TIMEOUT=150 TUNE_ARGS="--points order --replace $(printf -- '--candidates %s ' $order)" \
      bash "$here/gpu_session.sh" ;;
  3)  # the per-group bench, each jagged point tuned on its own layout. Files: env.txt, bench.{md,json,png,log}.
    STEPS="bench" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1, 2 or 3" >&2; exit 2 ;;
esac
