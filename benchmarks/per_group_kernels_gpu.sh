#!/usr/bin/env bash
# One device call for the jagged kernels: the GPU tests of the chunked kernel and every per-group kernel test on all
# three kernels, then benchmarks/probe_per_group_kernels.py (span vs chunked under each config). STEPS picks the
# parts ("tests probe" by default; "profile" adds Nsight Compute per jagged kernel, "bench" python -m fp8moe.bench
# of the per-group ops on the chunked kernel, "gemm" the grouped-GEMM step). Logs go to $OUT.
set -uo pipefail
: "${OUT:?set OUT to a directory for the logs}"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
{
  date -u; nvidia-smi -L
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} >"$OUT/env.txt" 2>&1
steps=" ${STEPS:-tests probe} "
if [[ "$steps" == *" tests "* ]]; then
  timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -n 12 -q -ra --timeout 120 -p no:cacheprovider --device cuda \
    --fp8ref-grid covering ${TEST_PATHS:-tests/test_kernels_group_chunks.py tests/test_kernels_per_group.py } \
    >"$OUT/tests.log" 2>&1
  echo "tests exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ "$steps" == *" probe "* ]]; then
  timeout "${PROBE_TIMEOUT:-240}" python3 benchmarks/probe_per_group_kernels.py ${PROBE_ARGS:-} \
    ${PROBE_SELECT:+--select "$PROBE_SELECT"} >"$OUT/probe.log" 2>&1
  echo "probe exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ "$steps" == *" profile "* ]]; then
  # Nsight Compute at PROFILE_SELECT's points once per jagged kernel of PROFILE_KERNELS (span, chunks, chunks:I for
  # fp8moe.configs.GROUP_CHUNKS.cuda[I]): DRAM bytes against the ideal, L2 hit rate, stalls (profile_kernels.py).
  for kernel in ${PROFILE_KERNELS:-span chunks:0 chunks:7}; do
    name=${kernel/:/-}
    timeout "${PROFILE_TIMEOUT:-90}" ncu --profile-from-start off --clock-control none --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
      --metrics 'dram__bytes_read.sum,dram__bytes_write.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      --csv --page details python3 benchmarks/profile_kernels.py --jagged-kernel "$kernel" \
      --select "${PROFILE_SELECT:-per_group_colwise_scales 65536x4096}" >"/tmp/ncu-$name.csv" 2>>"$OUT/ncu.err"
    echo "profile $kernel exit $? after ${SECONDS}s" >>"$OUT/env.txt"
    { echo "## $kernel"; python3 benchmarks/profile_kernels.py --summarize "/tmp/ncu-$name.csv"; } >>"$OUT/ncu.md" 2>>"$OUT/ncu.err"
  done
fi
if [[ "$steps" == *" bench "* ]]; then
  FP8MOE_PER_GROUP_KERNEL=${BENCH_KERNEL:-chunks} timeout "${BENCH_TIMEOUT:-200}" python3 -m fp8moe.bench \
    --compile none ${BENCH_ARGS:-} --out "$OUT/bench" >"$OUT/bench.log" 2>&1
  echo "bench exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ "$steps" == *" gemm "* ]]; then
  FP8MOE_PER_GROUP_KERNEL=${BENCH_KERNEL:-chunks} timeout "${GEMM_TIMEOUT:-150}" python3 benchmarks/bench_grouped_mm.py \
    ${GEMM_ARGS:-} --out "$OUT/grouped-mm.md" >"$OUT/grouped-mm.log" 2>&1
  echo "gemm exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
cat "$OUT/env.txt"; cat "$OUT/probe.log" 2>/dev/null; tail -15 "$OUT/tests.log" 2>/dev/null
