"""GPU: where the host time of ``stable_flash``'s attention calls goes inside GPT-2 124M training
(``gpu/profile_e2e.py``'s step: ``bench_e2e``'s model and optimizer). After 3 warm-up steps,
cProfile runs only inside the registered attention function (the forward calls) and inside
``ops._Attention.backward`` (the backward calls, in the autograd engine's device thread) over
``--steps`` steps; each is printed by own time and by cumulative time, with the host
microseconds per call measured without the profiler in the same process. With ``--decode
MODEL`` it profiles the attention calls of ``profile_e2e.decode``'s greedy dynamic-cache
generation of that model instead (one generation per step). Run from the repository root:

    PYTHONPATH=$PWD python gpu/attention_host_profile.py --steps 10 > attention_host_profile.txt
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

import hf_stable_attn  # noqa: F401  (registers stable_flash)
from gpu.profile_e2e import decode, train_steps
from hf_stable_attn import ops


class Clocked:
    """Wraps a function: host seconds and calls, and a cProfile of its calls while ``profiling``."""

    def __init__(self, fn):
        self.fn, self.seconds, self.calls = fn, 0.0, 0
        self.profile, self.profiling = cProfile.Profile(), False

    def __call__(self, *args, **kwargs):
        if self.profiling:
            return self.profile.runcall(self.fn, *args, **kwargs)
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def stats(self, sort: str, lines: int = 35) -> str:
        text = io.StringIO()
        pstats.Stats(self.profile, stream=text).sort_stats(sort).print_stats(lines)
        return text.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--decode", metavar="MODEL", help="profile this model's generation instead")
    args = ap.parse_args()
    forward = Clocked(ALL_ATTENTION_FUNCTIONS._global_mapping["stable_flash"])
    ALL_ATTENTION_FUNCTIONS._global_mapping["stable_flash"] = forward
    backward = Clocked(ops._Attention.backward)
    ops._Attention.backward = staticmethod(backward)
    if args.decode:  # 64 new tokens of 8 prompts, after one warm-up generation
        steps = decode("stable_flash", 64, model_name=args.decode)
    else:  # GPT-2 124M, after 3 warm-up steps
        steps = train_steps("stable_flash", 1)

    def step():
        steps()
        torch.cuda.synchronize()

    for clocked in (forward, backward):
        clocked.seconds, clocked.calls = 0.0, 0
    for _ in range(args.steps):
        step()
    print(torch.cuda.get_device_name(), torch.__version__)
    per_call = {name: 1e6 * c.seconds / max(c.calls, 1) for name, c in
                (("forward", forward), ("backward", backward))}
    print(f"host us per call without the profiler: forward {per_call['forward']:.1f}"
          f", backward {per_call['backward']:.1f}")
    forward.profiling = backward.profiling = True
    for _ in range(args.steps):
        step()
    for name, clocked in (("forward", forward), ("backward", backward)):
        if not clocked.calls:  # decoding: no backward
            continue
        for sort in ("tottime", "cumulative"):
            print(f"\n== {name} calls by {sort}\n{clocked.stats(sort)}")


if __name__ == "__main__":
    main()
