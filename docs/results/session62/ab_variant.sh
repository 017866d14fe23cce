#!/usr/bin/env bash
# A kernel variant against main on two GPUs of one host, as ab_rows_first.sh did for v61a: GPU 0
# times the backward's dQ/dK/dV pairings (gpu/route_check.py --kinds routes) in main's tree and
# in a copy with the variant's files laid over it, alternating processes; GPU 1 runs the GPU suite
# in the copy at the same time. VARIANT: a folder with the variant's changed files at their
# repository paths (e.g. `git diff --name-only main BRANCH | xargs git archive BRANCH | tar -x -C
# .variants/v62a`); NAME names its results. Run from the repository root with OUT set; carry
# the VARIANT folder and .gpu_carry. ROUTE_ARGS overrides the shapes, PASSES the passes (2),
# BUDGET_S each process's time budget (100), SUITE_S the suite's (420). Under a carried Triton,
# source gpu/carried_triton.sh first (its PYTHONPATH is kept).
set -uo pipefail
: "${OUT:?set OUT}" "${VARIANT:?set VARIANT}" "${NAME:?set NAME}"
branch=/tmp/variant_tree
rm -rf "$branch" && mkdir -p "$branch" && cp -r . "$branch/" && cp -r "$VARIANT/." "$branch/" \
    || exit 1
python3 -m pip install --no-deps -q .gpu_carry/*.whl
args=${ROUTE_ARGS:---kinds routes --seqlens 2048 4096 --head-dims 64 --causal true false}
(
    cd "$branch" && CUDA_VISIBLE_DEVICES=1 WORKERS=12 TEST_TIMEOUT_S=${SUITE_S:-420} \
        OUT="$OUT/suite" bash gpu/validate_kernel.sh > "$OUT/suite.txt" 2>&1
) &
for pass in $(seq "${PASSES:-2}"); do
    for tree in "$PWD" "$branch"; do
        name=$([ "$tree" = "$PWD" ] && echo main || echo "$NAME")
        (cd "$tree" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$tree" \
            python3 gpu/route_check.py $args --rounds 5 --budget-s "${BUDGET_S:-100}" \
            --out "$OUT/routes_${name}_$pass.json") >> "$OUT/routes.log" 2>&1
        echo "pass $pass $name done at $SECONDS s" >> "$OUT/routes.log"
    done
done
wait
# One file for the timings: a call returns at most 8 (session 62 lost a suite log to that).
tar -C "$OUT" -czf "$OUT/routes.tgz" $(cd "$OUT" && ls routes_*.json) && rm "$OUT"/routes_*.json
echo "all done at $SECONDS s"; tail -n 3 "$OUT/suite.txt"
grep -v "^nanobind\|^ - \|^See " "$OUT/routes.log" | grep "done at"
