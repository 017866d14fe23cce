#!/usr/bin/env bash
# One GPU call: the recipes (GPT-2 124M stable_flash vs sdpa on replayed batches, LoRA on a tiny
# Llama), then the probe/monitor measurements, one after the other (both report timings).
set -uo pipefail
: "${OUT:?set OUT}"
T=/tmp/res; mkdir -p $T/recipes $T/probe
OUT=$T/recipes MINUTES=${MINUTES:-2} bash gpu/recipes.sh > $T/recipes/driver.log 2>&1
echo "recipes exit status $?"
OUT=$T/probe bash gpu/probe_monitor.sh > $T/probe/driver.log 2>&1
echo "probe/monitor exit status $?"
tar czf "$OUT/recipes.tgz" -C $T recipes
tar czf "$OUT/probe.tgz" -C $T probe
tail -n 25 $T/recipes/driver.log; tail -n 30 $T/probe/driver.log
