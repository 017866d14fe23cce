"""Shared test setup.

The repository's script folders (``recipes/``, ``benchmarks/``) are imported by their tests as
packages. The repository root is appended to ``sys.path`` (not prepended), so ``hf_stable_attn``
still comes from the installed package when there is one.
"""

import os
import socket
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.append(ROOT)


@pytest.fixture(autouse=True)
def _no_plans_from_earlier_tests():
    """Every test starts without prepared launches: tests change the kernels' routes, tables
    and switches, and a plan keeps the decisions of the call that made it."""
    from hf_stable_attn.kernels import clear_plans

    clear_plans()
    yield
    clear_plans()


@pytest.fixture
def gloo_group():
    """A one-process gloo process group on a free local port; destroyed afterwards unless the
    test already did."""
    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
