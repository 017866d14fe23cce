#!/usr/bin/env bash
# The numerics lab on one GPU (issue 5): every attention implementation on every input structure
# against float64, then the short bf16 GPT-2 training experiment (fix off vs on).
# Run from the repository root:  OUT=<folder> PYTHONPATH=$PWD bash gpu/numerics.sh
# About 5-6 minutes: lab budget LAB_BUDGET_S (default 150 s, hard timeout +50 s), then two
# training runs of TRAIN_BUDGET_S each at most (default 55 s; hard timeout 2 * that + 60 s).
# Writes to $OUT (8 files): numerics.json, numerics_tables.md (paste into docs/numerics.md),
# delta_drift.png, delta_cumulative.png, lab.log, train.json, train.png, train.log.
# The lab saves its JSON and table after every block, so a timeout keeps what was measured.
# Overrides: LAB_ARGS (extra arguments of the lab, e.g. "--causal" or "--seqlens 4096"),
# SKIP_LAB=1 / SKIP_TRAIN=1 to run one part.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# One heuristic kernel config per shape: no autotuning sweep inside a timed numerics run.
export HF_STABLE_ATTN_AUTOTUNE="${HF_STABLE_ATTN_AUTOTUNE:-0}"
PY="${PYTHON:-$(command -v python || command -v python3)}"
LAB_BUDGET_S="${LAB_BUDGET_S:-150}"
TRAIN_BUDGET_S="${TRAIN_BUDGET_S:-55}"

if [ "${SKIP_LAB:-0}" != 1 ]; then
    # shellcheck disable=SC2086  # LAB_ARGS is a list of arguments
    timeout -k 10 $((LAB_BUDGET_S + 50)) "$PY" -m hf_stable_attn.numerics.cli bias --device cuda \
        --rounding --time-budget "$LAB_BUDGET_S" --out "$OUT" ${LAB_ARGS:-} > "$OUT/lab.log" 2>&1
    echo "lab exit status $?"
fi
if [ "${SKIP_TRAIN:-0}" != 1 ]; then
    timeout -k 10 $((2 * TRAIN_BUDGET_S + 60)) "$PY" -m hf_stable_attn.numerics.cli bias --device cuda --train \
        --train-time-budget "$TRAIN_BUDGET_S" --out "$OUT" > "$OUT/train.log" 2>&1
    echo "train exit status $?"
fi

if [ -f "$OUT/numerics_tables.md" ]; then
    echo "--- lab (full tables: \$OUT/numerics_tables.md)"
    grep -v '^S=' "$OUT/lab.log" | tail -n 32
else
    echo "no lab results; last lines of lab.log:"
    tail -n 20 "$OUT/lab.log" 2>/dev/null
fi
echo "--- training"
tail -n 4 "$OUT/train.log" 2>/dev/null
