#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files:
#
#   bash benchmarks/prepared_calls.sh 1    # the whole GPU test suite (session 23's lists, the plugin fix)
#   bash benchmarks/prepared_calls.sh 2    # every span candidate forced at the 14 per-group points, then the bench
#   bash benchmarks/prepared_calls.sh 3    # the long-slice probe, the unaligned-edge probe, aligned vs uniform groups
#
# Session 23 ran the old calls 1 and 2 on an H100 (no H200 was lent): h100-s23-call*.
# PREPARED_PRINT=1 prints the candidate lists of calls 2 and 3 (tune_configs --candidates arguments, one per line,
# call 2's two first) instead of running anything: tests/test_benchmark_tables.py parses them, so a typo fails on
# the CPU, not on the device.
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
# /x<n>: the one-read path also takes groups n 16-token chunks past its tile (the bench's 272- and 144-token groups)
P="$P,64x128/w4/g/o256/x1/l,64x64/w4/g/o128/x1,64x64/w4/g/o128/x1/l"
D="64x64/w4/g,128x32/w4/g,64x64/w4/g/t,128x32/w4/g/t,64x64/w4/g/o128,64x64/w4/g/e,32x128/w4/g/o256"
D="$D,16x128/w4/g/o512,64x64/w4/g/l,128x32/w4/g/l"
candidates="per_group_scales=$P per_group_colwise_scales_dual=$D"
# Call 3's tiles: the best listed and the best timed at the aligned points on the H100 (h100-s23-summary.md), and
# the /x1 twins of the two one-read tiles that decide them.
uniform_per_group="per_group_scales=32x128/w8/g,64x64/w4/g,64x64/w4/g/o128/e,64x128/w4/g,64x128/w4/g/o256/l"
uniform_per_group="$uniform_per_group,64x64/w4/g/o128/x1,64x128/w4/g/o256/x1/l"
uniform_dual="per_group_colwise_scales_dual=64x64/w4/g,64x64/w4/g/t"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $candidates $uniform_per_group $uniform_dual
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
  3)  # about 9 minutes (150 + 200 + 200 s, each overridable for a shorter call); files: env.txt, uniform.{md,log},
      # long_slices.log, unaligned.{md,log}. uniform first: the tiles that decide the aligned per-group points, at
      # each such point and at a twin whose groups all fit the one-read tile (tune_configs.UNIFORM_POINTS): what
      # the 16 groups one chunk too wide cost, and whether /x1 removes it.
    source "$here/device_setup.sh"
    timeout "${UNIFORM_TIMEOUT:-150}" python3 "$here/tune_configs.py" --points uniform --replace \
      --candidates "$uniform_per_group" --candidates "$uniform_dual" --out "$OUT/uniform.md" >"$OUT/uniform.log" 2>&1
    uniform_exit="uniform exit $? after ${SECONDS}s"; tail -40 "$OUT/uniform.log"
    STEPS="long unaligned" LONG_TIMEOUT=${LONG_TIMEOUT:-200} UNALIGNED_TIMEOUT=${UNALIGNED_TIMEOUT:-200} \
      bash "$here/gpu_session.sh"
    echo "$uniform_exit (before the steps above, which restart the clock)" >>"$OUT/env.txt" ;;
  *) echo "no prepared call $1: 1, 2 or 3" >&2; exit 2 ;;
esac
