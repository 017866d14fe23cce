#!/usr/bin/env bash
# Session 83, call 6, one H200, Triton 3.6: Nsight Compute's warp-state counters on the D64
# Gluon forward without a mask, S 4096, MHA (B 4, 32 heads; persistent, as shipped), for main's
# forward (ac678f7) and v83b's (unrolled pairs), with the fix, then main's without it: whether
# v83b's loss is instruction fetch (`no_instruction`). Each variant's file is copied over the
# package's in this disposable copy; one process a variant launches the forward three times and
# ncu profiles the third (sections: SpeedOfLight, ComputeWorkloadAnalysis, WarpStateStats,
# SchedulerStats, LaunchStats, Occupancy, InstructionStats), clocks left alone.
# Carry [".variants/v83"].
set -u
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 HF_STABLE_ATTN_AUTOTUNE=0
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)"
dir=$OUT/ncu; mkdir -p $dir
"$NCU" --version | tail -n 1 > $dir/ncu_version.txt
cat > /tmp/fwd3.py <<'PY'
import sys
import torch
from hf_stable_attn.kernels import flash_fwd_hopper
from hf_stable_attn.kernels._common import tma_ready
from hf_stable_attn.shift_rule import shift_params
from hf_stable_attn.testing import fix_kwargs
stabilize = sys.argv[1] == "fix"
q, k, v = (torch.randn(4, 4096, 32, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
assert tma_ready(4096, q, k, v)
params = fix_kwargs(shift_params(torch.bfloat16, stabilize=stabilize))
for _ in range(3):
    flash_fwd_hopper.flash_attn_fwd_hopper(q, k, v, softmax_scale=0.125, causal=False, **params)
torch.cuda.synchronize()
print("ran", flash_fwd_hopper.__file__, stabilize)
PY
for run in "ac678f7 fix" "unrolled fix" "ac678f7 nofix"; do
    set -- $run
    cp .variants/v83/flash_fwd_hopper_$1.py kernels/flash_fwd_hopper.py
    rep=$dir/d64_0_1_s4096_${1}_$2
    start=$(date +%s)
    timeout -k 5 100 "$NCU" --clock-control none --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section LaunchStats --section Occupancy --section InstructionStats \
        --kernel-name regex:_fwd_ws_kernel --launch-skip 2 --launch-count 1 -f -o $rep \
        python3 /tmp/fwd3.py $2 > $rep.log 2>&1
    "$NCU" --import $rep.ncu-rep --page raw --csv > $rep.raw.csv 2>&1
    echo "$1 $2: $(( $(date +%s) - start )) s" | tee -a $dir/times.txt
done
python3 -m gpu.ncu_reduce $dir $OUT/ncu_summary.json > $OUT/ncu_summary.txt 2>&1
rm -f $dir/*.ncu-rep
tar -C $OUT -czf $OUT/ncu.tgz ncu && rm -rf $dir
cat $OUT/ncu_summary.txt
