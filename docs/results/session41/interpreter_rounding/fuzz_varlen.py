"""Random packed (varlen) and dropout cases of the Triton kernels under the interpreter against
the reference path and the float64 oracle (tests/test_kernel_interpret.check_case)."""
import os, random, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import torch
import test_kernel_interpret as t
from hf_stable_attn.shift_rule import shift_params
seed0 = int(sys.argv[1]); budget = float(sys.argv[2])
rng = random.Random(seed0); t0 = time.time(); n = 0; fails = 0
while time.time() - t0 < budget:
    n += 1
    dtype = rng.choice([torch.bfloat16, torch.float16])
    hq, hk = rng.choice([(1, 1), (2, 1), (4, 2), (3, 1)])
    d = rng.choice([16, 24, 40, 64])
    m = {}
    if rng.random() < 0.5:  # packed sequences
        nseq = rng.randint(1, 4)
        lq = [rng.randint(1, 40) for _ in range(nseq)]
        lk = [rng.randint(1, 40) for _ in range(nseq)]
        cu_q = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32)
        cu_k = torch.tensor([0] + torch.tensor(lk).cumsum(0).tolist(), dtype=torch.int32)
        q, k, v = t._inputs((sum(lq), hq, d), (sum(lk), hk, d), dtype, seed=seed0 * 100000 + n)
        m.update(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lq), max_seqlen_k=max(lk))
    else:
        b = rng.choice([1, 2]); sq, sk = rng.randint(1, 60), rng.randint(1, 60)
        q, k, v = t._inputs((b, sq, hq, d), (b, sk, hk, d), dtype, seed=seed0 * 100000 + n)
    if rng.random() < 0.5:
        m["causal"] = True
    if rng.random() < 0.3:
        m["window_left"] = rng.randint(0, 15)
    if rng.random() < 0.5:
        m["dropout_p"] = rng.choice([0.1, 0.3]); m["seed"] = rng.randint(0, 2**31)
    scale = rng.choice([1.0, 4.0])
    q = (q.float() * scale).to(dtype)
    params = shift_params(dtype, stabilize=rng.random() < 0.8)
    desc = {kk: (vv if not isinstance(vv, torch.Tensor) else vv.tolist()) for kk, vv in m.items()}
    desc.update(dtype=str(dtype), hq=hq, hk=hk, d=d, shape=tuple(q.shape), kshape=tuple(k.shape), scale=scale, stab=params.stabilize)
    try:
        t.check_case(q, k, v, t._masking(**m), params=params, grads=True, seed=n)
    except Exception as e:  # noqa: BLE001
        fails += 1
        print("FAIL", n, desc, repr(e)[:300], flush=True)
print(f"seed {seed0}: {n} cases, {fails} failures in {time.time() - t0:.0f} s", flush=True)
