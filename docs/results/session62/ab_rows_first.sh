#!/usr/bin/env bash
# Session 62, v61a on two GPUs of one host: GPU 0 times the backward's dQ/dK/dV pairings
# (gpu/route_check.py --kinds routes) in main's tree and in a copy whose kernels/flash_bwd.py is
# the branch's (.variants/v61a_flash_bwd.py), alternating processes; GPU 1 runs the GPU suite in
# that copy at the same time. Run from the repository root with OUT set; carry .variants and
# .gpu_carry. ROUTE_ARGS overrides the shapes, PASSES the number of passes (2). Under a carried
# Triton, source gpu/carried_triton.sh first (its PYTHONPATH is kept).
set -uo pipefail
: "${OUT:?set OUT}"
branch=/tmp/branch_tree
rm -rf "$branch" && mkdir -p "$branch" && cp -r . "$branch/" || exit 1
cp .variants/v61a_flash_bwd.py "$branch/kernels/flash_bwd.py"
python3 -m pip install --no-deps -q .gpu_carry/*.whl
args=${ROUTE_ARGS:---kinds routes --seqlens 2048 4096 1024 --head-dims 64 --causal true false}
(
    cd "$branch" && CUDA_VISIBLE_DEVICES=1 WORKERS=12 TEST_TIMEOUT_S=${SUITE_S:-420} \
        OUT="$OUT/suite" bash gpu/validate_kernel.sh > "$OUT/suite.txt" 2>&1
) &
for pass in $(seq "${PASSES:-2}"); do
    for tree in "$PWD" "$branch"; do
        name=$([ "$tree" = "$PWD" ] && echo main || echo v61a)
        (cd "$tree" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$tree" python3 gpu/route_check.py \
            $args --rounds 5 --budget-s "${BUDGET_S:-110}" --out "$OUT/routes_${name}_$pass.json") \
            >> "$OUT/routes.log" 2>&1
        echo "pass $pass $name done at $SECONDS s" >> "$OUT/routes.log"
    done
done
wait
echo "all done at $SECONDS s"; tail -n 3 "$OUT/suite.txt"
