"""Greedy dynamic-cache decoding of one of ``bench_e2e``'s models with ``stable_flash`` (plans on
and off) and ``sdpa`` in one process, alternating, and the host time spent inside the registered
attention function (GPU only).

Each of 4 rounds generates 64 new tokens for 8 prompts of 128 with every entry, in the order
ABC, CBA, ABC, CBA, after two untimed generations each. Prints per entry the milliseconds per new
token of each round and the mean wall time of one attention call (the registered function,
wrapped by ``attention_host_profile.Clocked``), so a round's gap between the entries can be set
against the attention's share of it. The models and prompts are ``profile_e2e.decode``'s.

Run: ``PYTHONPATH=$PWD python gpu/decode_host_ab.py [llama-1b|gpt2-124m]``.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from transformers import AttentionInterface

from gpu.attention_host_profile import Clocked
from gpu.profile_e2e import decode
from hf_stable_attn.kernels import _prepared

NEW_TOKENS = 64
ROUNDS = 4
ENTRIES = [("stable_flash", True), ("sdpa", True), ("stable_flash", False)]  # (impl, plans on)


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "llama-1b"
    clocks = {}
    for impl in ("stable_flash", "sdpa"):
        clocks[impl] = Clocked(AttentionInterface._global_mapping[impl])
        AttentionInterface._global_mapping[impl] = clocks[impl]
    runs = {impl: decode(impl, NEW_TOKENS, model_name=name) for impl in clocks}
    for impl, plans in ENTRIES:
        _prepared.ENABLED = plans
        runs[impl]()
        runs[impl]()
    ms = {entry: [] for entry in ENTRIES}
    call_us = {entry: [] for entry in ENTRIES}
    for r in range(ROUNDS):
        for entry in (ENTRIES if r % 2 == 0 else ENTRIES[::-1]):
            impl, plans = entry
            _prepared.ENABLED = plans
            clock = clocks[impl]
            clock.seconds, clock.calls = 0.0, 0
            torch.cuda.synchronize()
            start = time.perf_counter()
            runs[impl]()
            torch.cuda.synchronize()
            ms[entry].append((time.perf_counter() - start) * 1e3 / NEW_TOKENS)
            call_us[entry].append(1e6 * clock.seconds / max(clock.calls, 1))
    for entry in ENTRIES:
        print(name, entry, "ms/token", [f"{x:.2f}" for x in ms[entry]],
              f"median {statistics.median(ms[entry]):.2f}",
              "| host us per attention call", [f"{x:.1f}" for x in call_us[entry]], flush=True)


if __name__ == "__main__":
    main()
