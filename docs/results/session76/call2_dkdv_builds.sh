#!/usr/bin/env bash
# Session 76, call 2, one H200, main's kernels: call 1 again with the dK/dV (bwd_builds.py --part
# dkdv: four table entries, the dQ at its table's first entry), then the dQ's four entries a
# second time, under Triton 3.6 (the machine's) and then 3.9 (carried in, PyTorch's CUDA 13.0
# ptxas) on the same GPU; Nsight Compute's launch, occupancy, warp-state and source counters for
# the dK/dV's (64, 64, 4, 3, TMA) and (32, 64, 4, 3, TMA) (3.6's tuned pick at S 2048).
# Run with carry [".t39"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)"
SCRIPT=docs/results/session76/bwd_builds.py
SECTIONS=(--section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats
          --section SchedulerStats --section SourceCounters)
probe() {  # $1: tag naming the Triton
    for part in dkdv dq; do
        start=$(date +%s)
        python3 "$SCRIPT" time "$OUT/${part}_builds_$1.json" --part $part 2>&1 \
            | grep -v -E "leaked|nanobind|refleaks|UserWarning|_warn_once" > "$OUT/${part}_builds_$1.log"
        echo "$1 $part timing: $(( $(date +%s) - start )) s"; cat "$OUT/${part}_builds_$1.log"
    done
    for cfg in 64,64,4,3,True 32,64,4,3,True; do
        start=$(date +%s)
        rep="$OUT/ncu/$1_dkdv_${cfg//,/-}"
        timeout 150 "$NCU" --clock-control none "${SECTIONS[@]}" --kernel-name regex:'^_dkdv_kernel' \
            --launch-skip 2 --launch-count 1 -f -o "$rep" python3 "$SCRIPT" one "$cfg" --part dkdv \
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
    echo "== $f"; grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit (Reg|Sha)|Warp Cycles Per Issued|No Eligible" "$f"
done
tar -C "$OUT" -cJf "$OUT/ncu.tar.xz" ncu && rm -rf "$OUT/ncu"
