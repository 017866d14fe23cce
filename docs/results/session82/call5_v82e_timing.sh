#!/usr/bin/env bash
# Session 82, call 5, one H200, Triton 3.6: v82e (branch v82-packed-count, its
# kernels/flash_fwd_hopper.py carried as .variants/m80/flash_fwd_hopper_v82e.py) against main.
# gpu/hopper_fwd_ab.py times the package's forward (main's here) against --base (v82e), so the
# ratio to read is base / new; 3 interleaved rounds, D64, S 4096 and 2048. Carry [".variants/m80"].
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
W=/tmp/c5
mkdir -p $W
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > $W/gpu.txt
timeout -k 5 190 python3 gpu/hopper_fwd_ab.py \
    --base .variants/m80/flash_fwd_hopper_v82e.py --no-checks --head-dims 64 \
    --seqlens 4096 2048 --rounds 3 --budget-s 120 --out $W/ab_d64.json 2>&1 \
    | quiet > $W/ab_d64.log
tar -C $W -czf "$OUT/call5.tgz" .
tail -n 3 $W/ab_d64.log
