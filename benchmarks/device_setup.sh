# Sourced by the device-call scripts (gpu_session.sh, ab_trees.sh): strict mode, unbuffered Python, the repository
# root as working directory, this checkout installed in place, and the GPU and the versions added to $OUT/env.txt.
set -uo pipefail
: "${OUT:?set OUT to a directory for the logs}"
export PYTHONUNBUFFERED=1
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} >>"$OUT/env.txt" 2>&1  # appended: a call that sources this twice keeps what its first part wrote
