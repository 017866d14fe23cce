#!/usr/bin/env bash
# After a kernel change: the GPU test suite (tests/gpu: the kernel sweep against float64 and every
# model family training, generating and compiling with stable_flash) in parallel workers.
# Needs the wheels of pytest-xdist, execnet and peft in .gpu_carry/ (no network on the GPU machine):
#   run(command="OUT=$OUT bash gpu/validate_kernel.sh", carry=[".gpu_carry"])
# Into $OUT: gpu.txt, gpu_tests.log.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false HF_STABLE_ATTN_AUTOTUNE=0
python3 -m pip install --no-deps -q .gpu_carry/*.whl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> "$OUT/gpu.txt"
timeout -k 5 "${TEST_TIMEOUT_S:-480}" python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE \
    -n "${WORKERS:-12}" tests/gpu > "$OUT/gpu_tests.log" 2>&1
echo "pytest exit status $?"
cat "$OUT/gpu.txt"; tail -n 25 "$OUT/gpu_tests.log"
