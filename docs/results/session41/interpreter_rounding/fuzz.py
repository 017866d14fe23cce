"""Random small cases of the Triton kernels under the interpreter against the reference path and
the float64 oracle (tests/test_kernel_interpret.check_case). Run with TRITON_INTERPRET=1."""
import os, random, sys, time, traceback
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import torch
import test_kernel_interpret as t
from hf_stable_attn.shift_rule import shift_params

seed0 = int(sys.argv[1]); budget = float(sys.argv[2])
only = {int(x) for x in sys.argv[3].split(",")} if len(sys.argv) > 3 else None
rng = random.Random(seed0)
t0 = time.time(); n = 0; fails = 0
while time.time() - t0 < budget:
    n += 1
    dtype = rng.choice([torch.bfloat16, torch.float16])
    b = rng.choice([1, 2])
    hq, hk = rng.choice([(1, 1), (2, 1), (4, 2), (3, 1), (2, 2), (6, 3)])
    d = rng.choice([16, 24, 32, 40, 64])
    sq, sk = rng.randint(1, 70), rng.randint(1, 70)
    causal = rng.random() < 0.5
    m = {}
    if causal:
        m["causal"] = True
        if rng.random() < 0.3:
            m["window_left"] = rng.randint(0, 20)
    elif rng.random() < 0.4:
        m["window_left"] = rng.choice([-1, rng.randint(0, 20)])
        m["window_right"] = rng.choice([-1, rng.randint(0, 20)])
    if rng.random() < 0.25:
        m["softcap"] = rng.uniform(3, 30)
    if rng.random() < 0.25:
        kpm = torch.rand(b, sk, generator=torch.Generator().manual_seed(n)) > 0.3
        m["key_padding_mask"] = kpm
    scale = rng.choice([1.0, 1.0, 4.0, 12.0])
    q, k, v = t._inputs((b, sq, hq, d), (b, sk, hk, d), dtype, seed=seed0 * 100000 + n)
    q = (q.float() * scale).to(dtype)
    if rng.random() < 0.3 and sk > 2:  # exact ties: repeat keys
        for _ in range(rng.randint(1, 4)):
            i, j = rng.randrange(sk), rng.randrange(sk)
            k[:, j] = k[:, i]
    stab = rng.random() < 0.8
    beta = rng.choice([2.0, 4.0, 8.0])
    params = shift_params(dtype, stabilize=stab, beta=beta)
    desc = dict(dtype=str(dtype), b=b, hq=hq, hk=hk, d=d, sq=sq, sk=sk, scale=scale, stab=stab, beta=beta,
                **{kk: (vv if not isinstance(vv, torch.Tensor) else "kpm") for kk, vv in m.items()})
    if only is not None and n not in only:
        if n > max(only):
            break
        continue
    try:
        t.check_case(q, k, v, t._masking(**m), params=params, grads=True, seed=n)
    except Exception as e:  # noqa: BLE001
        fails += 1
        print("FAIL", n, desc, repr(e)[:400], flush=True)
        if only is not None:
            traceback.print_exc()
print(f"seed {seed0}: {n} cases, {fails} failures in {time.time() - t0:.0f} s", flush=True)
