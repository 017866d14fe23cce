"""GPU: how far GPT-2 124M's training step is from waiting on the host, per fresh process.

Each process (``--impls`` in turn, ``--runs`` rounds) builds ``bench_e2e``'s GPT-2 and step
(autocast bf16, fused AdamW, batch 8 x 1024) and, after 3 warm-up steps, times ``--steps``
steps with the device drained before each. Per step it records the host's clock when the forward
returned the loss, when ``backward`` returned, when the optimizer step was issued, and when the
device had finished. ``lead_ms`` (device finished minus optimizer step issued) is how long the
GPU still had queued work when the host was done: near 0, the step waited on the host;
``attention_forward_host_ms`` is the host time spent inside the attention functions during the
forward (a wrapper around the registered function). The same
again with the autograd engine's device threads off (the backward's Python in this thread), and
per process a pure-Python probe (the host core's speed) at four points (after imports, after
building the model, after training, at the end), the CPU it ran on, its threads and whether any
trace or profile function is set. Run from the
repository root:

    PYTHONPATH=$PWD python gpu/e2e_host_lead.py --runs 3 --steps 15
"""

from __future__ import annotations

import argparse
import subprocess

from child_runs import child_json, keep_row, save_rows  # gpu/ is the script directory

CHILD = """
import json, os, statistics, sys, threading, time, timeit, torch
import hf_stable_attn  # registers stable_flash (build_model imports it for every impl)
from benchmarks.bench_e2e import MODELS, build_model
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
impl, steps = sys.argv[1], int(sys.argv[2])
def probe():
    return round(1e3 * min(timeit.repeat("sum(i * i for i in range(100000))", number=1, repeat=7)), 2)
row = {"python_probe_ms": {"start": probe()}}
attention_s = [0.0]
inner = ALL_ATTENTION_FUNCTIONS._global_mapping[impl]
def timed_attention(*args, **kwargs):
    t = time.perf_counter()
    try:
        return inner(*args, **kwargs)
    finally:
        attention_s[0] += time.perf_counter() - t
ALL_ATTENTION_FUNCTIONS._global_mapping[impl] = timed_attention
spec = MODELS["gpt2-124m"]
model = build_model(spec, impl, torch.device("cuda"), torch.float32).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
ids = torch.randint(model.config.vocab_size, (spec.batch, spec.seqlen), device="cuda")
def step_clocks():
    torch.cuda.synchronize()
    attention_s[0] = 0.0
    t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    t1 = time.perf_counter()
    attention_ms = 1e3 * attention_s[0]
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    opt.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    return [1e3 * (t - t0) for t in (t1, t2, t3, t4)] + [attention_ms]
def medians(n):
    for _ in range(3):
        step_clocks()
    laps = [step_clocks() for _ in range(n)]
    fwd, bwd, opt_, done, attention = (statistics.median(c) for c in zip(*laps))
    return {"step_ms": round(done, 2), "forward_issued_ms": round(fwd, 2),
            "attention_forward_host_ms": round(attention, 2),
            "backward_issued_ms": round(bwd, 2), "optimizer_issued_ms": round(opt_, 2),
            "lead_ms": round(statistics.median(l[3] - l[2] for l in laps), 2)}
row["python_probe_ms"]["built"] = probe()
row["threads_on"] = medians(steps)
row["python_probe_ms"]["trained"] = probe()
torch.autograd.set_multithreading_enabled(False)
row["threads_off"] = medians(steps)
torch.autograd.set_multithreading_enabled(True)
row["python_probe_ms"]["end"] = probe()
row["python_threads"] = [t.name for t in threading.enumerate()]
row["os_threads"] = len(os.listdir("/proc/self/task"))
monitoring = getattr(sys, "monitoring", None)
row["tracing"] = [sys.gettrace() is not None, sys.getprofile() is not None,
                  [monitoring.get_tool(i) for i in range(6)] if monitoring else None]
with open("/proc/self/stat") as f:
    row["cpu"] = int(f.read().rsplit(")", 1)[1].split()[36])
row["cpus_allowed"] = len(os.sched_getaffinity(0))
print(json.dumps(row))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--impls", nargs="+", default=["stable_flash", "sdpa"])
    args = ap.parse_args()
    lscpu = subprocess.run(["lscpu"], text=True, capture_output=True).stdout.splitlines()
    rows = [{"lscpu": lscpu[:30]}]
    for i in range(args.runs):
        for impl in args.impls:
            keep_row(rows, {"run": i, "impl": impl, **child_json(CHILD, impl, str(args.steps))})
    save_rows(rows, "gpt2_host_lead.json")


if __name__ == "__main__":
    main()
