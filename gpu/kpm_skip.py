"""The backward on key-padded batches with and without the dK/dV kernel's skip of key tiles that
are all padding (GPU only).

Times ``flash_attn_bwd`` of the shipped kernels (tables' first configs, no autotuning) against a
copy of the package from before the skip (``--before``, a folder holding it as package
``kpm_before``), interleaved rounds, on
B 4, S 4096, 16 heads of D128, causal and not, with every second row's first ``pad`` keys
padding, and compares their gradients (they must be equal: the skipped programs only ever added
zeros). One JSON line per (causal, pad).

Run: ``PYTHONPATH=$PWD python gpu/kpm_skip.py --before .variants > kpm_skip.jsonl``
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # both packages on their tables' first entries

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from benchmarks.bench_e2e import left_padding_mask  # noqa: E402
from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import fix_kwargs, launch_kwargs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.before)
    packages = {"shipped": "hf_stable_attn.kernels", "before": "kpm_before"}
    mods = {name: tuple(importlib.import_module(f"{p}.{m}") for m in ("flash_fwd", "flash_bwd"))
            for name, p in packages.items()}
    b, s, h, d = 4, 4096, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                     for _ in range(4))
    for causal in (True, False):
        for pad in (0, 1024, 2048, 3072):
            mask = left_padding_mask(b, s, pad, torch.device("cuda")).bool()
            kw = dict(launch_kwargs(s, s, d, causal=causal), key_padding_mask=mask)
            fix = fix_kwargs(shift_params(q.dtype))
            grads, calls = {}, {}
            for name, (fwd, bwd) in mods.items():
                out, lse = fwd.flash_attn_fwd(q, k, v, **kw, **fix)

                def call(bwd=bwd, out=out, lse=lse):
                    return bwd.flash_attn_bwd(dout, q, k, v, out, lse, **kw)

                grads[name] = call()
                calls[name] = call
            diff = max(float((a.float() - c.float()).abs().max())
                       for a, c in zip(grads["shipped"], grads["before"]))
            ms = {name: [] for name in calls}
            for _ in range(3):
                for name, call in calls.items():
                    ms[name].append(do_bench(call, warmup=25, rep=100))
            print(json.dumps(dict(gpu=torch.cuda.get_device_name(), causal=causal, pad=pad,
                                  padded_rows="every second", max_grad_diff=diff, ms_rounds=ms,
                                  ms={n: statistics.median(v) for n, v in ms.items()})),
                  flush=True)


if __name__ == "__main__":
    main()
