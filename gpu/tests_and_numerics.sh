#!/usr/bin/env bash
# One GPU call: the GPU test suite (kernel sweep in two parallel halves, models end to end)
# alongside the numerics lab. Tests are compile-bound (CPU), the lab is GPU-bound, so they share
# the machine well; nothing here is a timing. Results: $OUT/tests.tgz, $OUT/numerics.tgz, logs.
set -uo pipefail
: "${OUT:?set OUT}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false HF_STABLE_ATTN_AUTOTUNE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" | tee -a "$OUT/gpu.txt"
T=/tmp/res; mkdir -p $T/tests $T/numerics
SWEEP1="sweep and (d32 or d40 or d64- or d80 or d96)"
PYT="python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE"
timeout -k 5 500 $PYT tests/gpu/test_kernel_gpu.py -k "$SWEEP1" --junitxml=$T/tests/kernel1.xml > $T/tests/kernel1.log 2>&1 &
timeout -k 5 500 $PYT tests/gpu/test_kernel_gpu.py -k "not ($SWEEP1)" --junitxml=$T/tests/kernel2.xml > $T/tests/kernel2.log 2>&1 &
timeout -k 5 500 $PYT tests/gpu/test_models_gpu.py --junitxml=$T/tests/models.xml > $T/tests/models.log 2>&1 &
OUT=$T/numerics LAB_BUDGET_S=${LAB_BUDGET_S:-200} TRAIN_BUDGET_S=${TRAIN_BUDGET_S:-60} bash gpu/numerics.sh > $T/numerics/driver.log 2>&1 &
wait
tar czf "$OUT/tests.tgz" -C $T tests
tar czf "$OUT/numerics.tgz" -C $T numerics
for f in kernel1 kernel2 models; do echo "== $f"; tail -n 25 $T/tests/$f.log; done
echo "== numerics"; tail -n 40 $T/numerics/driver.log
