"""Each TMA tile config of each kernel run alone, one process per config (a crash kills the CUDA
context), over shapes that reach every loop of the kernels: causal and not, odd lengths, query
and key lengths that differ, windows, GQA, Transformers' (B, H, S, D) layout. Every result is
compared with the default pointer-load kernels on the same inputs (same algorithm, other tiles:
differences are bf16 rounding). This found the dQ config that crashed autotuning
(docs/kernel_notes.md, v6g); it stays listed here although it left the table.

Run: ``PYTHONPATH=$PWD python gpu/tma_configs_alone.py`` (GPU only; the TMA configs run at every
length here, also below ``TMA_MIN_SEQLEN``). Its one run (docs/results/gpu_tests_v7/) predates
that threshold, so the line setting it did not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # the launchers read both at import
os.environ["HF_STABLE_ATTN_TMA"] = "1"

REMOVED = [("dq", 64, (64, 64, 4, 3, True))]  # crashed with "unspecified launch failure"
# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, causal, window_left, Transformers' layout)
SHAPES = [
    (2, 4096, 4096, 32, 8, True, -1, True),
    (2, 1024, 1024, 16, 16, True, -1, False),
    (2, 2048, 2048, 16, 2, False, -1, True),
    (3, 1000, 1000, 4, 4, True, -1, False),
    (2, 777, 777, 4, 1, False, -1, False),
    (2, 512, 1536, 8, 8, True, -1, False),
    (2, 1536, 512, 8, 8, False, -1, False),
    (2, 2048, 2048, 8, 8, True, 256, False),
    (1, 64, 64, 2, 2, True, -1, False),
]
TOLERANCE = 2e-2  # relative L2 difference from the pointer kernels (its run: at most 1.4e-3)


def _tables():
    from hf_stable_attn.kernels import flash_bwd, flash_fwd

    return dict(fwd=flash_fwd._FWD_CONFIGS, dq=flash_bwd._DQ_CONFIGS,
                dkdv=flash_bwd._DKDV_CONFIGS)


def _attention(q, k, v, dout, causal, window_left):
    """Forward and backward through the launchers: (out, dq, dk, dv), with the tables as they
    are now (no plan of an earlier call's config)."""
    from hf_stable_attn.kernels import clear_plans, flash_bwd, flash_fwd

    clear_plans()
    sq, sk = q.shape[1], k.shape[1]
    kw = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=sq, max_seqlen_k=sk,
              softmax_scale=q.shape[-1] ** -0.5, causal=causal, window_left=window_left,
              window_right=-1, softcap=0.0, dropout_p=0.0, seed=0)
    out, lse = flash_fwd.flash_attn_fwd(q, k, v, **kw, stabilize=True, beta=2.0,
                                        tie_window=2.0 ** -9, min_gap=2.0 ** -7, max_gap=64.0)
    return (out, *flash_bwd.flash_attn_bwd(dout, q, k, v, out, lse, **kw))


def run_one(part: str, head_dim: int, config: tuple) -> None:
    """Every shape with ``config`` as ``part``'s only entry and the other kernels on their
    first pointer-load entry; prints one line per shape, or dies with the CUDA error."""
    import torch

    from hf_stable_attn.kernels import _common

    _common.TMA_MIN_SEQLEN = _common.TMA_MIN_SEQLEN_UNMASKED = 0  # TMA at every length here
    tables = _tables()
    pointer = {name: [c for c in table[head_dim] if not _common.tile_config(c)[4]][:1]
               for name, table in tables.items()}
    for b, sq, sk, hq, hk, causal, wl, hf_layout in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(sq + hq)

        def heads(n, s):
            shape = (b, n, s, head_dim) if hf_layout else (b, s, n, head_dim)
            x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
            return x.transpose(1, 2) if hf_layout else x

        q, k, v, dout = heads(hq, sq), heads(hk, sk), heads(hk, sk), heads(hq, sq)
        for name, table in tables.items():
            table[head_dim] = pointer[name]
        expected = _attention(q, k, v, dout, causal, wl)
        tables[part][head_dim] = [config]
        got = _attention(q, k, v, dout, causal, wl)
        torch.cuda.synchronize()
        errs = [float((g.float() - e.float()).norm() / e.float().norm().clamp_min(1e-30))
                for g, e in zip(got, expected)]
        verdict = "ok" if all(e <= TOLERANCE for e in errs) else "MISMATCH"
        print(f"  {verdict} B{b} S{sq}/{sk} H{hq}/{hk} causal={causal} wl={wl} "
              f"hf={hf_layout}: rel diff out/dq/dk/dv " + " ".join(f"{e:.1e}" for e in errs),
              flush=True)


def main() -> None:
    from hf_stable_attn.kernels._common import tile_config

    jobs = [(part, d, c) for part, table in _tables().items() for d in (64, 128)
            for c in table[d] if tile_config(c)[4]] + REMOVED

    def child(job):
        proc = subprocess.run([sys.executable, __file__, json.dumps(job)], capture_output=True,
                              text=True, timeout=600)
        tail = proc.stdout.rstrip()
        if proc.returncode:
            tail += "\n  died: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
        return f"{job[0]} D{job[1]} {tuple(job[2])}: exit {proc.returncode}\n{tail}"

    with ThreadPoolExecutor(6) as pool:
        for report in pool.map(child, jobs):
            print(report, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 2:
        part, head_dim, config = json.loads(sys.argv[1])
        run_one(part, head_dim, tuple(config))
    else:
        main()
