#!/usr/bin/env bash
# v10 (docs/kernel_notes.md, runs 17-18): forward variants of the fix's bookkeeping against the
# kernel before them (kbase2), alternating, two passes; TMA table configs. The variant packages
# lived in .variants/ (not in git; the notes describe each):
#   OUT=/some/folder VARIANTS="kgap kint2" bash gpu/v10_fix_latency.sh
export PYTHONPATH=$PWD:$PWD/.variants
TK="python -m benchmarks.tune_kernel --grid table --tma only --time-budget-s 60"
for pass in 1 2; do
  $TK --kernels kbase2 --parts fwd fwd_nofix --out $OUT/base_$pass.json 2>&1 | grep -v "^compiled"
  for v in ${VARIANTS:-kgap kint2}; do
    echo "== $v"; $TK --kernels $v --parts fwd --out $OUT/${v}_$pass.json 2>&1 | grep -v "^compiled"
  done
done
