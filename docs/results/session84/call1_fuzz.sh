#!/usr/bin/env bash
# Session 84, call 1, one H200, Triton 3.6: gpu/fuzz_kernels.py at main (9a682e9's kernels) in
# four processes at once, each drawing from its own fresh seed (the clock plus 1000 x its index),
# BUDGET_S (default 420) seconds each; the first random sweep since session 58, so the first
# after v65a, v67a, v74a, v78a and v81b. Default options (max length 2500, a quarter of the
# cases drawn as the Gluon routes' calls, the tuner on). Output: $OUT/fuzz.tgz with each
# process's JSON and log. Call 2 ran it again at once, call 4 with BUDGET_S=300 (README.md).
set -u
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1
dir=$OUT/fuzz; mkdir -p $dir
base=$(( $(date +%s) % 1000000 ))
for i in 0 1 2 3; do
    seed=$(( (base + 1000 * i) % 1000000 ))
    python3 gpu/fuzz_kernels.py --seed $seed --budget-s "${BUDGET_S:-420}" --out $dir/fuzz_$i.json \
        > $dir/fuzz_$i.log 2>&1 &
done
wait
python3 -m benchmarks.runinfo > $dir/runinfo.txt 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $dir/gpu.txt
tar -C $OUT -czf $OUT/fuzz.tgz fuzz && rm -rf $dir
for i in 0 1 2 3; do
    tar -xzOf $OUT/fuzz.tgz fuzz/fuzz_$i.log \
        | grep -v -E "leaked|nanobind|refleaks|skipped remainder" | tail -n 2
done
