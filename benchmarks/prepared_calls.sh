#!/usr/bin/env bash
# The device calls prepared for the next GPU session (benchmarks/results/per-group-ledger.md, "Prepared and not yet
# measured"), one per argument, each inside the 600 s a call may run and bringing back at most 8 files. In order of
# importance: a budget that fits one call runs call 1.
#
#   bash benchmarks/prepared_calls.sh 1   # L2 hints (/ev1, /ev2) beside their tiles at the size points (about 3 min)
#   bash benchmarks/prepared_calls.sh 2   # Nsight Compute of the rowwise and dual tiles and their twins there (3 min)
#   bash benchmarks/prepared_calls.sh 3   # the call 1 tiles at the issue #11 per-group points (about 3 minutes)
#   bash benchmarks/prepared_calls.sh 4   # call 1 cut to the profiled rowwise and dual tiles (under a minute)
#   bash benchmarks/prepared_calls.sh 5   # the per-group bench under the lists with the hinted tiles (about 3 minutes)
#   bash benchmarks/prepared_calls.sh 6   # /ev1 twins of the colwise and dual tiles calls 1 and 3 left out (2 minutes)
#   bash benchmarks/prepared_calls.sh 7   # /ev1 twins of the rowwise tiles calls 1 and 3 left out (about a minute)
#   bash benchmarks/prepared_calls.sh 8   # ncu: is random16's SM idle time the grid order's? (about 2 minutes)
#   bash benchmarks/prepared_calls.sh 9   # colwise: the G64 tile with row blocks fastest, at the points (a minute)
#   bash benchmarks/prepared_calls.sh 10  # short slices read through tensor descriptors (TMA) against the op (1-2 min)
#   bash benchmarks/prepared_calls.sh 11  # the host time of eager calls, by part and at four points (about a minute)
#   bash benchmarks/prepared_calls.sh 12  # the span kernels as dependent launches: GPU tests, then the bench off/on (9 min)
#   bash benchmarks/prepared_calls.sh 13  # the whole GPU suite under dependent launches (about 7 minutes)
#   bash benchmarks/prepared_calls.sh 14  # the whole GPU suite with both cooperative 3D uses on (the defaults since s37)
#   bash benchmarks/prepared_calls.sh 15  # colwise 3D on row-major input, row kernel then "auto", torch.compile (4 min)
#   bash benchmarks/prepared_calls.sh 16  # the atomic transpose, two launches then "coop", torch.compile; tiles (4 min)
#   bash benchmarks/prepared_calls.sh 17  # the per-group ops, default kernels then the jagged "coop" (about 6 min)
#   bash benchmarks/prepared_calls.sh 18  # 15 and 16 in one call: both 3D uses tested, then benched off/on (9 min)
#   bash benchmarks/prepared_calls.sh 19  # the jagged cooperative form against the default at G = 16 (about a minute)
#   bash benchmarks/prepared_calls.sh 20  # the cooperative 3D defaults: tests, bench, more tiles of both uses (7 min)
#   bash benchmarks/prepared_calls.sh 21  # colwise 3D's cooperative tile beside 2-warp tiles of its chunk length (4 min)
#   bash benchmarks/prepared_calls.sh 22  # the whole GPU suite under session 38's "auto" (coop for long groups; 7 min)
#   bash benchmarks/prepared_calls.sh 23  # the per-group bench, then "auto" against "coop" at the long-group points
#   bash benchmarks/prepared_calls.sh 24  # the grouped-GEMM step's quantization, activation pairs off then on (6 min)
#   bash benchmarks/prepared_calls.sh 25  # colwise 3D's cooperative tile capped at 128 registers (4 per SM; 3 min)
#   bash benchmarks/prepared_calls.sh 26  # colwise 3D's jagged launch (s39): its GPU tests, then against the dense one
#   bash benchmarks/prepared_calls.sh 27  # the size-matched copy at every issue #11 point, nothing else (about 2 min)
#   bash benchmarks/prepared_calls.sh 28  # the per-group coop tile capped at 128 registers; colwise 3D's other tiles
#   bash benchmarks/prepared_calls.sh 29  # the 3D ops' bench under the defaults, torch.compile at each first point
#   bash benchmarks/prepared_calls.sh 30  # Nsight Compute of the 3D ops on row-major input; colwise 3D capped/uncapped
#   bash benchmarks/prepared_calls.sh 31  # colwise 3D's miss as a ladder: transposing cast, one-read tile, chunks meeting
#   bash benchmarks/prepared_calls.sh 32  # the chunks' meeting taken apart: ticket, folds and arrivals, wait, read-back
#   bash benchmarks/prepared_calls.sh 33  # the meeting deferred: fold a chunk, cast one read D chunks earlier (L2)
#   bash benchmarks/prepared_calls.sh 34  # the wait's polling: counts on their own lines, sleeps between polls
#   bash benchmarks/prepared_calls.sh 35  # the counts on their own lines in fp8moe: 3D bench, long groups, whole suite
#   bash benchmarks/prepared_calls.sh 36  # both cooperative 3D uses' tiles again, with the counters a line apart
#   bash benchmarks/prepared_calls.sh 37  # the per-group launch's counters packed against a line apart, one machine
#   bash benchmarks/prepared_calls.sh 38  # the jagged cooperative kernel's tiles at the short-group colwise points
#   bash benchmarks/prepared_calls.sh 39  # the chunks' meeting pipelined: load the next chunk, then wait (2 min)
#   bash benchmarks/prepared_calls.sh 40  # the 3D ops under session 45's tile rules: bench, then their GPU tests (s46)
#   bash benchmarks/prepared_calls.sh 41  # every issue #11 point under the defaults, torch.compile at each op's first
#   bash benchmarks/prepared_calls.sh 42  # colwise 3D capped against uncapped at 7 shapes between two 3D points (4 min)
#   bash benchmarks/prepared_calls.sh 43  # unaligned group edges cast after the op by a kernel of their own (3 min)
#   bash benchmarks/prepared_calls.sh 44  # the edge kernel writing whole sectors and lines; colwise 3D's new cap rule
#   bash benchmarks/prepared_calls.sh 45  # colwise 3D uncapped at (128, 5120, 8192), outputs poisoned: bitwise? (5 min)
#   bash benchmarks/prepared_calls.sh 46  # the slice kernel's arrival without and with its barrier: races? (s49)
#   bash benchmarks/prepared_calls.sh 47  # call 46's race at session 47's point, both tiles; the 3D bench (8 min)
#   bash benchmarks/prepared_calls.sh 48  # the formal order by acquiring polls: raced and timed beside the kernel (s50)
#   bash benchmarks/prepared_calls.sh h200      # 41 in one device call (6-8 minutes; the H200's standing on issue #11)
#   bash benchmarks/prepared_calls.sh h200-3d   # 18 then 19 in one device call (about 8 minutes; waits for an H200)
#   bash benchmarks/prepared_calls.sh h200-pdl  # 12 then 11 in one device call (about 7 minutes; waits for an H200)
#   bash benchmarks/prepared_calls.sh h100      # 47 in one device call (about 8 minutes; any sm_90 GPU)
#   bash benchmarks/prepared_calls.sh short     # one short call for a low budget (3 minutes; by the GPU it gets)
#
# Label the files by the device they ran on (h200-s<N>-call<M>-..., h100-...).
#
# Why: on an H100 in session 30 Nsight Compute put the cost of spread group sizes in DRAM bytes
# (h100-s30-call{1,2}-ncu.md, each shape under the tile tuned at aligned16): rowwise 5120x16640 G = 64 read 1.02x
# its ideal bytes at aligned16 and 1.39x with the sizes spread by 240 tokens (108.6 -> 163.7 us), the dual op
# 16640x2048x2048 1.09x -> 1.36x (94.2 -> 122.6 us), colwise 16640x2048 0.87x -> 0.91x. Pass 2 of the groups
# past the one-read tile misses L2 while the one-read groups' lines, which nothing reads again, hold it. L2_HINTS
# (/ev1: last reads and stores evict-first; /ev2: also pass 1's reads evict-last) tells the L2 which is which.
# Each tile is timed beside its two hinted twins, every row checked bitwise, so a row's ratio to its plain twin
# is the hint's effect on that tile.
set -uo pipefail
here="$(dirname "$0")"

# The tiles the autotuner picks at the G = 64 points (H100 and H200 benches), and those session 30 profiled:
# rowwise 64x64/w4/g (76 registers, 6 programs per SM), colwise 64x128/w4/g/o256/l, dual 64x64/w4/g/t.
P="64x64/w4/g 32x128/w8/g/t 64x128/w4/g/o256/l"
D="64x64/w4/g/t 32x128/w4/g"

# Each tile of the arguments beside its /ev1 and /ev2 twins, comma-separated.
with_hints() { local t out=""; for t in "$@"; do out+="$t,$t/ev1,$t/ev2,"; done; echo "${out%,}"; }
# The listed tiles calls 1 and 3 did not time with hints (session 31), by the view or op that lists them.
ALONG_K_REST="4x512/w4 4x1024/w8/g 8x512/w8 32x128/w8/g 32x128/w4/g/o256 64x64/w4/g/o128/x1/l"
TRANSPOSING_REST="64x64/w4/g/o128/x1/l 64x64/w4/g/o128/e 64x128/w4 64x128/w4/g 128x32/w4/g 128x64/w8"
DUAL_REST="64x64/w4/g 128x32/w4/g"

# Each tile of the arguments beside its /ev1 twin (on the H200 /ev1 was within 1% of /ev2 or ahead), comma-separated.
with_ev1() { local t out=""; for t in "$@"; do out+="$t,$t/ev1,"; done; echo "${out%,}"; }
rest_colwise="per_group_scales=$(with_ev1 $TRANSPOSING_REST) per_group_colwise_scales_dual=$(with_ev1 $DUAL_REST)"
rest_rowwise="per_group_scales=$(with_ev1 $ALONG_K_REST)"
# Call 8: the colwise and dual tiles that take random16 with groups fastest (/g) beside the same tiles with row
# blocks fastest, where random16_desc (sizes sorted largest first) starts the longest groups' programs first.
orders="per_group_scales=64x128/w4/g/o256/l/ev1,64x128/w4/o256/l/ev1 \
per_group_colwise_scales_dual=64x64/w4/g/t/ev1,64x64/w4/t/ev1"
# Call 9: session 32's call 8 (h100-s32-call8-ncu.md) ran 64x128/w4/o256/l/ev1 (row blocks fastest) with the SMs idle
# 12.8% of the time at random16 against 20.1% for its /g twin, and ahead at every layout but random16_desc: timed
# here beside the listed colwise tiles it would join, at the colwise and dual points of issue #11. Ran in session 32
# (h100-s32-call11-row-order-configs.md): 0.96x its /g twin at random16, 1.03-1.05x the autotuned bench; not kept.
row_order="per_group_scales=64x128/w4/g/o256/l,64x128/w4/g/o256/l/ev1,64x128/w4/o256/l,64x128/w4/o256/l/ev1,\
64x128/w4,64x128/w4/ev1,64x128/w4/g/ev1"
# Call 20: the cooperative slice kernel's tiles, (BLOCK_L along the reduced axis) x BLOCK_M / warps, at most 128
# elements per thread (the first tiles' 168 and 147 registers, 3 programs per SM); no column tile takes more than 64
# chunks of K = 8192, so none falls back to the row kernel where half an H100's or H200's SMs may wait.
COOP_TRANSPOSE_TILES="2048x8/w4,4096x4/w4,4096x8/w8,2048x16/w8,1024x8/w2,2048x4/w2,1024x16/w4"
COOP_COLUMNS_TILES="256x64/w4,128x128/w4,512x32/w4,256x128/w8,128x256/w8,512x64/w8,128x64/w2"
# Call 21: colwise's first tile beside 2-warp tiles of 256- and 512-long chunks (128 elements per thread).
COOP_COLUMNS_NARROW="256x64/w4,256x32/w2,512x16/w2,128x32/w1"
# Call 28: colwise 3D's tile past one expert (4 programs, 16 warps per SM) beside it uncapped, tiles of 64 elements
# per thread (more warps per SM) and one of 128-long chunks (compiled for sm_90 on the CPU, session 43, registers /
# programs per SM / spilled: 256x64/w8 80 / 3 / 0, 128x64/w4 72 / 7 / 0, 128x128/w4/r128 126 / 4 / 0;
# 256x64/w8/r64, 64 / 4 / 3, left out for the call's time: 20 forced runs, about 14 s each on an H100 in session 40).
COOP_COLUMNS_WARPS="256x64/w4/r128,256x64/w4,256x64/w8,128x64/w4,128x128/w4/r128"
# Call 36: the tiles of both cooperative 3D uses again once their counters lie a line apart (session 44), the tiles
# the rules then picked first. Shorter chunks meet more often, and so lost most to the polling the lines took away.
# Ran in session 45 on an H100 (h100-s45-call36-configs_{columns,transpose}.md); the rules changed after it.
COOP_COLUMNS_LINES="256x64/w4/r128,256x64/w4,128x64/w2,128x64/w4,128x128/w4/r128,512x32/w4"
COOP_TRANSPOSE_LINES="1024x8/w2,2048x8/w4,512x8/w1,512x16/w2,256x32/w2,1024x16/w4"
# Call 38: tiles of the jagged cooperative kernel for the colwise ops' short groups (130-1040 positions): the default
# 256 x 64, the list's 128 x 64 with 2 warps, and shorter chunks (64 positions: a 272-token group in 5 chunks, not 2).
# Registers per thread from 128 down to 64 elements.
GROUP_COOP_SHORT="256x64/w4,128x64/w2,128x64/w4,64x64/w2,64x128/w4,128x128/w4"
hints="per_group_scales=$(with_hints $P) per_group_colwise_scales_dual=$(with_hints $D)"
profiled="per_group_scales=$(with_hints 64x64/w4/g) per_group_colwise_scales_dual=$(with_hints 64x64/w4/g/t)"

if [ -n "${PREPARED_PRINT:-}" ]; then
  printf '%s\n' $hints $profiled $rest_colwise $rest_rowwise $orders $row_order
  exit 0
fi

# One device call for what waits for an H200 (per-group-ledger.md, "Prepared and not yet measured"), most important
# first: "h200" runs 41 (every issue #11 point under today's defaults: the H200 last benched the per-group ops in
# session 33 and the 3D ops in session 24, before the kernels that now run there); "h200-3d" runs 18 (the cooperative
# 3D uses, the CUDA defaults since session 37 on H100 evidence, against the kernels they replaced) then 19 (the jagged
# form at G = 16, about a minute); "h200-pdl" runs 12 then 11 (dependent launches and the host split; calls 5, 10,
# 7 and 6, which an earlier form of this ran in session 33, have their own numbers). Each call's files go under
# $OUT/call<N>, 8 files in all (the device brings back no more): the copies of env.txt after the first are deleted.
case "${1:-}" in
  h200) waiting="41" ;;
  h200-3d) waiting="18 19" ;;
  h200-pdl) waiting="12 11" ;;
  h100) waiting="47" ;;
  *) waiting="" ;;
esac
if [ -n "$waiting" ]; then
  out="$OUT"
  first=""
  for call in $waiting; do
    OUT="$out/call$call"
    mkdir -p "$OUT"
    OUT="$OUT" bash "$0" "$call"
    echo "prepared call $call exit $?"
    if [ -z "$first" ]; then first=$call; else rm -f "$OUT/env.txt"; fi
  done
  exit 0
fi

case "${1:?which call: 1 to 48, h200, h200-3d, h200-pdl, h100 or short}" in
  1)  # 9 per-group candidates at the 14 rowwise and colwise size points, 6 dual ones at its 7: 168 forced runs,
      # each checked bitwise (154 took 113 s on the H200 in session 29). Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=480 TUNE_ARGS="--points sizes --replace $(printf -- '--candidates %s ' $hints)" \
      bash "$here/gpu_session.sh" ;;
  2)  # Nsight Compute at the rowwise and dual size points (14) under session 30's profiled tile, then its /ev1 and
      # /ev2 twins, each forced: are the DRAM bytes back at the ideal? Files: env.txt, ncu.csv, ncu.md, ncu.err.
    STEPS="profile" PROFILE_TIMEOUT=360 PROFILE_ARGS="--points sizes --select 5120x16640,16640x2048x2048 \
      $(printf -- '--force %s ' $profiled)" bash "$here/gpu_session.sh" ;;
  3)  # call 1's candidates at the 17 per-group points of issue #11: 13 x 9 + 4 x 6 = 141 forced runs. Files:
      # env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=480 TUNE_ARGS="--only per_group --replace $(printf -- '--candidates %s ' $hints)" \
      bash "$here/gpu_session.sh" ;;
  4)  # call 1 for a budget that fits little else: the rowwise and dual size points (14) under call 2's tiles and
      # their twins, 42 forced runs. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=200 TUNE_ARGS="--points sizes --only per_group_rowwise,per_group_colwise_scales_dual \
      --replace $(printf -- '--candidates %s ' $profiled)" bash "$here/gpu_session.sh" ;;
  5)  # the per-group bench, each jagged point tuned on its own layout, the two hinted tiles (session 30) in the lists.
      # Files: env.txt, bench.{md,json,png,log}.
    STEPS="bench" BENCH_TIMEOUT=175 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh" ;;
  6)  # the colwise view's and the dual op's other listed tiles beside their /ev1 twins at the 12 colwise and dual
      # points of issue #11: 8 x 12 + 4 x 4 = 112 forced runs. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=300 TUNE_ARGS="--only per_group_colwise_scales --replace \
      $(printf -- '--candidates %s ' $rest_colwise)" bash "$here/gpu_session.sh" ;;
  7)  # the rowwise view's other listed tiles beside their /ev1 twins at the 5 rowwise points of issue #11: 60
      # forced runs. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=200 TUNE_ARGS="--only per_group_rowwise --replace \
      $(printf -- '--candidates %s ' $rest_rowwise)" bash "$here/gpu_session.sh" ;;
  8)  # Nsight Compute at the colwise and dual size points (14), each under its /g tile, then the same tile with row
      # blocks fastest: session 31 found random16 adding 4-10 points of SM idle time at every op, sorted sizes
      # included (s31-ncu-idle-split.md). With row blocks fastest random16_desc is a longest-first schedule; if its
      # idle time falls to aligned16's, the idle is the order's. Read with profile_kernels.py --idle-split ncu.csv.
      # Files: env.txt, ncu.csv, ncu.md, ncu.err.
    STEPS="profile" PROFILE_TIMEOUT=300 PROFILE_ARGS="--points sizes --select 16640x2048 \
      $(printf -- '--force %s ' $orders)" bash "$here/gpu_session.sh" ;;
  9)  # the seven tiles forced at the 8 colwise points of issue #11 and the dual list at its 4: 80 runs. Files: env.txt,
      # configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=200 TUNE_ARGS="--only per_group_colwise_scales --replace \
      $(printf -- '--candidates %s ' $row_order)" bash "$here/gpu_session.sh" ;;
  10) # probe_long_slices.py's short variants (the op's tiles by plain loads, then by tensor descriptors: the bulk
      # tensor copy engine, 48-80 registers against 118-128, 6-10 4-warp programs per SM against 4, sass_counts.py
      # --long-slices) at uniform groups of 128 and 256 tokens, 2048 and 5120 columns, beside the op; each checked
      # bitwise first. Is the H200's short-slice gap (66-73% of copy against the H100's 82-89%) bytes in flight?
      # Files: env.txt, long_slices.log.
    STEPS="long" LONG_TIMEOUT=300 LONG_ARGS="--points short --variants short" bash "$here/gpu_session.sh" ;;
  11) # the host time of eager calls (session 33 measured it on H100s only, h200-s33-summary.md section 5): one
      # replayed call of each colwise per-group op by part (--split), then the host, eager GPU, graph and loop time
      # per call at four issue #11 points (--points), where a call that waited for the GPU would show a ~30 ms sleep.
      # Files: env.txt, host_split.txt, host_points.txt.
    STEPS="host" HOST_ARGS="--split" bash "$here/gpu_session.sh" && mv "$OUT/host_overhead.txt" "$OUT/host_split.txt"
    STEPS="host" HOST_ARGS="--points" bash "$here/gpu_session.sh" && mv "$OUT/host_overhead.txt" "$OUT/host_points.txt"
    ;;
  12) # the span kernels as programmatic dependent launches (FP8MOE_PDL=1: fp8moe.backend.Backend.dependent_launch,
      # griddepcontrol in fp8moe.kernels._per_group.jagged_program). First the GPU tests that compare them with the
      # normal launch (bytes eager, replayed and in a CUDA graph; each kernel of a chain reading what the one before
      # it wrote) with the launch-plan and integration tests, all under FP8MOE_PDL=1; then the per-group bench
      # without and with it on the same machine. The bench's graph replays one op back to back, so what a dependent
      # launch can take is the gap between two kernels, part of the fixed 3.0-4.8 us per launch that the colwise
      # ceiling's time at two widths fits (docs/SPEC.md section 10.5). Files: env.txt, pdl_tests.log, bench_{off,on}.{md,json}.
    FP8MOE_PDL=1 STEPS="tests" TEST_TIMEOUT=180 \
      TEST_PATHS="tests/test_dependent_launch_gpu.py tests/test_replay_gpu.py" bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/pdl_tests.log"
    for pdl in 0 1; do
      FP8MOE_PDL=$pdl STEPS="bench" BENCH_TIMEOUT=165 BENCH_ARGS="--only per_group --compile none" \
        bash "$here/gpu_session.sh"
      name=$([ "$pdl" = 1 ] && echo on || echo off)
      mv "$OUT/bench.md" "$OUT/bench_$name.md"; mv "$OUT/bench.json" "$OUT/bench_$name.json"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    done ;;
  13) # the whole GPU suite with the span kernels as dependent launches (FP8MOE_PDL=1), what turning them on by
      # default needs: on an H100 (s34-summary.md section 2) they took 1.4-2.2 us off an eager call back to back
      # at 13 of the 17 per-group points and left graph time flat. Files: env.txt, pdl_suite.log.
    FP8MOE_PDL=1 STEPS="tests" TEST_TIMEOUT=540 bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/pdl_suite.log" ;;
  14) # the whole GPU suite with both ops of the cooperative slice kernel (fp8moe.kernels._coop_slices) on:
      # colwise_3d_scale_and_cast under FP8MOE_COLWISE_3D_KERNEL=auto (inputs read along N with K >= 1024) and the
      # atomic transpose under FP8MOE_TRANSPOSE_ATOMIC_KERNEL=coop, what turning them on by default needs
      # (fp8moe.configs.COLWISE_3D_KERNEL, TRANSPOSE_ATOMIC_KERNEL). On an H100 (s35-summary.md section 5) the
      # column kernel's tests and every colwise 3D dense test passed under "coop" (90); the transpose has not run on
      # a GPU. Files: env.txt, coop_suite.log.
    FP8MOE_COLWISE_3D_KERNEL=auto FP8MOE_TRANSPOSE_ATOMIC_KERNEL=coop STEPS="tests" TEST_TIMEOUT=540 \
      bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/coop_suite.log" ;;
  15) # colwise 3D at the issue #11 points on row-major input, the row kernel then "auto" (the cooperative kernel),
      # same machine, torch.compile at the first point: on an H100 "auto" took 0.81-0.93x the row kernel's time
      # (52-64% -> 56-73% of copy, h100-s35-colwise3d-rows-vs-coop.md); the target is 80% on the H200. Read with
      # python -m fp8moe.bench_diff bench_rows.json bench_auto.json. Files: env.txt, bench_{rows,auto}.{md,json}.
    for kernel in rows auto; do
      FP8MOE_COLWISE_3D_KERNEL=$kernel STEPS="bench" BENCH_TIMEOUT=200 \
        BENCH_ARGS="--only colwise_3d_scale --select row_major --compile first" bash "$here/gpu_session.sh"
      mv "$OUT/bench.md" "$OUT/bench_$kernel.md"; mv "$OUT/bench.json" "$OUT/bench_$kernel.json"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    done ;;
  16) # the atomic transpose at the issue #11 3D points, its two-launch kernel (x read twice: 56-63% of copy on the
      # H200, issue11-misses.md) then the cooperative slice kernel (x read once), same machine, torch.compile at the
      # first point; then the cooperative kernel's four tiles (fp8moe.configs.COOP_TRANSPOSE) forced one at a time at
      # the four points, each checked bitwise. Read with python -m fp8moe.bench_diff bench_two_launch.json
      # bench_coop.json. Files: env.txt, bench_{two_launch,coop}.{md,json}, configs.md, tune.log.
    for kernel in two_launch coop; do
      FP8MOE_TRANSPOSE_ATOMIC_KERNEL=$kernel STEPS="bench" BENCH_TIMEOUT=150 \
        BENCH_ARGS="--only rowwise_3d_transpose --select atomic --compile first" bash "$here/gpu_session.sh"
      mv "$OUT/bench.md" "$OUT/bench_$kernel.md"; mv "$OUT/bench.json" "$OUT/bench_$kernel.json"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    done
    FP8MOE_TRANSPOSE_ATOMIC_KERNEL=coop STEPS="tune" TUNE_TIMEOUT=150 \
      TUNE_ARGS="--only rowwise_3d_transpose --select atomic" bash "$here/gpu_session.sh" ;;
  17) # the per-group bench at the 17 issue #11 points under the default kernels ("auto": span or chunks), then under
      # FP8MOE_PER_GROUP_KERNEL=coop (the cooperative slice kernel's jagged form, each slice read once: the stripped
      # probe ran 4096-8192-token slices at 72-74% of copy on an H100 against the span kernel's 57-59%; the G = 16
      # point's 65536 tokens take its 1024 x 16 tile), same machine. The first runs the GPU tests of the kernel under
      # "coop". Read with python -m fp8moe.bench_diff bench_auto.json bench_coop.json. Files: env.txt,
      # coop_tests.log, bench_{auto,coop}.{md,json}.
    FP8MOE_PER_GROUP_KERNEL=coop STEPS="tests" TEST_TIMEOUT=150 \
      TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_per_group.py" bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/coop_tests.log"
    for kernel in auto coop; do
      FP8MOE_PER_GROUP_KERNEL=$kernel STEPS="bench" BENCH_TIMEOUT=165 BENCH_ARGS="--only per_group --compile none" \
        bash "$here/gpu_session.sh"
      mv "$OUT/bench.md" "$OUT/bench_$kernel.md"; mv "$OUT/bench.json" "$OUT/bench_$kernel.json"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    done ;;
  18) # calls 15 and 16 in one, for a session with little device time: the tests of the cooperative slice kernel
      # and its dense ops (-k coop) with both 3D uses on (colwise 3D "auto", the atomic transpose "coop"), then the
      # 3D points read along N (colwise 3D on row-major input, the atomic transpose, and the reduction transpose,
      # which neither setting changes: the control) benched with both off, then both on, torch.compile at each op's
      # first point. Read with python -m fp8moe.bench_diff bench_off.json bench_on.json. Files: env.txt,
      # coop3d_tests.log, bench_{off,on}.{md,json}.
    FP8MOE_COLWISE_3D_KERNEL=auto FP8MOE_TRANSPOSE_ATOMIC_KERNEL=coop STEPS="tests" TEST_TIMEOUT=120 \
      TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_dense.py -k coop" bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/coop3d_tests.log"
    for setting in "rows two_launch off" "auto coop on"; do
      read -r columns transpose name <<< "$setting"
      FP8MOE_COLWISE_3D_KERNEL=$columns FP8MOE_TRANSPOSE_ATOMIC_KERNEL=$transpose STEPS="bench" BENCH_TIMEOUT=190 \
        BENCH_ARGS="--only 3d --select row_major --compile first" bash "$here/gpu_session.sh"
      mv "$OUT/bench.md" "$OUT/bench_$name.md"; mv "$OUT/bench.json" "$OUT/bench_$name.json"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    done ;;
  19) # the jagged form of the cooperative slice kernel with its long-group pass at 65536 x 4096 G = 16 against the
      # default kernels, one process, every output compared with fp8ref (benchmarks/probe_jagged_coop.py; its first
      # form ran there at 1.05x the default's time with a 1024 x 16 tile, h100-s36-call17-auto-vs-coop.md). Files:
      # env.txt, jagged_coop.{md,err}.
    STEPS="jagged" JAGGED_ARGS="--points G16" bash "$here/gpu_session.sh" ;;
  20) # the cooperative 3D uses as the CUDA defaults (session 37: colwise 3D "auto", the atomic transpose "coop" under
      # its new first tile, 2048 x 8): their tests and the dense tests of both 3D ops, the 3D points read along N
      # benched under the defaults (torch.compile at each op's first point), then more tiles of both uses forced one
      # at a time at their points, each checked bitwise (tune_configs.py forces the list of the kernel that ran,
      # lists_that_ran): the transpose's best four at equal registers per thread (2048 x 8 best at 3 of 4 points on
      # an H100, h100-s37-call16-configs.md) beside 8-warp and 2-warp ones; the columns' 256 x 64 beside wider ones.
      # Files: env.txt, coop3d_tests.log, bench.{md,json}, configs_{transpose,columns}.md, tune_{transpose,columns}.log.
    STEPS="tests" TEST_TIMEOUT=150 TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_dense.py -k coop" \
      bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/coop3d_tests.log"
    STEPS="bench" BENCH_TIMEOUT=150 BENCH_ARGS="--only 3d --select row_major --compile first" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log"
    for use in "transpose rowwise_3d_transpose atomic $COOP_TRANSPOSE_TILES" "columns colwise_3d row_major \
$COOP_COLUMNS_TILES"; do
      read -r name op select tiles <<< "$use"
      STEPS="tune" TUNE_TIMEOUT=150 TUNE_ARGS="--only $op --select $select --replace --candidates coop_$name=$tiles" \
        bash "$here/gpu_session.sh"
      mv "$OUT/configs.md" "$OUT/configs_$name.md"; mv "$OUT/tune.log" "$OUT/tune_$name.log"
    done ;;
  21) # colwise 3D on row-major input, the cooperative kernel's tile (256 x 64, 4 warps) beside 2-warp tiles that keep
      # 128 elements per thread: on the atomic transpose 1024 x 8 with 2 warps (6 programs per SM) beat 2048 x 8 with
      # 4 (3 per SM) where rows take several chunks (session 37), while colwise's 128 x 64 with 2 warps, which
      # doubles the chunks a column waits for, ran 1.07-1.11x (h100-s37-call20-tune-columns.log). These keep 256- and
      # 512-long chunks and narrow the columns instead. Compiled for sm_90 on the CPU (sass_counts.compile_sm90, fused
      # phase): 256x64/w4 147 registers, 32 KB shared, 3 programs per SM; 256x32/w2 152, 8 KB, 6; 512x16/w2 166,
      # 4 KB, 6; 128x32/w1 152, 2 KB, 13. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=220 TUNE_ARGS="--only colwise_3d --select row_major --replace \
      --candidates coop_columns=$COOP_COLUMNS_NARROW" bash "$here/gpu_session.sh" ;;
  22) # the whole GPU suite under the defaults of session 38: "auto" now runs the jagged cooperative kernel for the
      # colwise ops' views whose groups average 2048 positions or more (fp8moe.configs.COOP_MEAN_GROUP). On an H100
      # the rewritten kernel passed every per-group kernel test under "coop" and its own tests
      # (h100-s38-coop-jagged-tests.log: 215 passed). Ran in session 39 on an H100 (h100-s39-call22-suite.log: 4288
      # passed, 0 failed). Files: env.txt, suite.log.
    STEPS="tests" TEST_TIMEOUT=540 bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/suite.log" ;;
  23) # the per-group bench under the defaults of session 38 (torch.compile at each op's first point), then the
      # default kernels against "coop" at the grouped-GEMM step's long-group points and colwise G = 16 (on an H100:
      # coop 0.71-0.86x, h100-s38-coop-jagged-long.md; now "auto" takes it there, so both rows should agree).
      # Files: env.txt, bench.{md,json}, jagged_coop.{md,err}.
    STEPS="bench" BENCH_TIMEOUT=330 BENCH_ARGS="--only per_group --compile first" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log"
    STEPS="jagged" JAGGED_ARGS="--points long" bash "$here/gpu_session.sh" ;;
  24) # the grouped-GEMM step's quantization calls and the step itself with the activation pairs off, then on
      # (FP8MOE_FUSED_ACTIVATIONS): the pairs took over at 2048-row mean groups in session 14 against the dual op on
      # the chunked kernel; there the dual op now runs the jagged cooperative kernel, 0.78-0.86x its former time on
      # an H100 (h100-s38-coop-jagged-long.md), so the threshold may move. Files: env.txt,
      # quant_layouts_{off,on}.md, grouped_mm_{off,on}.md. Ran in session 43 on an H100 (h100-s43-call24-*: the pairs
      # lost at all four shapes, so CUDA takes "off" since); on an H200 it says whether that holds there.
    for fused in off on; do
      FP8MOE_FUSED_ACTIVATIONS=$fused STEPS="layouts grouped" LAYOUTS_TIMEOUT=150 GROUPED_TIMEOUT=120 \
        bash "$here/gpu_session.sh"
      mv "$OUT/quant_layouts.md" "$OUT/quant_layouts_$fused.md"; mv "$OUT/grouped_mm.md" "$OUT/grouped_mm_$fused.md"
      rm -f "$OUT/quant_layouts.log" "$OUT/grouped_mm.log"
    done ;;
  25) # colwise 3D on row-major input, the cooperative kernel's tile beside its twin capped at 128 registers: on an H100
      # the jagged kernel, at 128 registers and 4 programs per SM after session 38's rewrite, ran the bytes of
      # (16, 4096, 4096) in 320.6 us where the dense use, at 151 registers and 3 per SM, took 371.1
      # (h100-s38-coop-jagged-long.md, h100-s38-coop-jagged-before.md). Compiled for sm_90 on the CPU (triton 3.6)
      # the cap spills 24 registers (24 STL, 24 LDL). Since session 39 colwise 3D launches the jagged kernel
      # (launch_coop_experts, 141 registers; capped, 3 spilled), so this forces the cap on that launch: still untimed
      # (session 39's call 26 ran the uncapped tile in its capped row, s39-summary.md). Ran in session 40 on an H100
      # (h100-s40-call25-configs.md: 0.93-0.97x the uncapped time at E = 16, 64 and 128, 1.06x at E = 1), and the
      # cap has been the CUDA default past one expert since. Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=200 TUNE_ARGS="--only colwise_3d --select row_major --replace \
      --candidates coop_columns=256x64/w4,256x64/w4/r128" bash "$here/gpu_session.sh" ;;
  26) # colwise 3D's cooperative use as the jagged kernel with the experts as uniform groups (session 39,
      # fp8moe.kernels._coop_slices.launch_coop_experts): the cooperative and dense kernel tests on the GPU, then
      # benchmarks/probe_colwise3d_experts.py (the dense launch it replaced, the row kernel, the jagged launch and its
      # tile capped at 128 registers, at the four issue #11 3D points). Files: env.txt, pytest.log,
      # colwise3d_experts.{md,err}. Ran in session 39 on an H100 (h100-s39-call26-*: 0.92-0.99x the dense launch;
      # its capped rows ran the uncapped tile, since mended).
    STEPS="tests experts" TEST_TIMEOUT=300 \
      TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_dense.py" bash "$here/gpu_session.sh" ;;
  27) # fp8moe.bench's size-matched copy rows (session 40) alone at every issue #11 point: a device copy of each
      # point's ideal bytes, timed as the kernels are, so that each point's % of copy has its size's own ceiling
      # beside it (the one-read ladder put the stripped kernel's at 79-83% at 16640 x 2048 on the H200,
      # issue11-misses.md). No implementation runs (--no-fp8moe, --compile none). Files: env.txt, bench.{md,json}.
    STEPS="bench" BENCH_TIMEOUT=200 BENCH_ARGS="--no-fp8moe --compile none" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log" ;;
  28) # two register questions of the cooperative slice kernel, each row checked bitwise. First the per-group ops'
      # jagged use at the grouped-GEMM step's long-group points and colwise G = 16 (probe_jagged_coop.py --points
      # long): the default ("auto", which takes "coop" there), "coop", and its tile capped at 128 registers
      # (fp8moe.configs.GROUP_COOP_CAP: 142 -> 128 registers, 3 -> 4 programs per SM, 1 spilled), the cap that took
      # colwise 3D's use of the same kernel to 0.93-0.97x past one expert (h100-s40-call25-configs.md); on an H100
      # the colwise G = 16 point runs at 83% and the dual op's at 67-80% (h100-s43-call23-jagged-coop.md). Then
      # colwise 3D on row-major input under COOP_COLUMNS_WARPS (above) forced one at a time at its four points: 77-78%
      # of copy at (64, 2048, 1408) and (128, 5120, 8192) on an H100 (h100-s43-call26-colwise3d-experts.md), the
      # target 80%. First of all the capped tile's GPU test (bitwise, fused and long pass). Files: env.txt,
      # pytest.log, jagged_coop.{md,err}, configs.md, tune.log.
    STEPS="tests" TEST_TIMEOUT=120 TEST_PATHS="tests/test_kernels_coop_slices.py -k capped" bash "$here/gpu_session.sh"
    STEPS="jagged" JAGGED_ARGS="--points long --cap 128" bash "$here/gpu_session.sh"
    STEPS="tune" TUNE_TIMEOUT=220 TUNE_ARGS="--only colwise_3d --select row_major --replace \
      --candidates coop_columns=$COOP_COLUMNS_WARPS" bash "$here/gpu_session.sh" ;;
  29) # the 3D ops at their issue #11 points read along N (colwise 3D on row-major input, both transpose methods)
      # under today's defaults (colwise 3D's jagged launch capped past one expert, the atomic transpose's cooperative
      # kernel), torch.compile at each op's first point and the copy rows:
      # where the two 3D targets (80% for colwise 3D on row-major input, 1.5x torch.compile) stand on this GPU, in
      # one run. Files: env.txt (dropped after call 28's), bench.{md,json}.
    STEPS="bench" BENCH_TIMEOUT=200 BENCH_ARGS="--only 3d --select row_major --compile first" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log" ;;
  30) # deliverable 4's measurement for the 3D misses on row-major input (session 44, H100: colwise 3D at
      # 65/85/78/78% of copy, the atomic transpose at 77/87/83/77%, the reduction transpose at 96-102% on the same
      # bytes, h100-s44-call29-bench.md): Nsight Compute of each op's launches at the four issue #11 3D points, the
      # reduction transpose as the control that reaches the roofline. Read: DRAM bytes against the ideal (one read?),
      # SMs idle (the E = 1 launch's 2560 programs in 6.5 waves of 3 per SM, each chunk waiting on its slice's
      # others), achieved occupancy, registers and the warp stall reasons (the waits' polling loads). Then colwise 3D
      # again with its tile forced capped (256x64/w4/r128) and uncapped (256x64/w4): the cap took 0.93-0.97x the time
      # past one expert in session 40 and 1.03x at (128, 5120, 8192) in session 44 (h100-s44-call28-configs.md), so
      # the counters say what a fourth program per SM changes. Files: env.txt, ncu.{csv,md,err}, then
      # forced/ncu.{csv,md,err}.
    STEPS="profile" PROFILE_TIMEOUT=240 PROFILE_ARGS="--only 3d --select row_major" bash "$here/gpu_session.sh"
    mkdir -p "$OUT/forced"
    OUT="$OUT/forced" STEPS="profile" PROFILE_TIMEOUT=150 PROFILE_ARGS="--only colwise_3d --select row_major \
      --force coop_columns=256x64/w4/r128,256x64/w4" bash "$here/gpu_session.sh"
    rm -f "$OUT/forced/env.txt" ;;
  31) # colwise 3D on row-major input, its miss split into rungs at the bytes of three of its points (E, K, N) =
      # (1, 8192, 5120), (16, 8192, 5120), (64, 2048, 1408) as (E * K) x N (session 44, H100: the op at 65/85/78% of
      # copy, h100-s44-call29-bench.md; Nsight Compute put it at 70-76% of DRAM peak, 16 warps per SM, long-scoreboard
      # stalls first, h100-s44-call30-ncu.md). Rung 1, transpose_ceiling.py slice 0: the transposing cast alone
      # (constant scale), pointer and row (not transposing) forms. Rung 2, slice 256: each 256-token tile its own
      # slice, amax and cast from registers, no program waiting for another. Rung 3, probe_coop_slices.py: the
      # stripped cooperative kernel, a K-long slice cut into 256-token chunks that meet through atomics, beside
      # per_group_colwise_scales on the same bytes. Every row checked byte for byte first. Files: env.txt,
      # ceiling.{md,log}, coop_slices.{md,log}.
    (
      source "$here/device_setup.sh"
      timeout 240 python3 benchmarks/transpose_ceiling.py --shapes 8192x5120,131072x5120,131072x1408 --slices 0,256 \
        --modes ptr,rows --tiles 256x64/w4,64x64/w4 --out "$OUT/ceiling.md" >"$OUT/ceiling.log" 2>&1
      echo "ceiling exit $? after ${SECONDS}s" >>"$OUT/env.txt"
      timeout 150 python3 benchmarks/probe_coop_slices.py --points 8192x5120/8192,131072x5120/8192,131072x1408/2048 \
        --variants op,coop256x64/w4 --out "$OUT/coop_slices.md" >"$OUT/coop_slices.log" 2>&1
      echo "coop_slices exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  32) # call 31's third rung taken apart at the same bytes (session 44, H100, h100-s44-call31-*: each 256-token tile
      # its own slice ran at 88/96/94% of copy, the stripped cooperative kernel, whose 256-token chunks meet over the
      # K-long slice, at 62/74/72%, the op at 61/84/74%): the stripped kernel in full, then with the program id for
      # its ticket (/pid), its amax read back by loads (/ld), its chunks folding and arriving without waiting
      # (/arrive), no atomics at all (/local), and both (/pid/local). Each row checked byte for byte (the /arrive and
      # /local rows at the chunk's length). Files: env.txt, coop_rungs.{md,log}.
    (
      source "$here/device_setup.sh"
      timeout 200 python3 benchmarks/probe_coop_slices.py --points 8192x5120/8192,131072x5120/8192,131072x1408/2048 \
        --variants op,coop256x64/w4,coop256x64/w4/pid,coop256x64/w4/ld,coop256x64/w4/arrive,coop256x64/w4/local,\
coop256x64/w4/pid/local --out "$OUT/coop_rungs.md" >"$OUT/coop_rungs.log" 2>&1
      echo "coop_rungs exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  33) # the wait is the cooperative kernel's cost (session 44, H100, h100-s44-call32-coop_rungs.md: the stripped kernel
      # at 62/74/72% of copy, its chunks folding and arriving without waiting at 80/92/90%, no atomics 85/95/94%).
      # /defer<D> takes the wait off the tile: each program folds and arrives with one chunk, then casts the chunk D
      # tickets earlier, read again from L2 (probe_coop_slices._deferred_kernel; no program can wait for one not yet
      # started). D from the most chunks per slice here (32) to 1024 (32 MiB of bf16 read in between, near the L2's
      # size). Each row checked byte for byte. Files: env.txt, coop_defer.{md,log}.
    (
      source "$here/device_setup.sh"
      timeout 200 python3 benchmarks/probe_coop_slices.py --points 8192x5120/8192,131072x5120/8192,131072x1408/2048 \
        --variants op,coop256x64/w4,coop256x64/w4/arrive,coop256x64/w4/defer32,coop256x64/w4/defer64,\
coop256x64/w4/defer128,coop256x64/w4/defer256,coop256x64/w4/defer512,coop256x64/w4/defer1024 \
        --out "$OUT/coop_defer.md" >"$OUT/coop_defer.log" 2>&1
      echo "coop_defer exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  34) # the wait, not the holding: deferring the meeting (each program folds one chunk and casts an earlier one read
      # again) ran no faster than the full kernel, 0.97-1.02x at best (session 44, H100, h100-s44-call33-coop_defer.md).
      # What the waiting programs do: poll their slice's count back to back, on a line that 31 other items' counts
      # and both tickets share. Here the stripped kernel with each count and ticket on its own 128-byte line (/pad),
      # with 32-512 ns of sleep between polls (/sleep<N>), and both, beside the no-wait rung (/arrive). Each row
      # checked byte for byte. Files: env.txt, coop_poll.{md,log}.
    (
      source "$here/device_setup.sh"
      timeout 200 python3 benchmarks/probe_coop_slices.py --points 8192x5120/8192,131072x5120/8192,131072x1408/2048 \
        --variants op,coop256x64/w4,coop256x64/w4/arrive,coop256x64/w4/pad,coop256x64/w4/sleep32,\
coop256x64/w4/sleep128,coop256x64/w4/sleep512,coop256x64/w4/pad/sleep128 \
        --out "$OUT/coop_poll.md" >"$OUT/coop_poll.log" 2>&1
      echo "coop_poll exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  35) # the cooperative slice kernel with each ticket and arrival count on a 128-byte line of its own
      # (fp8moe.kernels._coop_slices._LINE, session 44): the stripped kernel took 0.87-0.92x the time so
      # (h100-s44-call34-coop_poll.md). The 3D ops read along N under the defaults (colwise 3D and the atomic
      # transpose run it; the reduction transpose and the copy rows as controls; before: h100-s44-call29-bench.md,
      # 65/85/78/78% and 77/87/83/77%), the per-group ops' long-group points (before: h100-s44-call28-jagged_coop.md),
      # then the whole GPU suite. Files: env.txt, bench.{md,json}, jagged_coop.{md,err}, suite.log.
    STEPS="bench" BENCH_TIMEOUT=150 BENCH_ARGS="--only 3d --select row_major --compile none" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log"
    STEPS="jagged" JAGGED_ARGS="--points long" bash "$here/gpu_session.sh"
    STEPS="tests" TEST_TIMEOUT=350 bash "$here/gpu_session.sh"
    mv "$OUT/pytest.log" "$OUT/suite.log" ;;
  36) # the cooperative 3D uses' tiles forced one at a time at their four row-major points, each row checked bitwise,
      # now that every counter lies on a line of its own (fp8moe.kernels._coop_slices._LINE, session 44: the atomic
      # transpose 77/87/83/77% -> 82/94/86/83%, colwise 3D 65/85/78/78% -> 70/85/79/78%, h100-s44-call35-bench.md).
      # The tiles were chosen under the shared lines (sessions 37-40), where a tile of more, shorter chunks per slice
      # polled a busier line; the rules' tiles come first in each list. Files: env.txt, configs_{columns,transpose}.md,
      # tune_{columns,transpose}.log.
    STEPS="tune" TUNE_TIMEOUT=230 TUNE_ARGS="--only colwise_3d --select row_major --replace \
      --candidates coop_columns=$COOP_COLUMNS_LINES" bash "$here/gpu_session.sh"
    mv "$OUT/configs.md" "$OUT/configs_columns.md"; mv "$OUT/tune.log" "$OUT/tune_columns.log"
    STEPS="tune" TUNE_TIMEOUT=230 TUNE_ARGS="--only rowwise_3d_transpose_rhs --select method=atomic --replace \
      --candidates coop_transpose=$COOP_TRANSPOSE_LINES" bash "$here/gpu_session.sh"
    mv "$OUT/configs.md" "$OUT/configs_transpose.md"; mv "$OUT/tune.log" "$OUT/tune_transpose.log" ;;
  37) # the per-group ops' jagged cooperative launch with its counters packed (the default) and a line apart
      # (fp8moe.configs.GROUP_COOP_COUNT_LINES) in one run on one machine, at the long-group points, each row checked
      # bitwise: session 44 saw 1.03-1.12x with them a line apart, but from two machines (h100-s44-call28- against
      # -call35- and -call36-jagged_coop.md), where the dense launch and colwise 3D's took 0.93-0.97x. If one machine
      # agrees, the default stays; if not, GROUP_COOP_COUNT_LINES goes on. Files: env.txt, jagged_coop.{md,err}.
    STEPS="jagged" JAGGED_ARGS="--points long --lines" bash "$here/gpu_session.sh" ;;
  38) # the per-group colwise ops at their short-group issue #11 points (G = 64 and 128, aligned16, random16, random,
      # empty_middle; G = 16 for contrast) on the jagged cooperative kernel, which reads each element once whatever the
      # group sizes: the span kernel "auto" runs there reads a group past its one-read tile twice, and the random
      # layouts cost it 1.10-1.49x (issue11-misses.md: 57-73% of copy on an H100 at random16/random/empty_middle
      # against 80-89% aligned). The cooperative kernel's final form (session 38) is untimed at these points; its
      # intermediate form ran 2.5-4x slower there (h100-s38-coop-jagged-bytestores-colwise.md). First the bench of
      # both colwise ops under the defaults with the copy rows (no torch.compile), then every GROUP_COOP_SHORT tile
      # forced under FP8MOE_PER_GROUP_KERNEL=coop at the same points, each checked bitwise. "auto" cannot read the
      # layout (offs is on the device), so a tile that wins only at the random layouts would not be taken by it.
      # Files: env.txt, bench.{md,json}, configs.md, tune.log.
    STEPS="bench" BENCH_TIMEOUT=200 BENCH_ARGS="--only per_group_colwise --compile none" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log"
    FP8MOE_PER_GROUP_KERNEL=coop STEPS="tune" TUNE_TIMEOUT=330 \
      TUNE_ARGS="--only per_group_colwise --replace --candidates group_coop=$GROUP_COOP_SHORT" bash "$here/gpu_session.sh" ;;
  39) # the wait for a slice's other chunks costs colwise 3D's cooperative kernel 18 points of copy (session 44, H100:
      # the stripped kernel with a line per counter at 68/81/83%, its chunks arriving without waiting at 80/92/90%,
      # h100-s44-call34-coop_poll.md); deferring the meeting by re-reading from L2 did not pay (call 33). /pipe<P> keeps
      # the chunk in registers and hides the wait under the next chunk's load instead: a persistent grid of P programs
      # per SM, each holding two half-size tiles (probe_coop_slices._pipelined_kernel). Compiled for sm_90 on the CPU
      # (triton 3.6): 128x64/w4 152 registers, 3 per SM; 256x32/w4 150, 3; 64x128/w4 149, 3; 128x32/w2 150, 6;
      # 256x64/w8 152, 1 (the single-tile 128x64/w4 96, 5). Beside the op, the full stripped kernel with its counters
      # a line apart (fp8moe's form since session 44) and the no-wait rung, at colwise 3D's bytes. Each row checked
      # byte for byte. Files: env.txt, coop_pipe.{md,log}.
    (
      source "$here/device_setup.sh"
      timeout 240 python3 benchmarks/probe_coop_slices.py --points 8192x5120/8192,131072x5120/8192,131072x1408/2048 \
        --variants op,coop256x64/w4/pad,coop256x64/w4/arrive,coop128x64/w4/pad/pipe3,coop256x32/w4/pad/pipe3,\
coop64x128/w4/pad/pipe3,coop128x32/w2/pad/pipe6,coop128x64/w4/pad/pipe2,coop256x64/w8/pad/pipe1 \
        --out "$OUT/coop_pipe.md" >"$OUT/coop_pipe.log" 2>&1
      echo "coop_pipe exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  40) # the 3D ops read along N under session 45's tile rules, chosen from call 36's forced tiles on an H100
      # (h100-s45-call36-configs_{columns,transpose}.md): colwise 3D's tile capped at 128 registers at every E (the
      # uncapped tile took 1.05x its time at E = 1 with the counters a line apart), the atomic transpose's 1024 x 16 /
      # 4 warps (512 x 16 / 2 warps for short rows that mask fewer lanes so, N = 1408), 1.00-1.03x the best of six at
      # each point where the former rule's tiles took 1.01-1.12x. First the bench with torch.compile at each op's
      # first point and the copy rows (before: h100-s44-call35-bench.md), then the GPU tests of the cooperative
      # kernel, the dense ops' cooperative tests and the rules. Files: env.txt, bench.{md,json}, pytest.log.
    STEPS="bench" BENCH_TIMEOUT=200 BENCH_ARGS="--only 3d --select row_major --compile first" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log"
    STEPS="tests" TEST_TIMEOUT=150 \
      TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_dense.py tests/test_configs.py -k coop" \
      bash "$here/gpu_session.sh" ;;
  41) # every issue #11 point under the defaults, with torch.compile at each op's first point and the copy rows: the
      # standing of the issue on the GPU it runs on, read against the targets at the end of bench.md
      # (fp8moe.bench_targets). On an H100 the per-group points took 172 s and the 3D ones 132 s in session 46
      # (h100-s46-call23-bench.md, h100-s46-call40-bench.md); the bench writes after every point, so a time limit
      # keeps what ran (colwise 3D on column-major input and the reduction transpose, already at 94-103%, come
      # last). Files: env.txt, bench.{md,json,png}.
    STEPS="bench" BENCH_TIMEOUT=540 BENCH_ARGS="--compile first" bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.log" ;;
  42) # colwise 3D on row-major input, its cooperative tile capped at 128 registers (the rule at every E) and
      # uncapped, forced one at a time at the seven corners of benchmarks/tune_configs.py --points cap, each row
      # checked bitwise: at (16, 8192, 5120) the cap is faster, at (128, 5120, 8192) the uncapped tile was, 1.03-1.04x
      # in two runs (h100-s44-call28-configs.md, h100-s45-call36-configs_columns.md); which factor flips it says
      # whether a rule can take the uncapped tile there (77% of copy under the cap in session 46, 80% its target).
      # Files: env.txt, configs.md, tune.log.
    STEPS="tune" TUNE_TIMEOUT=330 TUNE_ARGS="--points cap --only colwise_3d --replace \
      --candidates coop_columns=256x64/w4/r128,256x64/w4" bash "$here/gpu_session.sh" ;;
  43) # the per-group ops' unaligned group edges (the bench's random and empty_middle points: 58% and 61% of copy on
      # an H100 in session 46, against 72-82% at the same shape's 16-aligned layouts) cast after the op by a kernel of
      # their own, each chunk that holds an unaligned group end as whole 16-byte rows of q (benchmarks/
      # probe_unaligned.py, deferred_edges: the op without its edge stores, then that kernel; edge_chunks_alone: that
      # kernel by itself), beside main and the op without its edge stores, on the tiles the H100 chose in session 46,
      # every exact variant checked bitwise. Files: env.txt, unaligned.{md,log}.
    STEPS="unaligned" UNALIGNED_TIMEOUT=280 \
      UNALIGNED_ARGS="--variants main,no_edge_stores,deferred_edges,edge_chunks_alone" bash "$here/gpu_session.sh" ;;
  44) # call 43's edge kernel (16-column windows) took 36-37 us alone at the colwise op's unaligned layouts, where
      # the op's own edge stores cost 3-8 us (h100-s47-call43-unaligned.md): its 16-byte rows fill half a 32-byte
      # sector of q, which lies in DRAM by then. The same kernel writing whole sectors (32 columns) and whole
      # 128-byte lines (128), the op's interior codes around each edge rewritten with the same bytes, on the tile
      # the op takes at aligned groups, every variant checked bitwise. Then colwise 3D on row-major input under the
      # rule that drops the register cap from 128 experts (h100-s47-call42-configs.md: uncapped 0.96-0.98x there),
      # bench rows against the copy, no torch.compile. Files: env.txt, unaligned.{md,log}, bench.{md,json}. Ran in
      # session 47: the bench marked (128, 5120, 8192) not bitwise and the log that said which check failed was
      # deleted here (call 45 keeps it).
    STEPS="unaligned" UNALIGNED_TIMEOUT=240 UNALIGNED_ARGS="--variants main,no_edge_stores,deferred_edges,\
deferred_edges_w32,deferred_edges_w128,edge_chunks_alone,edge_chunks_w32_alone,edge_chunks_w128_alone" \
      bash "$here/gpu_session.sh"
    STEPS="bench" BENCH_TIMEOUT=150 BENCH_ARGS="--only colwise_3d --select row_major --compile none" \
      bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" "$OUT/bench.log" ;;
  45) # colwise 3D on row-major input at (128, 5120, 8192): call 44's bench marked it not bitwise under the uncapped
      # tile (a rule tried in session 47, reverted), which three runs of that tile on the same inputs did not repeat
      # with outputs not poisoned (h100-s47-call45-repeat.log). The uncapped tile then the capped one, three runs each,
      # every tensor the op allocates filled with 0x5A bytes first, each output against fp8ref
      # (benchmarks/probe_coop_repeat.py), then the bench at the four 3D points under the capped default with its
      # log kept. Files: env.txt, repeat.log, bench.{md,json,log}.
    (
      source "$here/device_setup.sh"
      timeout 330 python3 "$here/probe_coop_repeat.py" --runs 3 >"$OUT/repeat.log" 2>&1
      echo "repeat exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    )
    STEPS="bench" BENCH_TIMEOUT=150 BENCH_ARGS="--only colwise_3d --select row_major --compile none" \
      bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" ;;
  46) # the race session 48 found in the cooperative slice kernel as Triton 3.6 compiles it: no barrier between the
      # folds of warps 0 and 1 and warp 0's arrival (benchmarks/sass_counts.py --meetings). Both forms ("no-barrier",
      # the code before session 48; "barrier", fp8moe.kernels._coop.arrive; "acquire", an acquire atomic on the
      # count after the wait, the formal order: its cost), 4000 runs each of colwise 3D on
      # row-major input, the atomic transpose and the per-group colwise op at G = 16 long groups (the jagged launch),
      # on inputs where a missed fold changes most codes, each run against fp8ref byte for byte, then each form
      # timed over 200 calls (benchmarks/probe_coop_race.py; 4-6 minutes); then the GPU tests of the
      # cooperative kernels. Files: env.txt, race.log, pytest.log. Ran in session 49 on an H100
      # (h100-s49-call46-*: no run differed in any form).
    (
      source "$here/device_setup.sh"
      timeout 360 python3 "$here/probe_coop_race.py" --runs 4000 >"$OUT/race.log" 2>&1
      echo "race exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    )
    STEPS="tests" TEST_TIMEOUT=120 TEST_PATHS="tests/test_kernels_coop_slices.py tests/test_kernels_dense.py -k coop" \
      bash "$here/gpu_session.sh" ;;
  47) # call 46 ran in session 49 on an H100 (h100-s49-call46-race.log): no form differed in 4000 runs of each use,
      # the barrier cost nothing measurable. Its colwise point was (16, 8192, 5120) under the capped tile; session
      # 47's not-bitwise row was (128, 5120, 8192) under the uncapped one. The race there, both tiles forced, the
      # code before session 48 and as it ships, 1000 runs each on the probe's spiked inputs (drawn on the GPU; four
      # processes, 1-2 minutes each), then the bench at the four 3D points on row-major input under the defaults,
      # with its log (session 47's had the failed check's lines deleted). Files: env.txt, race.log,
      # bench.{md,json,log}.
    (
      source "$here/device_setup.sh"
      timeout 330 python3 "$here/probe_coop_race.py" --ops colwise_3d --colwise-shape 128,5120,8192 \
        --colwise-tiles 256x64/w4,256x64/w4/r128 --forms no-barrier,barrier --runs 1000 >"$OUT/race.log" 2>&1
      echo "race exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    )
    STEPS="bench" BENCH_TIMEOUT=150 BENCH_ARGS="--only colwise_3d --select row_major --compile none" \
      bash "$here/gpu_session.sh"
    rm -f "$OUT/bench.png" ;;
  48) # session 50: the slice kernel's meeting in the order the PTX memory model makes formal, at no instruction
      # added. The kernel as it ships polls the count with volatile loads and reads the folded amax by an acquire
      # atomic after a barrier; formally the poll that sees the count complete must itself acquire (SPEC §10.2,
      # "Arrival order"). Call 46's "acquire" form adds an atomic per program for it, 1.000-1.007x the time on an
      # H100 (h100-s49-call46-race.log), not taken: the atomic transpose clears 85% of copy by 0.2 points at
      # (1, 8192, 5120). "poll-acquire" (benchmarks/arrival_forms.py) makes every poll an acquire load instead:
      # the same registers, atomics and memory barriers in every phase under Triton 3.6 and 3.9, an L1 invalidate
      # after each poll (tests/test_kernel_instructions.py). At call 46's three uses, 2000 runs each of the kernel
      # as it ships, poll-acquire and acquire, then the first two again (drift between processes), each run against
      # fp8ref byte for byte and each form timed over 200 calls back to back (15 processes, 4-6 minutes). If
      # poll-acquire costs no more than the run-to-run spread of the shipping form, it becomes fp8moe's wait on
      # CUDA after a whole GPU suite under it (call 22). Files: env.txt, race.log.
    (
      source "$here/device_setup.sh"
      timeout 420 python3 "$here/probe_coop_race.py" --forms barrier,poll-acquire,acquire,barrier,poll-acquire \
        --runs 2000 >"$OUT/race.log" 2>&1
      echo "race exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    ) ;;
  short) # the call for a budget that fits one short call (session 41 spent 1537 of its 1800 device-seconds on
      # starts that failed, and a start costs 90-180 s): what matters most on the GPU it gets. On an H200 the per-group
      # bench under today's defaults with its copy rows and no torch.compile (every H200 timing of the per-group ops
      # is session 33's, before the jagged cooperative kernel took the long groups); elsewhere call 47's first half,
      # the slice kernel's arrival without and with its barrier at session 47's not-bitwise point, both tiles, 500
      # runs each. GPU_NAME overrides nvidia-smi's list (the tests run it without a GPU). Files: env.txt, then
      # bench.{md,json} or race.log.
    if grep -q H200 <<<"${GPU_NAME:-$(nvidia-smi -L 2>/dev/null)}"; then
      STEPS="bench" BENCH_TIMEOUT=200 BENCH_ARGS="--only per_group --compile none" bash "$here/gpu_session.sh"
      rm -f "$OUT/bench.png" "$OUT/bench.log"
    else
      source "$here/device_setup.sh"
      timeout 200 python3 "$here/probe_coop_race.py" --ops colwise_3d --colwise-shape 128,5120,8192 \
        --colwise-tiles 256x64/w4,256x64/w4/r128 --forms no-barrier,barrier --runs 500 >"$OUT/race.log" 2>&1
      echo "race exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    fi ;;
  *) echo "no prepared call $1: 1 to 48, h200, h200-3d, h200-pdl, h100 or short" >&2; exit 2 ;;
esac
