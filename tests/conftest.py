"""Shared test setup.

The repository's script folders (``recipes/``, ``benchmarks/``) are imported by their tests as
packages. The repository root is appended to ``sys.path`` (not prepended), so ``hf_stable_attn``
still comes from the installed package when there is one.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.append(ROOT)
