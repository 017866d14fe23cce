#!/usr/bin/env bash
# Session 66, two H200s of one host, after a call that staged ptxas-blackwell. GPU 0: the GPU
# suite under the machine's Triton 3.6 at main (not run since v65a merged), then route_power.py
# under 3.6. GPU 1 at the same time: route_power.py under the carried Triton 3.9. Carry .t39 and
# .gpu_carry; OUT set. Into OUT: the two route_power JSONs and logs.tgz (every text file).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$OUT/smi_clock_power.txt" 2>&1
python3 -m pip install --no-deps -q .gpu_carry/*.whl
clean() { grep -v -E "leaked|nanobind|refleaks"; }
(
    CUDA_VISIBLE_DEVICES=0 OUT="$OUT/suite36" TEST_TIMEOUT_S=420 bash gpu/validate_kernel.sh \
        > "$OUT/suite36.txt" 2>&1
    CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD python3 docs/results/session66/route_power.py \
        "$OUT/route_power_triton36.json" 2>&1 | clean > "$OUT/route_power_triton36.log"
) &
(
    source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
    export PYTHONPATH=$PYTHONPATH:$PWD  # after the carried Triton, never instead of it
    CUDA_VISIBLE_DEVICES=1 python3 docs/results/session66/route_power.py \
        "$OUT/route_power_triton39.json" 2>&1 | clean > "$OUT/route_power_triton39.log"
)
wait
cat "$OUT/suite36.txt" "$OUT"/route_power_triton3*.log
cd "$OUT" && tar -czf logs.tgz ./*.txt ./*.log suite36 && rm -rf ./*.txt ./*.log suite36
