#!/usr/bin/env bash
# One GPU call: the monitor's overhead alone (a timing), then the GPU model tests and the
# numerics lab's beta rows (after the soft-ceiling change) side by side.
set -uo pipefail
: "${OUT:?set OUT}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T=/tmp/res; mkdir -p $T/final
nvidia-smi --query-gpu=name --format=csv,noheader | tee $T/final/gpu.txt
timeout -k 5 150 python3 gpu/probe_monitor.py --parts overhead --out $T/final > $T/final/overhead.log 2>&1
echo "overhead exit status $?"
HF_STABLE_ATTN_AUTOTUNE=0 timeout -k 5 300 python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE \
    tests/gpu/test_models_gpu.py > $T/final/models.log 2>&1 &
HF_STABLE_ATTN_AUTOTUNE=0 timeout -k 5 300 python3 -m hf_stable_attn.numerics.cli bias --device cuda \
    --impls triton_fa2,triton_b2,triton_b4,triton_b8,ref_fa2,ref_b2,ref_b8 --time-budget 200 \
    --out $T/final/numerics > $T/final/numerics.log 2>&1 &
wait
tar czf "$OUT/final.tgz" -C $T final
cat $T/final/results.jsonl 2>/dev/null; tail -n 8 $T/final/models.log; grep -v '^S=' $T/final/numerics.log | tail -n 22
