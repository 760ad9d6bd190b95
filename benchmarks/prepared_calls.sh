#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh prepare   # HERE, before call 2: builds ab/f64scale (the trees call 2 times)
#   bash benchmarks/prepared_calls.sh 1    # the f32 scale (tl.div_rn) on a GPU: every f32 amax, then the suite
#   bash benchmarks/prepared_calls.sh 2    # (carry ["ab"]) the f32 scale against the f64 one, then the bench
#   bash benchmarks/prepared_calls.sh 3    # both one-read gap ladders, and every listed tile forced at random16
#   bash benchmarks/prepared_calls.sh 4    # (carry ["ab"]) narrower rowwise tiles and more dual tiles, both scales
#
# Session 25 ran the previous calls (h200-s25-summary.md): three on an H200, two on an H100. Label the files by the
# device they ran on.
# PREPARED_PRINT=1 prints call 2's candidate lists (tune_configs --candidates arguments, one per line) instead of
# running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 2: the tile each point's autotuner picked on the H200 in session 25 (h200-s25-call1-bench.md) or the best
# listed tile where the pick was a reused one (h200-s25-call1-ab-main.md), timed under both scale divisions; and
# two tiles the f32 scale takes from 4 to 5 programs per SM on the colwise view (triton 3.6, sm_90,
# sass_counts.py --candidates): 64x64/w4/g (108 -> 96 registers, cpu-sm90-registers-s25.md) and 64x64/w4/g/o128/l
# (126 -> 96; 1.04-1.06x the best tile at colwise G = 128 in h200-s25-call1-ab-main.md, with 4 programs).
P="4x1024/w8/g,32x128/w8/g,32x128/w8/g/t,32x128/w4/g/o256,64x64/w4/g/o128/x1/l,64x64/w4/g/o128/e,64x128/w4"
P="$P,64x128/w4/g,64x64/w4/g,64x64/w4/g/o128/l"
D="64x64/w4/g,64x64/w4/g/t"
candidates="per_group_scales=$P per_group_colwise_scales_dual=$D"
# The last commit whose scale_from_amax divided in f64.
F64_COMMIT=79fe712

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $candidates
  exit 0
fi

case "${1:?which call: prepare, 1, 2 or 3}" in
  prepare)  # on this machine: the f64-division tree call 2 times beside the checkout's own fp8moe
    rm -rf ab/f64scale && mkdir -p ab/f64scale && git archive "$F64_COMMIT" fp8moe | tar -x -C ab/f64scale
    grep -qx '/ab/' .git/info/exclude || echo /ab/ >>.git/info/exclude
    echo "ab/f64scale holds fp8moe of $F64_COMMIT: run call 2 with carry [\"ab\"]" ;;
  1)  # about 7 minutes (the suite took 353 s on 12 workers on the H200, h200-s25-call2-env.txt); files: env.txt,
      # scale_division.log, pytest.log, artifacts.tgz on failures. The first GPU run of scale_from_amax in f32:
      # every non-negative f32 amax against fp8ref.amax_to_scale (benchmarks/scale_division_exhaustive.py), then
      # the suite (every kernel test compares scales bitwise).
    STEPS="scale tests" SCALE_TIMEOUT=90 TEST_TIMEOUT=${TEST_TIMEOUT:-480} bash "$here/gpu_session.sh" ;;
  2)  # about 9 minutes: 10 per-group and 2 dual tiles forced at the 17 per-group points, and the transpose's
      # listed tiles at its two smaller shapes (its atomic cast kernel has 21% fewer instructions in f32,
      # cpu-sm90-registers-s25.md), under the f64 tree and then the checkout (about 150 s each: 202 timings took
      # 171 s in session 25; each tree stops at 185 s, the rows it printed kept in ab_env.txt); then the per-group
      # bench, each jagged point tuned on its own layout. Files: ab_env.txt (with the AB logs), f64.md, main.md,
      # env.txt, bench.{log,json,md,png}.
    [ -d ab/f64scale/fp8moe ] || { echo "no ab/f64scale: run 'prepared_calls.sh prepare' here and carry ab" >&2; exit 2; }
    TREES="f64=ab/f64scale main=" AB_CANDIDATES="$candidates" \
      AB_ARGS="--only per_group,rowwise_3d_transpose_rhs --max-elements 300000000" \
      AB_TIMEOUT=${AB_TIMEOUT:-185} bash "$here/ab_trees.sh"
    cat "$OUT/f64.log" "$OUT/main.log" >>"$OUT/env.txt" && rm "$OUT/f64.log" "$OUT/main.log"
    mv "$OUT/env.txt" "$OUT/ab_env.txt"
    STEPS="bench" BENCH_TIMEOUT=170 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  3)  # about 5 minutes: the one-read gap ladders (128 and 256 tokens; on the H200 in session 25 the one-read
      # code lost 11-12% to the ceiling before any group logic, h200-s25-summary.md section 3), then every listed
      # per-group tile forced at the random16 points (what an FP8 MoE step feeds the kernels; H100 only so far);
      # files: env.txt, one_read_gap_{128,256}.log, configs.md, tune.log.
    STEPS="gap tune" GAP_GROUPS="128 256" GAP_TIMEOUT=150 TUNE_TIMEOUT=200 \
      TUNE_ARGS="--only per_group --select random16" bash "$here/gpu_session.sh" ;;
  4)  # about 5 minutes, both trees: session 26's call 2 (h100-s26-call2-*) timed the f32 scale 12% slower with
      # 4x1024/w8/g at rowwise G = 16, where the f32 build takes 4 -> 5 programs per SM (48 registers): 20 rows of
      # 4096-token groups in flight per SM, a pass-2 working set near L2's size. The same occupancy with fewer rows
      # in flight (2x2048/w8, 1x4096/w8: a 4096-token group in one read), and the dual tile that ran 5-6% slower
      # at G = 64 beside narrower dual tiles (32x64/w4/g: 5 programs per SM).
    [ -d ab/f64scale/fp8moe ] || { echo "no ab/f64scale: run 'prepared_calls.sh prepare' here and carry ab" >&2; exit 2; }
    R="4x1024/w8/g,2x2048/w8/g,1x4096/w8/g,2x1024/w4/g,1x2048/w4/g,4x512/w4/g,2x4096/w16/g,32x128/w8/g"
    R="$R,32x128/w4/g/o256"
    D4="64x64/w4/g,64x64/w4/g/t,32x64/w4/g,64x32/w4/g,32x128/w4/g,64x64/w8/g"
    TREES="f64=ab/f64scale main=" AB_CANDIDATES="per_group_scales=$R per_group_colwise_scales_dual=$D4" \
      AB_ARGS="--only per_group_rowwise,per_group_colwise_scales_dual" AB_TIMEOUT=${AB_TIMEOUT:-200} \
      bash "$here/ab_trees.sh" ;;
  *) echo "no prepared call $1: prepare, 1, 2, 3 or 4" >&2; exit 2 ;;
esac
