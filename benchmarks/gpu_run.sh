#!/usr/bin/env bash
# The one GPU command of the benchmark suite (issue 4): the quick attention sweep, then the
# end-to-end benchmark, each under a time budget and a hard timeout (9 minutes in all), then the
# tables. Run from the repository root:  OUT=<folder> PYTHONPATH=$PWD bash benchmarks/gpu_run.sh
#
# Writes to $OUT (6 files): <gpu>-<date>-attention.json, <gpu>-<date>-e2e.json, tables.md,
# attention.log, e2e.log, gpu.txt. Both scripts save their JSON after every measurement, so a
# timeout keeps what was measured. Overrides (environment):
#   ATTN_ARGS      arguments of the attention sweep (default "--quick"), e.g. to finish a cut run:
#                  ATTN_ARGS="--quick --seqlens 8192 1024" SKIP_E2E=1 bash benchmarks/gpu_run.sh
#   ATTN_BUDGET_S  attention time budget in seconds (default 270; hard timeout +40)
#   E2E_ARGS       extra arguments of the e2e benchmark (default none); for the training target,
#                  whose ratio varies between processes, e.g. SKIP_ATTN=1 E2E_BUDGET_S=480
#                  E2E_ARGS="--impls stable_flash sdpa --gen-impls none --processes 3"
#                  (--processes applies to generation entries too)
#   E2E_BUDGET_S   e2e time budget in seconds (default 170; hard timeout +50)
#   SKIP_ATTN=1 / SKIP_E2E=1 to run only one part.
#   TRITON_CACHE_DIR  default: a new empty folder, so that first-call times (compile_s) hold
#                  compiling and autotuning, not loads from an earlier run's cache.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$(mktemp -d)}"
PY="${PYTHON:-$(command -v python || command -v python3)}"
ATTN_BUDGET_S="${ATTN_BUDGET_S:-270}"
E2E_BUDGET_S="${E2E_BUDGET_S:-170}"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used \
    --format=csv > "$OUT/gpu.txt" 2>&1 || true

if [ "${SKIP_ATTN:-0}" != 1 ]; then
    # shellcheck disable=SC2086  # ATTN_ARGS is a list of arguments
    timeout -k 10 $((ATTN_BUDGET_S + 40)) "$PY" -m benchmarks.bench_attention ${ATTN_ARGS:---quick} \
        --time-budget-s "$ATTN_BUDGET_S" --out-dir "$OUT" 2> "$OUT/attention.log"
    echo "attention exit status $?"
fi
if [ "${SKIP_E2E:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    timeout -k 10 $((E2E_BUDGET_S + 50)) "$PY" -m benchmarks.bench_e2e ${E2E_ARGS:-} \
        --time-budget-s "$E2E_BUDGET_S" --out-dir "$OUT" 2> "$OUT/e2e.log"
    echo "e2e exit status $?"
fi

shopt -s nullglob
results=("$OUT"/*-attention.json "$OUT"/*-e2e.json)
if [ ${#results[@]} -eq 0 ]; then
    echo "no results JSON in $OUT; last lines of the logs:"
    tail -n 20 "$OUT"/*.log
    exit 1
fi
tail -n 3 "$OUT"/*.log
echo "full tables: \$OUT/tables.md; the headline tables:"
"$PY" -m benchmarks.make_tables "${results[@]}" --out "$OUT/tables.md" --print brief
