#!/usr/bin/env bash
# For a later session (not run in session 64): under the carried Triton 3.9, the D64 forward
# routes with and without the fix built by its bundled ptxas-blackwell 13.4 against PyTorch's
# ptxas 13.0, alternating processes, on two H200s of one host (kernel notes, session 64: 13.4
# spills 88-176 bytes a thread in the Gluon forward, 13.0 on the same PTX 0-48). GPU 0 times
# S 2048 and 4096 without a mask, GPU 1 with a causal mask, at the same time; each process
# compiles into its own Triton cache. Stage ptxas-blackwell in a call before this one (see
# gpu/carried_triton.sh), then carry .t39; OUT set. PASSES (2) and BUDGET_S (150) as in
# ab_variant.sh.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
source gpu/carried_triton.sh > "$OUT/carried_triton.txt" 2>&1 || exit 1
torch_ptxas="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas"))')"
for gpu in 0 1; do
    causal=$([ "$gpu" = 0 ] && echo false || echo true)
    (
        for pass in $(seq "${PASSES:-2}"); do
            for ptxas in bundled torch; do
                choice=""
                [ "$ptxas" = torch ] && choice="TRITON_PTXAS_BLACKWELL_PATH=$torch_ptxas"
                env $choice CUDA_VISIBLE_DEVICES=$gpu \
                    TRITON_CACHE_DIR="/tmp/triton_cache_${ptxas}_$gpu" \
                    python3 -m gpu.route_check --kinds fwd --fix-off-too --seqlens 2048 4096 \
                    --head-dims 64 --causal $causal --rounds 3 --budget-s "${BUDGET_S:-150}" \
                    --out "$OUT/fwd_gpu${gpu}_${ptxas}_$pass.json" 2>&1 \
                    | grep -v -E "leaked|nanobind|refleaks" >> "$OUT/routes_gpu$gpu.log"
                echo "pass $pass $ptxas done at $SECONDS s" >> "$OUT/routes_gpu$gpu.log"
            done
        done
    ) &
done
wait
