"""The forward kernels' output and log-sum-exp on a fixed set of inputs, saved, so that two
source trees can be compared bit for bit (e.g. a kernel change that should not move a bit).

``save`` runs ``kernels.flash_attn_fwd`` on ``near_tie_inputs`` (a runner-up a few bf16 steps
from the maximum, across key tiles) at head dims 64 and 128, with and without a causal mask,
then on up to ``--cases`` cases drawn from ``--seed`` as ``gpu/fuzz_kernels.py`` draws them
(every route: masks, packed and padded layouts, softcap, dropout, GQA, odd head dims, the fix
on and off, repeated keys, peaked rows) until ``--budget-s``. Launches use the heuristic
config per shape (``HF_STABLE_ATTN_AUTOTUNE=0`` is set here), so both trees run the same tiles.
``compare`` reads two such files and lists every tensor of their common cases that differs.

The package maps its source folder's ``kernels/`` (``hf_stable_attn/__init__.py``), so the tree
first on ``PYTHONPATH`` runs whole (a tree from before session 79 needs an environment without
an editable install of another checkout). Run on the GPU, once per tree, then compare:
  HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python gpu/forward_bits.py save --out new.safetensors
  PYTHONPATH=OLD_TREE:$PWD python gpu/forward_bits.py save --out old.safetensors
  PYTHONPATH=$PWD python gpu/forward_bits.py compare old.safetensors new.safetensors --out b.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
from dataclasses import asdict

os.environ["HF_STABLE_ATTN_AUTOTUNE"] = "0"  # before the kernels are imported

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import hf_stable_attn  # noqa: E402
from gpu.fuzz_kernels import draw_case, gluon_parts, make_inputs  # noqa: E402
from hf_stable_attn.kernels import LAUNCHES, flash_attn_fwd  # noqa: E402
from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import fix_kwargs, launch_kwargs, near_tie_inputs  # noqa: E402


def drawn_cases(seed: int, count: int, max_len: int, device: str):
    """``(name, meta, q, k, v, launch keywords, shift params)`` of ``count`` drawn cases."""
    rng = random.Random(seed)
    for i in range(count):
        case = draw_case(rng, max_len)
        q, k, v, _, masking = make_inputs(case, seed * 100_000 + i, device)
        params = shift_params(q.dtype, stabilize=case.stabilize, beta=case.beta)
        yield f"drawn{i}", asdict(case), q, k, v, masking, params


def near_tie_cases(device: str):
    """The same tuple for ``near_tie_inputs`` (Sq 512, Sk 4096), head dims 64 and 128, causal
    and not."""
    for d in (64, 128):
        q, k, v = (t.to(device) for t in near_tie_inputs(d, 512, 4096, seed=d))
        for causal in (False, True):
            meta = dict(head_dim=d, causal=causal, near_tie=True)
            yield (f"tied_d{d}_causal{int(causal)}", meta, q, k, v,
                   launch_kwargs(512, 4096, d, causal=causal), shift_params(q.dtype))


def save(args) -> None:
    """Run the forward on the near-tie cases, then on drawn cases until ``--cases`` or
    ``--budget-s``; save each case's ``out`` and ``lse`` and the cases' fields."""
    start, tensors, metas = time.perf_counter(), {}, {}
    cases = itertools.chain(near_tie_cases(args.device) if args.near_tie else (),
                            drawn_cases(args.seed, args.cases, args.max_len, args.device))
    for name, meta, q, k, v, masking, params in cases:
        if name.startswith("drawn") and time.perf_counter() - start > args.budget_s:
            break
        for launch in LAUNCHES.values():
            launch.last = None
        out, lse = flash_attn_fwd(q, k, v, **masking, **fix_kwargs(params))
        meta = dict(meta, gluon=gluon_parts())
        tensors[f"{name}.out"] = out.contiguous().cpu()
        tensors[f"{name}.lse"] = lse.contiguous().cpu()
        metas[name] = meta
    header = dict(package=os.path.dirname(hf_stable_attn.__file__), seed=str(args.seed),
                  device=(torch.cuda.get_device_name() if args.device == "cuda" else args.device),
                  cases=json.dumps(metas))
    save_file(tensors, args.out, metadata=header)
    print(json.dumps(dict(saved=args.out, cases=len(metas), package=header["package"],
                          seconds=round(time.perf_counter() - start, 1))))


def compare(args) -> int:
    """The tensors both files hold, compared with ``torch.equal`` (NaNs never equal); a run cut
    short by its budget holds fewer drawn cases, so only the common ones count."""
    a, b = load_file(args.a), load_file(args.b)
    common = sorted(a.keys() & b.keys())
    differ = []
    for key in common:
        x, y = a[key], b[key]
        if x.shape != y.shape:
            differ.append(dict(tensor=key, shapes=[list(x.shape), list(y.shape)]))
        elif not torch.equal(x, y):
            apart = x != y  # only these: equal +inf (lse of rows without keys) gives NaN
            diff = (x[apart].double() - y[apart].double()).abs()
            differ.append(dict(tensor=key, elements=int(apart.sum()), numel=x.numel(),
                               max_abs_diff=float(diff.max()) if diff.numel() else 0.0))
    report = dict(a=args.a, b=args.b, tensors_a=len(a), tensors_b=len(b), compared=len(common),
                  differ=differ)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(dict(compared=len(common), differ=len(differ))))
    return 1 if differ or not common else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save", help="run the forward on the cases and save its tensors")
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=7801)
    s.add_argument("--cases", type=int, default=300)
    s.add_argument("--budget-s", type=float, default=240, help="no new drawn case after this")
    s.add_argument("--max-len", type=int, default=2500)
    s.add_argument("--device", default="cuda")
    s.add_argument("--near-tie", action=argparse.BooleanOptionalAction, default=True,
                   help="add the near-tie cases (slow under TRITON_INTERPRET=1)")
    c = sub.add_parser("compare", help="list the tensors two saved files disagree on")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.command == "save":
        save(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
