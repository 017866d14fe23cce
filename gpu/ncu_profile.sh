#!/usr/bin/env bash
# On the GPU machine: Nsight Compute's counters for each attention kernel of a forward + backward
# (ours with and without the fix, cuDNN and FA2 through SDPA) at the shapes below. A first process
# tunes and compiles our kernels (the picks go to Triton's cache), so each profiled process
# launches only the picks. Clocks are left alone (--clock-control none, METHOD.md).
#   run(command="OUT=$OUT bash gpu/ncu_profile.sh")
# Writes $OUT/ncu/<case>_<impl>.{ncu-rep,raw.csv,details.txt} and, for our kernels with
# the fix, the per-instruction stall samples (<case>_stable_flash.sass.csv); tars them as
# $OUT/ncu.tar.xz with gpu/ncu_reduce.py's summary beside it ($OUT/ncu_summary.{json,txt}).
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
python3 -m gpu.ncu_reduce "$dir" "$OUT/ncu_summary.json" > "$OUT/ncu_summary.txt"
cat "$OUT/ncu_summary.txt"
tar -C "$OUT" -cJf "$OUT/ncu.tar.xz" ncu && rm -rf "$dir"
