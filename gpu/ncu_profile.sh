#!/usr/bin/env bash
# On the GPU machine: Nsight Compute's counters for each attention kernel of a forward + backward
# (ours with and without the fix, cuDNN and FA2 through SDPA) at the shapes below. A first process
# tunes and compiles our kernels (the picks go to Triton's cache), so each profiled process
# launches only the picks. Clocks are left alone (--clock-control none, METHOD.md).
#   run(command="OUT=$OUT bash gpu/ncu_profile.sh")
# Writes $OUT/ncu/<case>_<impl>.{ncu-rep,raw.csv,details.txt} and, for our kernels with
# the fix, the per-instruction stall samples (<case>_stable_flash.sass.csv); tars them as
# $OUT/ncu.tar.xz with a summary ($OUT/ncu_summary.txt) beside it.
set -u
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)"
echo "ncu: $NCU"; "$NCU" --version | tail -n 1
dir="$OUT/ncu"; mkdir -p "$dir"
KERNELS='regex:_fwd_kernel|_dq_kernel|_dkdv_kernel|_ws_kernel|sdpa|cudnn|flash|fmha'
# case seqlen impls [name gpu.ncu_profile-arguments...] (a name tags runs with other arguments)
CASES=${CASES:-"64:1:1 2048 stable_flash,stable_flash_nofix,sdpa_cudnn,sdpa_flash
64:1:8 2048 stable_flash,sdpa_cudnn"}
while read -r case seqlen impls name extra; do
    tag="d${case//:/_}_s$seqlen${name:+_$name}"
    start=$(date +%s)
    python3 -m gpu.ncu_profile --impl all --case "$case" --seqlen "$seqlen" --steps 2 $extra \
        > "$dir/${tag}_warm.log" 2>&1 || tail -n 20 "$dir/${tag}_warm.log"
    echo "$tag warm: $(( $(date +%s) - start )) s"
    for impl in ${impls//,/ }; do
        start=$(date +%s)
        rep="$dir/${tag}_$impl"
        "$NCU" --clock-control none --set full --kernel-name "$KERNELS" -f -o "$rep" \
            python3 -m gpu.ncu_profile --impl "$impl" --case "$case" --seqlen "$seqlen" $extra \
            > "$rep.log" 2>&1 || tail -n 20 "$rep.log"
        "$NCU" --import "$rep.ncu-rep" --page raw --csv > "$rep.raw.csv" 2>&1
        "$NCU" --import "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
        if [ "$impl" = stable_flash ]; then
            "$NCU" --import "$rep.ncu-rep" --page source --csv --print-source sass \
                --kernel-name 'regex:^_(fwd|dq|dkdv)(_ws)?_kernel$' > "$rep.sass.csv" 2>&1
        fi
        echo "$tag $impl: $(( $(date +%s) - start )) s, $(wc -l < "$rep.details.txt") detail lines"
    done
done <<< "$CASES"
python3 - "$dir" > "$OUT/ncu_summary.txt" <<'EOF'
import csv, glob, sys
KEYS = ["gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
        "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum", "sm__cycles_elapsed.avg.per_second"]
for path in sorted(glob.glob(sys.argv[1] + "/*.raw.csv")):
    rows = list(csv.reader(open(path)))
    head = [i for i, r in enumerate(rows) if r and r[0] == "ID"]
    if not head:
        print(path, "no table"); continue
    names, body = rows[head[0]], rows[head[0] + 2:]
    col = {n: i for i, n in enumerate(names)}
    stalls = [n for n in names if n.startswith("smsp__average_warps_issue_stalled_")
              and n.endswith("_per_issue_active.ratio")]
    for r in body:
        print(path.rsplit("/", 1)[1], r[col["Kernel Name"]][:70])
        for k in KEYS:
            print("   ", k, r[col[k]] if k in col else "-")
        top = sorted(((float(r[col[n]] or 0), n) for n in stalls), reverse=True)[:8]
        print("    stalls/issue:", ", ".join(f"{n[34:-23]} {v:.2f}" for v, n in top))
EOF
cat "$OUT/ncu_summary.txt"
tar -C "$OUT" -cJf "$OUT/ncu.tar.xz" ncu && rm -rf "$dir"
