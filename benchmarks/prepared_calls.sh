#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files:
#
#   bash benchmarks/prepared_calls.sh 1    # the whole GPU test suite (session 23's lists, the plugin fix)
#   bash benchmarks/prepared_calls.sh 2    # every span candidate forced at the 14 per-group points, then the bench
#   bash benchmarks/prepared_calls.sh 3    # the long-slice probe, the unaligned-edge probe, both one-read gap ladders
#
# Session 23 ran the old calls 1 and 2 on an H100 (no H200 was lent): h100-s23-call*.
# PREPARED_PRINT=1 prints call 2's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 2. The lists' tiles (groups fastest, /g) with: /t two passes only; /o<n> a one-read tile n tokens wide beside
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
  1)  # about 8 minutes; files: env.txt, pytest.log, artifacts.tgz on failures. On an H100 with 12 workers the suite
      # had not finished in 330 s (h100-s23-call2-env.txt).
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-560} bash "$here/gpu_session.sh" ;;
  2)  # about 9 minutes (270 s on the H100 for the candidates, h100-s23-call1-env.txt; 105 s for the bench in
      # session 18); files: env.txt (the bench's), ab_env.txt, main.md, main.log, bench.{log,json,md,png}
    TREES="main=" AB_CANDIDATES="$candidates" AB_TIMEOUT=${AB_TIMEOUT:-380} bash "$here/ab_trees.sh"
    mv "$OUT/env.txt" "$OUT/ab_env.txt"
    STEPS="bench" BENCH_TIMEOUT=185 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  3)  # about 8 minutes (200 + 200 + 2 x 45 s); files: env.txt, long_slices.log, unaligned.{md,log},
      # one_read_gap_{128,256}.log
    STEPS="long unaligned gap" LONG_TIMEOUT=200 UNALIGNED_TIMEOUT=200 GAP_GROUPS="128 256" GAP_TIMEOUT=45 \
      bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1, 2 or 3" >&2; exit 2 ;;
esac
