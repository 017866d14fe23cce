"""Triton kernels of hf-stable-attn (installed as ``hf_stable_attn.kernels``).

Only Triton and torch here: the launchers take every constant as an argument (see
docs/design.md, "Kernel launcher contract").
"""

from ._prepared import clear_plans
from .flash_bwd import _dkdv_launch, _dq_launch, flash_attn_bwd
from .flash_fwd import _fwd_launch, flash_attn_fwd

# Each kernel's launcher (``_common.TiledLaunch``): its tuned picks (``chosen``) and the tile
# config of its latest launch (``last``), for benchmarks and diagnostics.
LAUNCHES = {"fwd": _fwd_launch, "dq": _dq_launch, "dkdv": _dkdv_launch}

__all__ = ["flash_attn_fwd", "flash_attn_bwd", "LAUNCHES", "clear_plans"]
