#!/usr/bin/env bash
# The probe and the monitor on one GPU (issue 6), about 3 minutes:
#   overhead: GPT-2 small shaped model, bf16, stable_flash (Triton): step time without the monitor,
#             with a measurement every step, and the overhead at the default interval (100 steps);
#   probe8b:  the probe on a random Llama-3.1-8B-shaped model (GQA, llama3 RoPE), 2048 tokens,
#             all 32 layers x 32 heads, chosen head 1:13: time and peak memory;
#   compile:  the monitor on a torch.compile'd (inductor) model;
#   fsdp2:    one-process torchrun, FSDP2 fully_shard: DTensor weights gathered, norms unchanged.
# Run from the repository root:  OUT=<folder> PYTHONPATH=$PWD bash gpu/probe_monitor.sh
# Writes to $OUT (7 files): results.jsonl, run.log, and from the probe summary.txt, summary.json,
# overview.png, scores_layer1.head13.png, rank1_layer1.head13.png.
# Each group of PARTS runs in its own process under a time limit (110 s; compile 70 s; fsdp2 60 s).
# Overrides: PARTS (default "overhead,probe8b compile"), SKIP_FSDP=1, RUN_TESTS=1 (also runs
# tests/test_probe.py and tests/test_monitor.py here, about a minute more).
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# One heuristic kernel config per shape: no autotuning sweep inside timed steps.
export HF_STABLE_ATTN_AUTOTUNE="${HF_STABLE_ATTN_AUTOTUNE:-0}"
PY="${PYTHON:-$(command -v python || command -v python3)}"
PROBE_OUT=/tmp/probe8b
rm -rf "$PROBE_OUT" "$OUT/results.jsonl" "$OUT/run.log"

# shellcheck disable=SC2086
for parts in ${PARTS:-overhead,probe8b compile}; do
    limit=110; [ "$parts" = compile ] && limit=70
    timeout -k 10 "$limit" "$PY" gpu/probe_monitor.py --parts "$parts" --out "$OUT" \
        --probe-out "$PROBE_OUT" >> "$OUT/run.log" 2>&1
    echo "$parts exit status $?"
done
if [ "${SKIP_FSDP:-0}" != 1 ]; then
    timeout -k 10 60 "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 \
        gpu/probe_monitor.py --parts fsdp2 --out "$OUT" >> "$OUT/run.log" 2>&1
    echo "fsdp2 exit status $?"
fi
if [ "${RUN_TESTS:-0}" = 1 ]; then
    timeout -k 10 150 "$PY" -m pytest tests/test_probe.py tests/test_monitor.py -q -x -p no:logging \
        >> "$OUT/run.log" 2>&1
    echo "tests exit status $?"
fi
for f in summary.txt summary.json overview.png scores_layer1.head13.png rank1_layer1.head13.png; do
    [ -f "$PROBE_OUT/$f" ] && cp "$PROBE_OUT/$f" "$OUT/"
done
echo "--- probe (random 8B-shaped model: ties here say nothing about trained models)"
head -n 8 "$PROBE_OUT/summary.txt" 2>/dev/null
echo "--- results"
cat "$OUT/results.jsonl" 2>/dev/null || { echo "no results; last lines of run.log:"; tail -n 30 "$OUT/run.log"; }
