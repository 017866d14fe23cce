#!/usr/bin/env bash
# Session 76, call 1, one H200, main's kernels: the D64 dQ kernel alone at causal MHA S 2048 under
# Triton 3.6 (the machine's) and then 3.9 (carried in, with PyTorch's CUDA 13.0 ptxas, as in
# session 75's call 7), on the same GPU one after the other: per-kernel times of four dQ table
# entries (dq_builds.py), and Nsight Compute's launch, occupancy, warp-state and source counters
# for the TMA entry (128, 64, 4, 3, TMA) and the pointer one with the same tile and warps.
# Run with carry [".t39"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)"
echo "ncu: $NCU"; "$NCU" --version | tail -n 1
SCRIPT=docs/results/session76/bwd_builds.py
SECTIONS=(--section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats
          --section SchedulerStats --section SourceCounters)
probe() {  # $1: tag naming the Triton
    start=$(date +%s)
    python3 "$SCRIPT" time "$OUT/dq_builds_$1.json" 2>&1 | grep -v -E "leaked|nanobind|refleaks" \
        > "$OUT/dq_builds_$1.log"
    echo "$1 timing: $(( $(date +%s) - start )) s"; cat "$OUT/dq_builds_$1.log"
    for cfg in 128,64,4,3,True 128,64,4,3; do
        start=$(date +%s)
        rep="$OUT/ncu/$1_dq_${cfg//,/-}"
        timeout 150 "$NCU" --clock-control none "${SECTIONS[@]}" --kernel-name regex:'^_dq_kernel' \
            --launch-skip 2 --launch-count 1 -f -o "$rep" python3 "$SCRIPT" one "$cfg" \
            > "$rep.log" 2>&1 || tail -n 20 "$rep.log"
        "$NCU" --import "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
        "$NCU" --import "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
        echo "$1 $cfg ncu: $(( $(date +%s) - start )) s"
    done
}
mkdir -p "$OUT/ncu"
probe triton36
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
probe triton39
cat "$OUT/carried_triton.txt"
for f in "$OUT"/ncu/*.details.txt; do
    echo "== $f"; grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Shared Memory Configuration|Dynamic Shared|Driver Shared|Warp Cycles Per Issued|Issued Ipc|No Eligible" "$f"
done
tar -C "$OUT" -cJf "$OUT/ncu.tar.xz" ncu && rm -rf "$OUT/ncu"
