"""Host microseconds of ops.validate_packing and of its device reads on a GPU (idle between calls;
session 47). Run: PYTHONPATH=$PWD python docs/results/session47/validate_packing_host.py"""
import statistics, time, torch
from hf_stable_attn import ops
dev = torch.device("cuda")
lengths = [512, 300, 700, 536]
T = sum(lengths)
q = torch.randn(T, 16, 64, device=dev, dtype=torch.bfloat16)
cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=dev, dtype=torch.int32)
def host_us(fn, n=300):
    laps = []
    for _ in range(n):
        torch.cuda.synchronize(); t = time.perf_counter(); fn(); laps.append(1e6 * (time.perf_counter() - t))
    return statistics.median(laps)
m_t = torch.tensor(700, device=dev)
cu2 = cu.clone()
for name, fn in [
    ("validate_packing int", lambda: ops.validate_packing(q, q, cu, cu, 700, 700)),
    ("validate_packing tensor", lambda: ops.validate_packing(q, q, cu, cu, m_t, m_t)),
    ("validate_packing tensor, two cu", lambda: ops.validate_packing(q, q, cu, cu2, m_t, m_t)),
    ("int(tensor) x2", lambda: (int(m_t), int(m_t))),
    ("cu.tolist()", lambda: cu.tolist()),
    ("cat(cu, cu).tolist()", lambda: torch.cat([cu, cu]).tolist()),
    ("cat(cu, cu.to, m.reshape.to x2).tolist()", lambda: torch.cat([cu, cu.to(cu.dtype), m_t.reshape(1).to(cu.dtype), m_t.reshape(1).to(cu.dtype)]).tolist()),
]:
    print(f"{name:45s} {host_us(fn):8.1f} us", flush=True)
