"""Which ptxas builds our kernels on NVIDIA GPUs.

Triton 3.6 bundles the ptxas of CUDA 12.8, which crashes (SIGSEGV) on our 2-stage TMA configs;
CUDA 13's ptxas builds them, and on an H100 the D64 forward's (64, 64, 4, 2, TMA) config ran
the causal forward 4-8% faster than the best 3-stage one (docs/kernel_notes.md, v10 and v15a).
PyTorch's CUDA 13 wheels ship that ptxas (``torch/bin/ptxas``), and ``torch.compile`` points
Triton at it for the whole process. We point Triton at it only while our own kernels compile
(``TiledLaunch``'s first launch of a config), only when it is newer than Triton's own, and never
when the user chose one (``TRITON_PTXAS_PATH``, which ``triton.knobs.nvidia.ptxas`` also sets).

From Triton 3.9, sm_90 is built by the bundled ``ptxas-blackwell`` (CUDA 13.4 in 3.9; 3.6-3.8 use
it from sm_100 on), chosen by ``TRITON_PTXAS_BLACKWELL_PATH``: this module then reads and sets
that tool and that variable instead (session 29 ran the GPU suite under 3.9 on an H100).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import threading

import torch
import triton

# The first ptxas release that builds our 2-stage TMA kernels (12.8 and 12.9 crash on them).
TWO_STAGE_TMA_RELEASE = (13, 0)


@functools.lru_cache(maxsize=1)
def sm90_ptxas() -> str:
    """Name of the bundled ptxas Triton builds sm_90 with: ``ptxas-blackwell`` where it builds
    sm_100 with the same one (Triton 3.9 on), else ``ptxas`` (also where Triton cannot say: no
    NVIDIA backend, or a ptxas missing)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        same = get_ptxas(90).path == get_ptxas(100).path
    except (ImportError, AttributeError, RuntimeError):
        same = False
    return "ptxas-blackwell" if same else "ptxas"


def ptxas_env() -> str:
    """The variable that chooses that ptxas, named as Triton's knobs name a tool's."""
    return f"TRITON_{sm90_ptxas().upper().replace('-', '_')}_PATH"


def triton_tool(name: str) -> str:
    """Path of a CUDA tool bundled with Triton (``ptxas``, ``ptxas-blackwell``, ``cuobjdump``)."""
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def triton_ptxas() -> str:
    """Path of the ptxas bundled with Triton that builds sm_90."""
    return triton_tool(sm90_ptxas())


def torch_ptxas() -> str:
    """Path of the ptxas shipped with PyTorch's CUDA wheels (absent from CPU builds)."""
    return os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")


@functools.lru_cache(maxsize=None)
def release(path: str) -> tuple[int, int] | None:
    """``(major, minor)`` of the ptxas at ``path`` (``--version``), None if it does not run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"release (\d+)\.(\d+)", out.stdout)
    return (int(found[1]), int(found[2])) if found else None


@functools.lru_cache(maxsize=1)
def newer_torch_ptxas() -> str | None:
    """torch's ptxas where it runs and is a newer release than Triton's, else None."""
    ours = release(torch_ptxas()) if os.access(torch_ptxas(), os.X_OK) else None
    bundled = release(triton_ptxas())
    if ours is None or (bundled is not None and ours <= bundled):
        return None
    return torch_ptxas()


def compiling_ptxas() -> str:
    """The ptxas our kernels compile with now: the user's, else torch's if newer, else Triton's."""
    return os.environ.get(ptxas_env()) or newer_torch_ptxas() or triton_ptxas()


def two_stage_tma_ok() -> bool:
    """Whether that ptxas builds 2-stage TMA configs."""
    found = release(compiling_ptxas())
    return found is not None and found >= TWO_STAGE_TMA_RELEASE


# Compiles inside ``ptxas_for_compile`` now, across threads, and whether the first of them set
# the variable (so the last one out removes it).
_LOCK = threading.Lock()
_inside = {"count": 0, "set_by_us": False}


@contextlib.contextmanager
def ptxas_for_compile():
    """Around a launch that may compile: ``ptxas_env()`` at torch's ptxas while it runs,
    where that ptxas is newer than Triton's and no ptxas was chosen; otherwise nothing. The
    variable is process-wide, so it stays set until the last of overlapping compiles (in
    several threads) is done: Triton reads it once for the PTX version and again for the
    assembler, and a thread that removed it in between would hand another thread's PTX for
    CUDA 13 to Triton's ptxas 12.8 (the likely cause of session 24's failed candidate,
    docs/kernel_notes.md)."""
    with _LOCK:
        if _inside["count"] == 0:
            path = None if os.environ.get(ptxas_env()) else newer_torch_ptxas()
            _inside["set_by_us"] = path is not None
            if path is not None:
                os.environ[ptxas_env()] = path
        _inside["count"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _inside["count"] -= 1
            if _inside["count"] == 0 and _inside["set_by_us"]:
                os.environ.pop(ptxas_env(), None)
                _inside["set_by_us"] = False
