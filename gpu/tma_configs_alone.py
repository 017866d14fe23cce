"""Each head-dim-64 TMA config run alone, one process per config (a crash kills the CUDA context),
on the Llama ~1B training shape in Transformers' layout (B 2, S 4096, 32 query and 8 KV heads,
causal): forward and backward, the output compared with SDPA. This found the dQ config that
crashed autotuning (docs/kernel_notes.md, v6g); it is listed here although it left the table.

Run: ``PYTHONPATH=$PWD python gpu/tma_configs_alone.py`` (GPU only; enables the TMA configs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # the launchers read both at import
os.environ["HF_STABLE_ATTN_TMA"] = "1"

BATCH, SEQLEN, HEADS_Q, HEADS_KV, HEAD_DIM = 2, 4096, 32, 8, 64
REMOVED = [("dq", (64, 64, 4, 3, True))]  # crashed with "unspecified launch failure"


def run_one(part: str, config: tuple) -> None:
    """Forward and backward with ``config`` as the only entry of ``part``'s table."""
    import torch

    from hf_stable_attn.kernels import flash_bwd, flash_fwd

    tables = dict(fwd=flash_fwd._FWD_CONFIGS, dq=flash_bwd._DQ_CONFIGS,
                  dkdv=flash_bwd._DKDV_CONFIGS)
    tables[part][HEAD_DIM] = [config]

    def heads(n):  # Transformers' (B, H, S, D) projections seen as (B, S, H, D)
        shape = (BATCH, n, SEQLEN, HEAD_DIM)
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16).transpose(1, 2)

    q, k, v = heads(HEADS_Q), heads(HEADS_KV), heads(HEADS_KV)
    kw = dict(cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=SEQLEN, max_seqlen_k=SEQLEN,
              softmax_scale=HEAD_DIM ** -0.5, causal=True, window_left=-1, window_right=-1,
              softcap=0.0, dropout_p=0.0, seed=0)
    out, lse = flash_fwd.flash_attn_fwd(q, k, v, **kw, stabilize=True, beta=2.0,
                                        tie_window=2.0 ** -9, min_gap=2.0 ** -7, max_gap=64.0)
    grads = flash_bwd.flash_attn_bwd(torch.randn_like(q), q, k, v, out, lse, **kw)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2) for t in (q, k, v)), is_causal=True, enable_gqa=True).transpose(1, 2)
    print(f"max |out - sdpa| {float((out.float() - ref.float()).abs().max()):.4g}, "
          f"grads finite {all(bool(g.isfinite().all()) for g in grads)}")


def main() -> None:
    from hf_stable_attn.kernels import flash_bwd, flash_fwd

    tables = dict(fwd=flash_fwd._FWD_CONFIGS, dq=flash_bwd._DQ_CONFIGS,
                  dkdv=flash_bwd._DKDV_CONFIGS)
    jobs = [(part, c) for part, table in tables.items() for c in table[HEAD_DIM] if len(c) > 4]

    def child(job):
        part, config = job
        proc = subprocess.run([sys.executable, __file__, part, json.dumps(config)],
                              capture_output=True, text=True, timeout=300)
        lines = (proc.stdout if proc.returncode == 0 else proc.stderr).strip().splitlines()
        return f"{part:5s} {config}: exit {proc.returncode}, {(lines or ['?'])[-1][:120]}"

    with ThreadPoolExecutor(len(jobs) + len(REMOVED)) as pool:
        for line in pool.map(child, jobs + REMOVED):
            print(line, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        run_one(sys.argv[1], tuple(json.loads(sys.argv[2])))
    else:
        main()
