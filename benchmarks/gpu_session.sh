#!/usr/bin/env bash
# Everything the GPU verifies, in one device call (a session has 30 device-minutes; one call at most 10):
#   1. `fp8ref bringup --exhaustive` alone on the GPU(s): all 2^32 f32 inputs per format and cast path, then the
#      kernel matrix. It rewrites its certificate after every stage, so a time limit leaves the finished stages.
#   2. tests: the test suite on the GPU(s), verbose so a time limit still leaves every finished test by name
#      (kernels bitwise vs fp8ref, compile == eager, opcheck, no host syncs, int64 indexing over 2^31 elements);
#      pytest-xdist workers spread over the GPUs.
#   3. bench: python -m fp8moe.bench at the issue #11 shapes (benchmarks/results/h200-bench-*.{json,md,png}).
#   4. grouped: the FP8 grouped-GEMM step vs bf16 (benchmarks/bench_grouped_mm.py).
#   5. profile: Nsight Compute counters of the autotuned kernels (benchmarks/profile_kernels.py), PROFILE_SELECT points
#      (or PROFILE_ARGS, e.g. "--activations 16640,2048,64": the activation pair beside its two ops).
#   6. tune: every CUDA launch-config candidate timed at the MoE shapes (benchmarks/tune_configs.py).
#   7. host: the host cost of one call, layer by layer, launch plans on and off (benchmarks/host_overhead.py;
#      HOST_ARGS="--split": one replayed call by part, HOST_ARGS="--points": host time at the issue #11 points).
#   8. pair: each fused pair vs its two ops (benchmarks/probe_pairs.py, PAIR_ARGS).
#   9. layouts: each quantization call of the grouped-GEMM step, both B_t layouts (bench_grouped_mm --quant-layouts).
#  10. unaligned: what unaligned group edges cost the span kernel, edge code intact and removed
#      (benchmarks/probe_unaligned.py).
#  11. gap: the one-read per-group path against the stripped ceiling kernel, one difference at a time
#      (benchmarks/probe_one_read_gap.py).
#  12. long: long transposing slices with few programs and cp.async pipelines against the op
#      (benchmarks/probe_long_slices.py; LONG_ARGS="--points short --variants short": short slices read
#      through tensor descriptors, the bulk tensor copy engine).
#  13. scale: fp8moe's f32 scale helper against fp8ref.amax_to_scale for every non-negative f32 amax, on the GPU
#      (benchmarks/scale_division_exhaustive.py --device cuda); runs before the tests.
#  14. jagged: the per-group ops under the default kernels and the jagged cooperative form, checked against fp8ref
#      (benchmarks/probe_jagged_coop.py, JAGGED_ARGS, default --points G16).
#  15. experts: colwise 3D on row-major input, the cooperative kernel's dense launch against its jagged launch
#      (benchmarks/probe_colwise3d_experts.py).
# Knobs: STEPS (default "bringup tests"; any of bringup tests bench grouped profile tune host pair layouts unaligned
# gap long scale jagged experts), DEVICES=all on a multi-GPU machine (bring-up shards one process per GPU), BRINGUP_TIMEOUT,
# TEST_TIMEOUT, BENCH_TIMEOUT, GROUPED_TIMEOUT, PROFILE_TIMEOUT, TUNE_TIMEOUT, GAP_TIMEOUT, LONG_TIMEOUT,
# SCALE_TIMEOUT (seconds), BENCH_ARGS, UNALIGNED_ARGS (e.g. "--variants main,deferred_edges")
# (e.g. "--compile first"), TEST_PATHS (default: the whole suite), GAP_GROUPS (the gap ladders' group sizes, default
# 128).
# Logs land in $OUT (the device tool brings back at most 8 files); commit them under benchmarks/results/.
source "$(dirname "$0")/device_setup.sh"

steps=" ${STEPS:-bringup tests} "
devices=()
[ -n "${DEVICES:-}" ] && devices=(--devices "$DEVICES")
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")

if [[ $steps == *" bringup "* ]]; then
  timeout "${BRINGUP_TIMEOUT:-300}" python3 -m fp8ref bringup --device cuda "${devices[@]}" --exhaustive --no-progress \
    --out "$OUT/bringup" >"$OUT/bringup.log" 2>&1
  echo "bringup exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi

if [[ $steps == *" scale "* ]]; then
  # About 2^31 amax per fp8 max and pow2 setting; one line per setting, exit 1 on any difference.
  timeout "${SCALE_TIMEOUT:-90}" python3 benchmarks/scale_division_exhaustive.py --device cuda \
    >"$OUT/scale_division.log" 2>&1
  echo "scale exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi

if [[ $steps == *" tests "* ]]; then
  # Compilation is CPU-bound: 3 workers per 4 cores, spread over the GPUs by worker index (fp8ref.pytest_plugin).
  # The whole suite took 270 s on one H200 with 12 workers (benchmarks/results/h200-s14-call3-env.txt).
  # The GPU-only integration tests (compile, opcheck, sync-debug, int64) go first so a time limit cannot skip them.
  workers=$(( $(nproc) * 3 / 4 > gpus ? $(nproc) * 3 / 4 : gpus ))
  timeout "${TEST_TIMEOUT:-360}" python3 -m pytest -n "$workers" -v -ra --durations=25 -p no:cacheprovider \
    --timeout 300 --device cuda --fp8ref-grid covering --ignore=tests/test_bringup_cli.py \
    --ignore=tests/test_notebooks.py --fp8ref-artifacts "$OUT/artifacts" tests/test_gpu_integration.py ${TEST_PATHS:-tests} \
    >"$OUT/pytest.log" 2>&1
  echo "pytest exit $? after ${SECONDS}s" >>"$OUT/env.txt"
  # At most 8 files come back: failure artifacts travel as one archive.
  if [ -d "$OUT/artifacts" ]; then tar czf "$OUT/artifacts.tgz" -C "$OUT" artifacts && rm -rf "$OUT/artifacts"; fi
fi

if [[ $steps == *" bench "* ]]; then
  timeout "${BENCH_TIMEOUT:-190}" python3 -m fp8moe.bench ${BENCH_ARGS:-} --out "$OUT/bench" >"$OUT/bench.log" 2>&1
  echo "bench exit $? after ${SECONDS}s" >>"$OUT/env.txt"
  # why a row is not bitwise, kept where the calls that delete bench.log keep it (session 47 lost it so)
  grep -E "output differs|compare failed" "$OUT/bench.log" | cut -c1-600 | head -20 >>"$OUT/env.txt"
fi

if [[ $steps == *" grouped "* ]]; then
  # The FP8 grouped-GEMM training step vs bf16 (benchmarks/bench_grouped_mm.py); GROUPED_ARGS e.g. "--triton-gemm fwd".
  timeout "${GROUPED_TIMEOUT:-200}" python3 benchmarks/bench_grouped_mm.py ${GROUPED_ARGS:-} --out "$OUT/grouped_mm.md" \
    >"$OUT/grouped_mm.log" 2>&1
  echo "grouped exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi

if [[ $steps == *" profile "* ]]; then
  # Hardware counters (Nsight Compute) of the autotuned kernels at the points PROFILE_SELECT names
  # (benchmarks/profile_kernels.py --help); the raw CSV and its Markdown summary.
  timeout "${PROFILE_TIMEOUT:-200}" ncu --profile-from-start off --clock-control none --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
    --metrics 'dram__bytes_read.sum,dram__bytes_write.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    --csv --page details python3 benchmarks/profile_kernels.py ${PROFILE_ARGS:---select "${PROFILE_SELECT:-per_group}"} \
    >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "profile exit $? after ${SECONDS}s" >>"$OUT/env.txt"
  python3 benchmarks/profile_kernels.py --summarize "$OUT/ncu.csv" >"$OUT/ncu.md" 2>>"$OUT/ncu.err"
fi

if [[ $steps == *" tune "* ]]; then
  # TUNE_ARGS: e.g. "--only per_group --groups-fastest-twins" (each per-group tile in both grid orders; see
  # benchmarks/tune_configs.py --help)
  timeout "${TUNE_TIMEOUT:-240}" python3 benchmarks/tune_configs.py ${TUNE_ARGS:-} --out "$OUT/configs.md" \
    >"$OUT/tune.log" 2>&1
  echo "tune exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" pair "* ]]; then
  timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/probe_pairs.py ${PAIR_ARGS:-} >"$OUT/pair.log" 2>&1
  echo "pair exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" layouts "* ]]; then
  timeout "${LAYOUTS_TIMEOUT:-240}" python3 benchmarks/bench_grouped_mm.py --quant-layouts --out "$OUT/quant_layouts.md" \
    >"$OUT/quant_layouts.log" 2>&1
  echo "layouts exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" unaligned "* ]]; then
  timeout "${UNALIGNED_TIMEOUT:-200}" python3 benchmarks/probe_unaligned.py --out "$OUT/unaligned.md" \
    ${UNALIGNED_ARGS:-} >"$OUT/unaligned.log" 2>&1
  echo "unaligned exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" gap "* ]]; then
  # GAP_GROUPS: one ladder per group size (tokens per group = the one-read tile's token extent), e.g. "128 256".
  # The table goes to stdout row by row: one file per ladder (the log) holds it and any error.
  for group in ${GAP_GROUPS:-128}; do
    timeout "${GAP_TIMEOUT:-150}" python3 benchmarks/probe_one_read_gap.py --group "$group" \
      >"$OUT/one_read_gap_$group.log" 2>&1
    echo "gap (groups of $group) exit $? after ${SECONDS}s" >>"$OUT/env.txt"
  done
fi
if [[ $steps == *" long "* ]]; then
  # The table goes to stdout row by row: one file (the log) holds it and any error.
  timeout "${LONG_TIMEOUT:-240}" python3 benchmarks/probe_long_slices.py ${LONG_ARGS:-} >"$OUT/long_slices.log" 2>&1
  echo "long exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" host "* ]]; then
  timeout "${HOST_TIMEOUT:-120}" python3 benchmarks/host_overhead.py ${HOST_ARGS:-} >"$OUT/host_overhead.txt" 2>&1
  echo "host exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" jagged "* ]]; then
  # The table to stdout, any error apart (benchmarks/probe_jagged_coop.py, JAGGED_ARGS: --points G16 or colwise).
  timeout "${JAGGED_TIMEOUT:-150}" python3 benchmarks/probe_jagged_coop.py ${JAGGED_ARGS:---points G16} \
    >"$OUT/jagged_coop.md" 2>"$OUT/jagged_coop.err"
  echo "jagged exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ $steps == *" experts "* ]]; then
  timeout "${EXPERTS_TIMEOUT:-150}" python3 benchmarks/probe_colwise3d_experts.py >"$OUT/colwise3d_experts.md" \
    2>"$OUT/colwise3d_experts.err"
  echo "experts exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi

cat "$OUT/env.txt" "$OUT/scale_division.log" 2>/dev/null; tail -30 "$OUT/pytest.log" 2>/dev/null; tail -12 "$OUT/bringup.log" 2>/dev/null
cat "$OUT/pair.log" "$OUT/grouped_mm.md" "$OUT/unaligned.md" "$OUT"/one_read_gap_*.log "$OUT/long_slices.log" 2>/dev/null
true  # the call's status is each step's own line in env.txt, not whether every optional log above exists
