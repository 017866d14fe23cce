"""Every tile config in the Triton kernels' tables computes the right thing (``pytest -m gpu``).

The suite runs with the tables' first entries (``HF_STABLE_ATTN_AUTOTUNE=0``) and a tuned run
launches whichever entry wins on the user's GPU, so the other entries would first run on a
user's machine. Here each entry of the forward, dQ and dK/dV tables at head dims 16 to 256
is forced (the Gluon kernels switched off, the table cut to that entry, the launcher's earlier
picks forgotten) on a causal GQA call long enough for the TMA entries, with lengths that leave
partial tiles, and checked against float64 by the flash rule (2x plain bf16's error forward, 3x
the gradients).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from hf_stable_attn.kernels import LAUNCHES, clear_plans, flash_bwd, flash_fwd  # noqa: E402
from hf_stable_attn.kernels._common import TMA_MIN_SEQLEN, block_d, tile_config  # noqa: E402
from hf_stable_attn.kernels._ptxas import two_stage_tma_ok  # noqa: E402
from hf_stable_attn.shift_rule import shift_params  # noqa: E402
from hf_stable_attn.testing import (  # noqa: E402
    check_flash_rule, fix_kwargs, launch_kwargs, oracle_with_grads,
)

SEQLEN_Q, SEQLEN_K = TMA_MIN_SEQLEN + 77, TMA_MIN_SEQLEN + 141  # partial last tiles


def _cases():
    return [pytest.param(part, head_dim, config,
                         id=f"{part}-d{head_dim}-{'x'.join(map(str, config))}")
            for part, launch in LAUNCHES.items() for head_dim in (16, 32, 64, 128, 256)
            for config in map(tile_config, launch.table[head_dim])]


@pytest.mark.parametrize("part, head_dim, config", _cases())
def test_table_config_against_float64(part, head_dim, config, monkeypatch):
    if config[4] and config[3] < 3 and not two_stage_tma_ok():
        pytest.skip("2-stage TMA configs need the ptxas of CUDA 13 (kernels/_ptxas.py)")
    if flash_fwd.flash_fwd_hopper is not None:  # Gluon's Hopper kernels off: Triton's run
        monkeypatch.setattr(flash_fwd.flash_fwd_hopper, "ENABLED", False)
    monkeypatch.setitem(LAUNCHES[part].table, block_d(head_dim), [config])
    monkeypatch.setattr(LAUNCHES[part], "chosen", {})  # a tuned run's pick for this launch key
    clear_plans()
    gen = torch.Generator(device="cuda").manual_seed(head_dim * 131 + sum(config[:4]))
    q, k, v = (torch.randn(1, s, h, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
               for s, h in ((SEQLEN_Q, 4), (SEQLEN_K, 2), (SEQLEN_K, 2)))
    dout = torch.randn(q.shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    m = launch_kwargs(SEQLEN_Q, SEQLEN_K, head_dim, causal=True)
    try:
        out, lse = flash_fwd.flash_attn_fwd(q, k, v, **m, **fix_kwargs(shift_params(q.dtype)))
        grads = flash_bwd.flash_attn_bwd(dout, q, k, v, out, lse, **m) if part != "fwd" else ()
    finally:
        clear_plans()
    assert LAUNCHES[part].last == config  # the forced entry ran

    exact, exact_g = oracle_with_grads(q, k, v, dout, torch.float64, causal=True)
    plain, plain_g = oracle_with_grads(q, k, v, dout, torch.bfloat16, causal=True)
    if part == "fwd":
        check_flash_rule("out", out, plain, exact, 2.0, slack=1e-4)
        return
    names = ("dq",) if part == "dq" else ("dk", "dv")
    for name, got, pl, ex in zip(("dq", "dk", "dv"), grads, plain_g, exact_g):
        if name in names:
            check_flash_rule(name, got, pl, ex, 3.0, slack=1e-4)
