"""hf-stable-attn: stabilized flash attention for bf16 training, as a transformers plugin.

``import hf_stable_attn`` registers ``attn_implementation="stable_flash"``. The functional API
(``flash_attn_func``, ``flash_attn_varlen_func``) works without transformers models.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _map_source_kernels() -> None:
    """In a source checkout, serve the top-level ``kernels/`` folder as ``hf_stable_attn.kernels``.

    Installed packages get this mapping from pyproject's package-dir; never touches an
    installed top-level ``kernels`` (that name is Hugging Face's kernels library). A checkout
    always serves its own folder: an editable install's import finder maps the name to its own
    checkout whatever ``sys.path`` says, which would mix another tree's kernels into this one.
    """
    name = __name__ + ".kernels"
    if name in sys.modules:
        return
    folder = Path(__file__).resolve().parent.parent / "kernels"
    if not (folder / "__init__.py").is_file() or not (folder.parent / "pyproject.toml").is_file():
        return
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # As an import would: the package attribute (without it every ``from . import kernels``
    # falls through to the module ``__getattr__`` and an exception, ~30 us per call).
    setattr(sys.modules[__name__], "kernels", module)


_map_source_kernels()

from .interface import flash_attn_func, flash_attn_varlen_func  # noqa: E402
from .options import StableAttnOptions, configure, set_default_options  # noqa: E402
from .integration import ATTN_IMPLEMENTATION, register  # noqa: E402

register()

__version__ = "0.1.0"
__all__ = [
    "ATTN_IMPLEMENTATION",
    "StableAttnOptions",
    "StabilityMonitor",
    "configure",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "register",
    "set_default_options",
]


def __getattr__(name):
    if name == "StabilityMonitor":
        from .monitor import StabilityMonitor

        return StabilityMonitor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
