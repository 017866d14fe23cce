#!/usr/bin/env bash
# Session 76, call 3, one H200, main's kernels: call 2's Nsight Compute part again (its report
# tar was the ninth file and did not come back): the dK/dV's (64, 64, 4, 3, TMA) and
# (32, 64, 4, 3, TMA) at D64 causal MHA S 2048 under Triton 3.6, then 3.9 (carried in, PyTorch's
# CUDA 13.0 ptxas). Everything goes into one tar. Run with carry [".t39"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)"
SCRIPT=docs/results/session76/bwd_builds.py
SECTIONS=(--section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats
          --section SchedulerStats --section SourceCounters)
dir="$OUT/call3"; mkdir -p "$dir"
probe() {  # $1: tag naming the Triton
    for cfg in 64,64,4,3,True 32,64,4,3,True; do
        start=$(date +%s)
        rep="$dir/$1_dkdv_${cfg//,/-}"
        timeout 150 "$NCU" --clock-control none "${SECTIONS[@]}" --kernel-name regex:'^_dkdv_kernel' \
            --launch-skip 2 --launch-count 1 -f -o "$rep" python3 "$SCRIPT" one "$cfg" --part dkdv \
            > "$rep.log" 2>&1 || tail -n 20 "$rep.log"
        "$NCU" --import "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
        "$NCU" --import "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
        echo "$1 $cfg ncu: $(( $(date +%s) - start )) s"
    done
}
probe triton36
source gpu/carried_triton.sh > "$dir/carried_triton.txt" 2>&1 || exit 1
probe triton39
for f in "$dir"/*.details.txt; do
    echo "== $f"; grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued" "$f"
done
tar -C "$OUT" -cJf "$OUT/call3.tar.xz" call3 && rm -rf "$dir"
