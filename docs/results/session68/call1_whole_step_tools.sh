#!/usr/bin/env bash
# Session 68, call 1, two H200s of one host, the machine's Triton 3.6, branch v68a (session 67's
# v67b tools on main): their first GPU run.
#   GPU 0: benchmarks/tune_kernel --whole-step: each table entry of the D64 causal Triton kernels
#     timed in the forward + backward a training step runs, back to back for 1 s
#     (--sustain-s 1), twice, then with do_bench: the forward, dQ and dK/dV at S 2048 (MHA, GQA
#     8:1), and the dQ and dK/dV at S 4096 (GQA 4:1 and 8:1; the forward there is Gluon).
#   GPU 1: gpu/route_check --whole-step --heads-per-kv 4: the D64 causal backward's Triton dQ with
#     the Triton or Gluon dK/dV at GQA 4:1, S 2048 and 4096, back to back and with do_bench; then
#     the ~1B Llama model's training step (D64, 32 query / 8 KV heads, S 4096), stable_flash and
#     sdpa, three fresh processes each.
# OUT set.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONPATH=$PWD
quiet() { grep -v -E "leaked|nanobind|refleaks"; }
tune() {  # name, tune_kernel arguments...
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=0 python3 -m benchmarks.tune_kernel --grid table --whole-step \
        --time-budget-s 150 "$@" --out "$OUT/$name.json" 2>&1 | quiet > "$OUT/$name.log"
}
routes() {  # name, route_check arguments...
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=1 python3 -m gpu.route_check --whole-step --kinds routes \
        --head-dims 64 --causal true --seqlens 2048 4096 --heads-per-kv 4 --only 'dq triton' \
        --budget-s 100 "$@" --out "$OUT/$name.json" 2>&1 | quiet > "$OUT/$name.log"
}
(
    s2048=(--parts fwd dq dkdv --cases 64:1:1 64:1:8 --seqlen 2048)
    s4096=(--parts dq dkdv --cases 64:1:4 64:1:8 --seqlen 4096)
    tune tune_s2048_sustained_a "${s2048[@]}" --sustain-s 1
    tune tune_s4096_sustained_a "${s4096[@]}" --sustain-s 1
    tune tune_s2048_sustained_b "${s2048[@]}" --sustain-s 1
    tune tune_s4096_sustained_b "${s4096[@]}" --sustain-s 1
    tune tune_s2048_do_bench "${s2048[@]}"
    tune tune_s4096_do_bench "${s4096[@]}"
) &
(
    routes routes_gqa4_sustained --rounds 3 --sustain-s 1
    routes routes_gqa4_do_bench --rounds 5
    CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.bench_e2e --models llama-1b \
        --impls stable_flash sdpa --gen-impls none --processes 3 --time-budget-s 220 \
        --out "$OUT/e2e_llama.json" 2>&1 | quiet > "$OUT/e2e_llama.log"
) &
wait
tail -n 40 "$OUT"/*.log
cd "$OUT" && tar -cf results.tar *.json *.log && rm *.json *.log  # eight files at most come back
