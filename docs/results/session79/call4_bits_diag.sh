#!/usr/bin/env bash
# Session 79, call 4, two H200s of one host (nvidia-h200-x2), the machine's Triton 3.6:
# gpu/forward_bits.py (seed 7801, as call 3) in four processes at once, two a GPU: main's tree
# before v78a (.variants/main78), v79diag (main with the shift's `top + gap` as an inline
# `add.rn.f32`, which LLVM cannot fuse with `top = m1 * qk_scale`), and main (v78a) twice.
# Compared: main78 against v79diag (does v78a differ from main only through that fused
# multiply-add?), main against main (is the forward deterministic across processes?), main78
# against main (call 3's comparison again). Run with carry [".variants/main78",
# ".variants/v79diag"]. OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export HF_HUB_OFFLINE=1
quiet() { grep -v -E "leaked|nanobind|refleaks|skipped remainder"; }
save() {  # GPU TREE NAME
    CUDA_VISIBLE_DEVICES=$1 PYTHONPATH=$2:$PWD timeout -k 5 250 python3 gpu/forward_bits.py \
        save --budget-s 170 --out "/tmp/bits_$3.safetensors" 2>&1 | quiet > "$OUT/bits_$3.log"
}
save 0 .variants/main78 main78 &
save 1 .variants/v79diag v79diag &
save 0 "$PWD" v78a_a &
save 1 "$PWD" v78a_b &
wait
compare() {  # A B
    PYTHONPATH=$PWD python3 gpu/forward_bits.py compare "/tmp/bits_$1.safetensors" \
        "/tmp/bits_$2.safetensors" --out "$OUT/forward_bits_$1_vs_$2.json"
}
compare main78 v79diag; compare v78a_a v78a_b; compare main78 v78a_a
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader > "$OUT/gpu.txt"
tail -n 1 "$OUT"/bits_*.log
