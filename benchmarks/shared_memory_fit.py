"""Which tile configs of the Triton kernels fit the shared memory of NVIDIA GPUs, compiled on the
CPU (``benchmarks.compile_targets``): no GPU but Hopper ones was lent, and a config that does not
fit a GPU's shared memory per block fails to load there.

Per compute capability, part (``fwd``, ``dq``, ``dkdv``; a causal bf16 training call with the
fix), head dim and table entry: the shared memory the compiled kernel asks for and whether it
fits a block; per (capability, part, head dim) the first entry that fits, which is what the
launcher runs there with autotuning off (the tuner times only those that fit), or None, where
the launcher raises ``_tuning.NoConfigFits``. TMA entries only from compute capability 9.0
(``_common.has_tma``). Registers are not checked (a config that spills still loads).

Run: ``PYTHONPATH=$PWD python -m benchmarks.shared_memory_fit --out fit.json
[--capabilities 80 86 89 100 120] [--head-dims 64 128 256]``.
"""

from __future__ import annotations

import argparse
import json

import triton

from benchmarks.compile_targets import GPUS, SHARED_PER_BLOCK, entries_shared
from hf_stable_attn.kernels import LAUNCHES


def entry_records(capability: int, part: str, head_dim: int) -> list[dict]:
    """One record per table entry of ``part`` at ``head_dim`` that a GPU of ``capability`` may
    run: its config, the shared memory its kernel asks for, whether that fits a block."""
    records = []
    for config, shared in entries_shared(capability, part, head_dim):
        records.append(dict(capability=capability, part=part, head_dim=head_dim,
                            config=list(config), shared=shared,
                            fits=shared <= SHARED_PER_BLOCK[capability]))
        print(json.dumps(records[-1]), flush=True)
    return records


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capabilities", type=int, nargs="+", default=[80, 86, 89, 100, 120])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    records = [r for c in args.capabilities for part in LAUNCHES for d in args.head_dims
               for r in entry_records(c, part, d)]
    first = {}
    for r in records:
        key = f"sm{r['capability']} {r['part']} d{r['head_dim']}"
        first.setdefault(key, None)
        if r["fits"] and first[key] is None:
            first[key] = r["config"]
    report = dict(triton=triton.__version__,
                  shared_per_block={c: SHARED_PER_BLOCK[c] for c in args.capabilities},
                  gpus={c: GPUS[c] for c in args.capabilities},
                  first_fitting=first, records=records)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for key, config in first.items():
        print(f"{key}: {config if config else 'none fits'}")


if __name__ == "__main__":
    main()
