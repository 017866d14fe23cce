#!/usr/bin/env bash
# v49b's open A/Bs (docs/kernel_notes.md, session 49) in one device call: the masked tile loops
# (the few tiles a mask edge crosses) unpipelined or not, per kernel, at the tables' first
# entries and at the tuner's D64 causal S 2048 picks of sweep 0453 (H200), with
# gpu/backward_ab.py (same inputs, 5 rotated rounds, results compared):
#   fwd   shipped (unpipelined) against the forward pipelined as before v49b, at the pick;
#   dq    the dQ kernel's masked key loop unpipelined against shipped, first entry and pick;
#   dkdv  the dK/dV kernel's masked query loop unpipelined against shipped, first entry and pick.
# The variant packages are copies of kernels/ with one loop header changed (the edit fails
# loudly when the header is not found).
#   run(command="OUT=$OUT bash gpu/masked_pipelining_ab.sh")
set -euo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
work="$(mktemp -d)"
export PYTHONPATH="$PWD:$work${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1

# variant NAME FILE OLD NEW: package NAME under $work, kernels/ with FILE's loop header OLD -> NEW
variant() {
    cp -r kernels "$work/$1"
    grep -qF "$3" "$work/$1/$2" || { echo "$2: no line '$3'" >&2; exit 1; }
    OLD="$3" NEW="$4" python3 - "$work/$1/$2" <<'EOF'
import os, sys
path = sys.argv[1]
text = open(path).read()
open(path, "w").write(text.replace(os.environ["OLD"], os.environ["NEW"], 1))
EOF
}
unpipelined() { echo "tl.range(lo, hi, $1, num_stages=1 if MASKED else None)"; }
variant kfwd_pipelined flash_fwd.py "$(unpipelined BLOCK_N)" "range(lo, hi, BLOCK_N)"
variant kdq flash_bwd.py "for start_n in range(lo, hi, BLOCK_N)" \
    "for start_n in $(unpipelined BLOCK_N)"
variant kdkdv flash_bwd.py "for start_m in range(lo, hi, BLOCK_M)" \
    "for start_m in $(unpipelined BLOCK_M)"

ab() {  # ab NAME ARGS...: one backward_ab.py run into $OUT/NAME.json and .log
    local name="$1"; shift
    python3 gpu/backward_ab.py "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
    echo "== $name"; grep '^S' "$OUT/$name.log" | sed 's/, {.*//'
}
ab fwd_pick --part fwd --base kfwd_pipelined --tiles fwd=64,64,4,2,1 --seqlens 2048 4096
ab dq_first --part bwd --base hf_stable_attn.kernels --variant kdq
ab dq_pick --part bwd --base hf_stable_attn.kernels --variant kdq --tiles dq=128,64,8,3,0
ab dkdv_first --part bwd --base hf_stable_attn.kernels --variant kdkdv
ab dkdv_pick --part bwd --base hf_stable_attn.kernels --variant kdkdv --tiles dkdv=32,64,4,3,1 \
    --seqlens 2048 4096
