#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1         # the whole GPU suite (LARGEST_FIRST, the dual list's new tile)
#   bash benchmarks/prepared_calls.sh 2         # largest-first tiles beside their grid-order twins, 17 points
#   bash benchmarks/prepared_calls.sh 3         # the per-group bench, then both one-read gap ladders
#   bash benchmarks/prepared_calls.sh prepare   # HERE, before call 4: builds ab/f64scale (the tree call 4 times)
#   bash benchmarks/prepared_calls.sh 4         # (carry ["ab"]) rowwise G16 and dual tiles under both scale
#                                               # divisions, then every listed tile forced at random16
#
# Session 26 ran the previous calls (h200-s26-summary.md): three on an H100, two on an H200. Label the files by the
# device they ran on.
# PREPARED_PRINT=1 prints calls 2 and 4's candidate lists (tune_configs --candidates arguments, one per line) instead
# of running anything: tests/test_benchmark_tables.py parses them, so a typo fails on the CPU, not on the device.
set -uo pipefail
here="$(dirname "$0")"

# Call 4: session 26 timed the f32 scale 12% slower than the f64 one at rowwise G = 16 with 4x1024/w8/g on the
# H100 (5 programs per SM against 4, h100-s26-call2-main.md) and 2% slower on the H200, where the narrower
# 2x1024/w4/g and 1x2048/w4/g ran 0.97x of it (h200-s26-call4-ab-main.md); the dual op's listed tiles ran 1.05-1.06x
# slower in f32 at G = 64 on the H100 and 0.91-0.98x on the H200. The same tiles under both trees on whichever GPU
# comes, with the dual tile session 26 added (32x128/w4/g, 0.91x at random16 on the H200).
# Rows of a 4096-token group in flight per SM (sm_90, triton 3.6, f32 scale): 4x1024/w8/g 20 (16 in f64),
# 2x1024/w4/g 20, 4x1024/w16/g 12, 1x2048/w4/g 10, 2x2048/w8/g 10, 4x2048/w16/g 8, 1x4096/w8/g 5: if the H100's
# loss is L2 capacity in pass 2, time falls with them there.
P="4x1024/w8/g,2x1024/w4/g,4x1024/w16/g,1x2048/w4/g,2x2048/w8/g,4x2048/w16/g,1x4096/w8/g,32x128/w8/g"
P="$P,32x128/w4/g/o256"
D="64x64/w4/g,64x64/w4/g/t,32x128/w4/g"
candidates="per_group_scales=$P per_group_colwise_scales_dual=$D"
# Call 2: LARGEST_FIRST (/s<n>, fp8moe.kernels._per_group.jagged_program) at random group sizes, where the H200 ran
# 1.15x (rowwise), 1.11x (colwise) and 1.37x (dual) the aligned layout's time (h200-s26-call5-bench.md). In a list
# scheduling model of the grid (benchmarks/grid_schedule_model.py) the largest-first order finishes within 1% of
# a balanced finish at those points, where index order takes 1.07-1.20x (row blocks fastest) and 1.18-1.54x (groups
# fastest); the ranking adds 152-408 static instructions per program and no register that costs a program per SM
# (sm_90, cpu-sm90-registers-s26.md). Each /s tile runs beside the listed tile it derives from and that tile's
# row-blocks-fastest twin, so the gain of the order and the cost of the ranking read apart; at the aligned points
# (a cost only) too.
LP="64x128/w4,64x128/w4/s64,64x128/w4/s128,32x128/w8/g/t,32x128/w8/t,32x128/w8/s64/t,32x128/w8/g,32x128/w8/s64"
LP="$LP,64x64/w4/g/o128/x1/l,64x64/w4/s128/o128/x1/l"
LD="64x64/w4/g,64x64/w4,64x64/w4/s64,64x64/w4/g/t,64x64/w4/s64/t,32x128/w4/g,32x128/w4,32x128/w4/s64,64x64/w4/s128"
largest_first="per_group_scales=$LP per_group_colwise_scales_dual=$LD"
# The last commit whose scale_from_amax divided in f64.
F64_COMMIT=79fe712

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $largest_first $candidates
  exit 0
fi

case "${1:?which call: 1, 2, 3, prepare or 4}" in
  1)  # about 8 minutes (453 s of pytest on the H100 in session 26, h100-s26-call1-env.txt); files: env.txt,
      # pytest.log, artifacts.tgz on failures. Bitwise stays bitwise with LARGEST_FIRST and the dual's new tile.
    STEPS="tests" TEST_TIMEOUT=${TEST_TIMEOUT:-560} bash "$here/gpu_session.sh" ;;
  2)  # about 4 minutes: the tiles above forced at the 17 per-group points (each checked bitwise first). Files:
      # env.txt, configs.md, tune.log. Read it here with python benchmarks/tune_configs.py --largest-first
      # <configs.md> (each /s tile against its twin and its /g source) and --standing <configs.md>.
    STEPS="tune" TUNE_TIMEOUT=330 TUNE_ARGS="--only per_group --replace $(printf -- '--candidates %s ' $largest_first)" \
      bash "$here/gpu_session.sh" ;;
  3)  # about 6 minutes: the per-group bench (each jagged point tuned on its own layout; the dual op with 4
      # candidates for the first time), then the one-read gap ladders at 128- and 256-token groups (the H200's
      # 11-12% one-read gap was measured under the f64 scale, h200-s25-summary.md section 3). Files: env.txt,
      # bench.{md,json,png,log}, one_read_gap_{128,256}.log.
    STEPS="bench gap" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" GAP_GROUPS="128 256" \
      GAP_TIMEOUT=150 bash "$here/gpu_session.sh" ;;
  prepare)  # on this machine: the f64-division tree call 4 times beside the checkout's own fp8moe
    rm -rf ab/f64scale && mkdir -p ab/f64scale && git archive "$F64_COMMIT" fp8moe | tar -x -C ab/f64scale
    grep -qx '/ab/' .git/info/exclude || echo /ab/ >>.git/info/exclude
    echo "ab/f64scale holds fp8moe of $F64_COMMIT: run call 4 with carry [\"ab\"]" ;;
  4)  # about 6 minutes: session 26 timed the f32 scale 12% slower than the f64 one at rowwise G = 16 with
      # 4x1024/w8/g on the H100 (5 programs per SM against 4) and 2% on the H200, where the narrower 2x1024/w4/g
      # and 1x2048/w4/g ran 0.97x of it; the dual op's tiles 1.05-1.06x at G = 64 on the H100, 0.91-0.98x on the
      # H200. The tiles of "candidates" at the rowwise and dual points under the f64 tree, then the checkout (about
      # 100 s each on the H200), on whichever GPU comes; then every listed per-group tile forced at the random16
      # points (H100 only so far). Files: ab_env.txt (with the AB logs), f64.md, main.md, env.txt, configs.md,
      # tune.log.
    [ -d ab/f64scale/fp8moe ] || { echo "no ab/f64scale: run 'prepared_calls.sh prepare' here and carry ab" >&2; exit 2; }
    TREES="f64=ab/f64scale main=" AB_CANDIDATES="$candidates" \
      AB_ARGS="--only per_group_rowwise,per_group_colwise_scales_dual" AB_TIMEOUT=${AB_TIMEOUT:-150} \
      bash "$here/ab_trees.sh"
    cat "$OUT/f64.log" "$OUT/main.log" >>"$OUT/env.txt" && rm "$OUT/f64.log" "$OUT/main.log"
    mv "$OUT/env.txt" "$OUT/ab_env.txt"  # gpu_session.sh begins its own env.txt
    STEPS="tune" TUNE_TIMEOUT=120 TUNE_ARGS="--only per_group --select random16" bash "$here/gpu_session.sh" ;;
  *) echo "no prepared call $1: 1, 2, 3, prepare or 4" >&2; exit 2 ;;
esac
