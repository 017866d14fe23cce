"""Triton kernels of hf-stable-attn (installed as ``hf_stable_attn.kernels``).

Only Triton and torch here: the launchers take every constant as an argument (see
docs/design.md, "Kernel launcher contract").
"""

from .flash_bwd import flash_attn_bwd
from .flash_fwd import flash_attn_fwd

__all__ = ["flash_attn_fwd", "flash_attn_bwd"]
