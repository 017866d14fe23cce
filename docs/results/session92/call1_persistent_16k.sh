#!/usr/bin/env bash
# Session 92, call 1, one H200, Triton 3.6 (the machine's): at S 16384 (B 1, 16k tokens, issue
# 4's sweep) the Gluon forward at its table config with one program per query tile (the rule
# at 16384) against persistent (one program per SM), with and without the fix, each followed by
# the shipped backward (gpu/route_check.py --whole-step), 7 do_bench rounds; D64 (H 32) and D128
# (H 16), MHA and GQA 8:1, without a mask, then causal. PERSISTENT_BELOW stops below 16384 for
# every key that is persistent at 8192; 16384 was never timed persistent.
# Writes $OUT/call1.tgz (route JSONs and logs, runinfo header).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c1
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD TRITON_CACHE_DIR=/tmp/tc92
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
python3 -m benchmarks.runinfo > $W/runinfo.txt 2>&1
TABLE='^gluon \(128, 2, (160, 3, True|240, 2, False)\)( persistent)?( nofix)?$'
for causal in false true; do
    timeout -k 5 290 python3 gpu/route_check.py --out $W/route16k-causal-$causal.json \
        --budget-s 250 --kinds fwd --seqlens 16384 --head-dims 64 128 --causal $causal \
        --fix-off-too --whole-step --batch 1 --rounds 7 --only "$TABLE" 2>&1 \
        | quiet > $W/route16k-causal-$causal.log
    echo "causal $causal exit status ${PIPESTATUS[0]} ($(date -u +%T))" >> $W/status.txt
done
tar -C /tmp -czf $OUT/call1.tgz c1
