#!/usr/bin/env bash
# Session 83, call 1, one H200, Triton 3.6: v83a (the branch v83a-shared-masked-step), the Gluon
# forward with one copy of the masked step a consumer (the first key tile and the masked tiles
# after the unmasked range), nested form; beside it the flat form (one loop, a uniform branch
# between the two steps). First the forward's GPU tests and the tie tests on v83a; then
# gpu/hopper_fwd_variants.py: main's forward (base), nested, flat, bit for bit on the checks'
# cases, then timed at D64 (S 2048, 4096, 8192; MHA and GQA 8:1; causal and not; fix on and
# off), each at its shipped launch, 3 interleaved rounds.
# Carry [".variants/v83", ".gpu_carry"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c1
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD HF_STABLE_ATTN_AUTOTUNE=0
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
python3 -m pip install --no-deps -q .gpu_carry/*.whl
timeout -k 5 200 python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider -rfE -n 12 \
    tests/gpu/test_hopper_forward.py tests/gpu/test_sinks_gpu.py \
    "tests/gpu/test_kernel_gpu.py::test_tie_decisions_match_the_shift_rule" \
    "tests/gpu/test_kernel_gpu.py::test_structural_no_p_rounds_to_one" > $W/tests.log 2>&1
echo "pytest exit $?" >> $W/tests.log
timeout -k 5 330 python3 gpu/hopper_fwd_variants.py \
    --variant main=.variants/v83/flash_fwd_hopper_main.py \
    --variant nested=kernels/flash_fwd_hopper.py \
    --variant flat=.variants/v83/flash_fwd_hopper_flat.py \
    --launch shipped --head-dims 64 --seqlens 4096 2048 8192 --rounds 3 --budget-s 300 \
    --out $W/variants_d64.json 2>&1 | quiet > $W/variants_d64.log
echo "variants exit $?" >> $W/variants_d64.log
tar -C $W -czf "$OUT/call1.tgz" .
tail -n 8 $W/tests.log
grep -c '"ok": true' $W/variants_d64.log; grep '"ok": false' $W/variants_d64.log | head -5
tail -n 30 $W/variants_d64.log
