#!/usr/bin/env bash
# Session 98 (one H200, torch 2.11, Triton 3.6), main at cd6eb9a (v96a's kernels, v97a's routes).
# OUT set.
#   one: issue 4's D64 causal MHA S 2048 shape with every peer in two fresh processes (session
#        96's 0718 ran it at a forward config no fair timing picks; session 97's tuner study);
#        then the D64 groups at S 16384 (MHA and GQA 8:1), the target rows no run at v96a has.
#   two (carry [".gpu_carry"]): the D128 groups at S 16384; then the GPU suite at main.
#   three: the GQA 8:1 shapes at S 16384 that calls one and two's budgets cut.
#   four: D64 causal MHA S 2048 again (call one's second file did not come back: the device
#         tool returns a few files a call, so calls two to four pack theirs in one archive);
#         generation end to end (greedy, dynamic cache), stable_flash and sdpa.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
: "${STEP:?one to four}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=$PWD
case $STEP in
    one)
        python3 -m benchmarks.runinfo > "$OUT/runinfo.txt"
        mkdir -p "$OUT/s2048" "$OUT/s16k"
        OUT=$OUT/s2048 SEQLENS=2048 KV_GROUPS=1 BUDGET_S=100 \
            bash gpu/issue4_sweep.sh 0:d64-causal 0:d64-causal
        OUT=$OUT/s16k SEQLENS=16384 BUDGET_S=200 \
            bash gpu/issue4_sweep.sh 0:d64-causal 0:d64-nomask ;;
    two)
        ls -R /root/out 2>/dev/null | head -5
        mkdir -p "$OUT/s16k"
        OUT=$OUT/s16k SEQLENS=16384 BUDGET_S=200 \
            bash gpu/issue4_sweep.sh 0:d128-causal 0:d128-nomask
        CUDA_VISIBLE_DEVICES=0 OUT=$OUT/suite TEST_TIMEOUT_S=290 bash gpu/validate_kernel.sh \
            | tail -n 6
        tar -C "$OUT" -czf /tmp/two.tgz s16k suite && rm -rf "$OUT/s16k" "$OUT/suite" \
            && mv /tmp/two.tgz "$OUT/" ;;
    three)  # run inline (the same commands)
        mkdir -p "$OUT/s16k"
        OUT=$OUT/s16k SEQLENS=16384 KV_GROUPS=8 BUDGET_S=200 \
            bash gpu/issue4_sweep.sh 0:d64-causal 0:d64-nomask 0:d128-nomask | tail -n 12
        tar -C "$OUT" -czf /tmp/three.tgz s16k && rm -rf "$OUT/s16k" && mv /tmp/three.tgz "$OUT/" ;;
    four)  # run inline (the same commands)
        mkdir -p "$OUT/r"
        OUT=$OUT/r SEQLENS=2048 KV_GROUPS=1 BUDGET_S=100 bash gpu/issue4_sweep.sh 0:d64-causal \
            | tail -n 3
        python3 -m benchmarks.bench_e2e --models gpt2-124m llama-1b --impls none \
            --gen-impls stable_flash sdpa --processes 3 --time-budget-s 220 \
            --out "$OUT/r/gen36-e2e.json" > "$OUT/r/gen36.log" 2>&1
        tail -n 12 "$OUT/r/gen36.log"
        tar -C "$OUT" -czf /tmp/four.tgz r && rm -rf "$OUT/r" && mv /tmp/four.tgz "$OUT/" ;;
    *) echo "one to four, not $STEP"; exit 2 ;;
esac
