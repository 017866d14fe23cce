#!/usr/bin/env bash
# Session 76, call 5, two H200s of one host, Triton 3.6: v76c (this tree) against main's kernels
# (package kbase in .variants/main). GPU 0: gpu/backward_ab.py on its eight shapes (the tables'
# first entries), then D64 causal S 2048 MHA and GQA 8:1 at 3.6's picks there (dQ (128, 64, 8,
# 3) through pointers, dK/dV (64, 64, 4, 3, TMA)), which isolates the dK/dV's guard. GPU 1 at
# the same time: the GPU suite in this tree. Then GPU 0: the new test of the guarded ranges against
# a mutant (runs_range skipping every range that holds a tile), which it must fail.
# Run with carry [".variants", ".gpu_carry"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
(
    CUDA_VISIBLE_DEVICES=1 WORKERS=12 TEST_TIMEOUT_S=360 OUT="$OUT/suite" \
        bash gpu/validate_kernel.sh > "$OUT/suite.txt" 2>&1
) &
export PYTHONPATH=$PWD:$PWD/.variants/main
ab() {  # $1 file stem, rest: backward_ab arguments
    local stem=$1; shift
    CUDA_VISIBLE_DEVICES=0 python3 gpu/backward_ab.py --base kbase --out "$OUT/$stem.json" "$@" \
        2>&1 | grep -v -E "leaked|nanobind|refleaks" > "$OUT/$stem.log"
}
ab ab_v76c_triton36
ab ab_v76c_triton36_picks --shape 2048:8:32:32:64:1 --shape 2048:8:32:4:64:1 \
    --tiles dq=128,64,8,3,0 --tiles dkdv=64,64,4,3,1
mutant=/tmp/mutant_tree
rm -rf "$mutant" && mkdir -p "$mutant" && cp -r kernels hf_stable_attn tests pyproject.toml "$mutant/"
sed -i 's/        return lo < hi$/        return lo >= hi/' "$mutant/kernels/_common.py"
grep -n "return lo >= hi" "$mutant/kernels/_common.py" > "$OUT/mutant.txt"
(cd "$mutant" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH="$mutant" HF_STABLE_ATTN_AUTOTUNE=0 \
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_kernel_gpu.py \
    -k tma_backward_with_partial 2>&1 | grep -v -E "leaked|nanobind|refleaks" | tail -n 15) \
    >> "$OUT/mutant.txt"
wait
cat "$OUT/mutant.txt"
cut -c1-160 "$OUT"/ab_*.log; tail -n 5 "$OUT/suite.txt"
