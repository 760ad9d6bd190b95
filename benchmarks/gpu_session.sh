#!/usr/bin/env bash
# Everything the GPU verifies, in one device call (the device tool gives 30 device-minutes a session):
#   1. the whole test suite on the GPU (kernels bitwise vs fp8ref, compile == eager, opcheck, no host syncs,
#      int64 indexing over 2^31 elements), in parallel with
#   2. `fp8ref bringup --exhaustive --devices all` (all 2^32 f32 inputs per format and cast path + the full kernel
#      matrix, sharded one process per GPU),
#   3. then the benchmarks alone on the GPU.
# Logs land in $OUT (the device tool brings them back); commit them under benchmarks/results/.
set -uo pipefail
: "${OUT:?set OUT to a directory for the logs}"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."

python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} >"$OUT/env.txt" 2>&1

timeout "${TEST_TIMEOUT:-280}" python3 -m pytest -n 8 -q -ra -p no:cacheprovider --device cuda --fp8ref-grid covering \
  --ignore=tests/test_bringup_cli.py --ignore=tests/test_notebooks.py --fp8ref-artifacts "$OUT/artifacts" tests \
  >"$OUT/pytest-h200.log" 2>&1 &
tests_pid=$!
# Every GPU of the host (--devices all: one process per GPU); if that produced no certificate, the single-GPU run.
bringup() {
  timeout "${BRINGUP_TIMEOUT:-280}" python3 -m fp8ref bringup --device cuda --devices all --exhaustive --no-progress \
    --out "$OUT/bringup" >"$OUT/bringup.log" 2>&1
  local rc=$? started=$SECONDS
  if [ ! -f "$OUT/bringup/certificate.json" ] && [ "$started" -lt 150 ]; then
    echo "--devices all left no certificate (exit $rc); single-GPU run follows" >>"$OUT/bringup.log"
    timeout 200 python3 -m fp8ref bringup --device cuda --exhaustive --no-progress --out "$OUT/bringup" \
      >>"$OUT/bringup.log" 2>&1
    rc=$?
  fi
  return $rc
}
bringup &
bringup_pid=$!
wait "$tests_pid"; echo "pytest exit $?" >>"$OUT/env.txt"
wait "$bringup_pid"; echo "bringup exit $?" >>"$OUT/env.txt"
# The device tool returns at most 8 files: failure artifacts travel as one archive.
if [ -d "$OUT/artifacts" ]; then tar czf "$OUT/artifacts.tgz" -C "$OUT" artifacts && rm -rf "$OUT/artifacts"; fi

timeout "${BENCH_TIMEOUT:-190}" python3 benchmarks/bench_kernels.py --out "$OUT/bench-h200.md" >"$OUT/bench.log" 2>&1
echo "bench exit $?" >>"$OUT/env.txt"
cat "$OUT/env.txt"; tail -5 "$OUT/pytest-h200.log"; tail -5 "$OUT/bringup.log"; tail -40 "$OUT/bench.log"
