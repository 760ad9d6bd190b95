#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files:
#
#   bash benchmarks/prepared_calls.sh 1    # every prepared span candidate forced at the 14 per-group points
#   bash benchmarks/prepared_calls.sh 2    # the one-read gap ladders (128 and 256 tokens), the long-slice probe, the bench
#   bash benchmarks/prepared_calls.sh 3    # the GPU test suite and the unaligned-edge probe
#
# PREPARED_PRINT=1 prints call 1's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 1. The lists' tiles (groups fastest, /g) with: /t two passes only; /o<n> a one-read tile n tokens wide beside
# the loop's; /e a one-read tile holding the partial edges; /l the edge chunks one at a time. Registers of each:
# benchmarks/results/cpu-sm90-registers-s22.md.
P="64x128/w4,4x1024/w8/g"
for t in 32x128/w8/g 64x64/w4/g 64x128/w4/g 128x32/w4/g; do P="$P,$t,$t/t"; done
P="$P,64x64/w4/g/o128,128x32/w4/g/o64,64x128/w4/e,64x64/w4/g/e,64x64/w4/g/o128/e"
P="$P,64x128/w4/g/o256,32x128/w4/g/o256,64x64/w4/g/o256,32x128/w8/g/o256,16x128/w4/g/o512"
P="$P,64x64/w4/g/l,64x128/w4/g/l,64x128/w4/l,4x1024/w8/g/l,64x128/w4/g/o256/l"
D="64x64/w4/g,128x32/w4/g,64x64/w4/g/t,128x32/w4/g/t,64x64/w4/g/o128,64x64/w4/g/e,32x128/w4/g/o256"
D="$D,16x128/w4/g/o512,64x64/w4/g/l,128x32/w4/g/l"
candidates="per_group_scales=$P per_group_colwise_scales_dual=$D"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $candidates
  exit 0
fi

case "${1:?which call: 1, 2 or 3}" in
  1)  # about 9 minutes; files: env.txt, main.md, main.log
    TREES="main=" AB_CANDIDATES="$candidates" AB_TIMEOUT=500 bash "$here/ab_trees.sh" ;;
  2)  # about 7 minutes (time limits 2 x 90 + 200 + 190 = 570 s); files: env.txt, one_read_gap_{128,256}.log,
      # long_slices.log, bench.{log,json,md,png}. The bench at the 14 per-group points only, without torch.compile
      # (session 18's such run took 105 s, benchmarks/results/h200-s18-call4-env.txt).
    STEPS="gap long bench" GAP_GROUPS="128 256" GAP_TIMEOUT=90 LONG_TIMEOUT=200 BENCH_TIMEOUT=190 \
      BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  3)  # about 10 minutes (360 + 200 s); files: env.txt, pytest.log, artifacts.tgz on failures, unaligned.{md,log}
    STEPS="tests unaligned" TEST_TIMEOUT=360 UNALIGNED_TIMEOUT=200 bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1, 2 or 3" >&2; exit 2 ;;
esac
