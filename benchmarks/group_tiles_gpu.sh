#!/usr/bin/env bash
# One device call for the one-read per-group kernel (fp8moe.kernels._group_tiles): its GPU tests (both jagged
# kernels), then the bench of each per-group op on the tile kernel with the span kernel beside it
# (benchmarks/span_kernels.py), then every tile candidate forced in turn (benchmarks/tune_configs.py); STEPS=probe
# runs benchmarks/probe_group_tiles.py (tile kernel, tile kernel without waits, span kernel, side by side). At most 8 files come back: the Markdown tables and plots
# are rebuilt from the JSON here (python -m fp8moe.bench writes them from the same rows).
set -uo pipefail
: "${OUT:?set OUT to a directory for the logs}"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
{
  date -u; nvidia-smi -L; git log -1 --format='%H %s' 2>/dev/null
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} >"$OUT/env.txt" 2>&1

if [[ " ${STEPS:-tests bench tune} " == *" tests "* ]]; then
  timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -n 12 -q -ra --timeout 150 -p no:cacheprovider --device cuda \
    --fp8ref-grid covering ${TEST_PATHS:-tests/test_kernels_group_tiles.py tests/test_kernels_per_group.py \
    tests/test_kernels_offs_robustness.py } >"$OUT/tests.log" 2>&1
  echo "tests exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ " ${STEPS:-tests bench tune} " == *" bench "* ]]; then
  for op in per_group_rowwise_scales per_group_colwise_scales per_group_colwise_scales_dual; do
    FP8MOE_PER_GROUP_KERNEL=tiles timeout "${BENCH_TIMEOUT:-100}" python3 -m fp8moe.bench --compile none --only "$op" \
      --kernel "benchmarks.span_kernels:$op" --like "$op" --out "$OUT/bench-$op" >>"$OUT/bench.log" 2>&1
    echo "bench $op exit $? after ${SECONDS}s" >>"$OUT/env.txt"
  done
  rm -f "$OUT"/bench-*.md "$OUT"/bench-*.png
fi
if [[ " ${STEPS:-tests bench tune} " == *" tune "* ]]; then
  FP8MOE_PER_GROUP_KERNEL=tiles timeout "${TUNE_TIMEOUT:-120}" python3 benchmarks/tune_configs.py --only per_group ${TUNE_ARGS:-} --out "$OUT/tune.md" \
    >"$OUT/tune.log" 2>&1
  echo "tune exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
if [[ " ${STEPS:-tests bench tune} " == *" probe "* ]]; then
  timeout "${PROBE_TIMEOUT:-150}" python3 benchmarks/probe_group_tiles.py >"$OUT/probe.log" 2>&1
  echo "probe exit $? after ${SECONDS}s" >>"$OUT/env.txt"
fi
cat "$OUT/env.txt"; cat "$OUT/probe.log" 2>/dev/null; tail -15 "$OUT/tests.log" 2>/dev/null; grep -E "^\|" "$OUT/bench.log" 2>/dev/null | head -40
