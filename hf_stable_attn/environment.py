"""``hf-stable-attn env``: what a bug report needs. The versions that run (this package, Python,
torch and the libraries the plugin works with), whether ``stable_flash`` is registered with
Transformers, which path its calls take on the CPU and on each GPU, and the environment
settings that change that path (``HF_STABLE_ATTN_*``, ``TRITON_*``)."""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

LIBRARIES = ("torch", "triton", "transformers", "accelerate", "peft", "datasets", "safetensors")
SETTING_PREFIXES = ("HF_STABLE_ATTN_", "TRITON_")
PATH_NAMES = {"triton": "the Triton kernels", "reference": "the PyTorch reference path"}
CPU_PATH = f"{PATH_NAMES['reference']} (every dtype)"


def module_version(name: str) -> str | None:
    """Module ``name``'s ``__version__`` as imported here, None where it is absent."""
    try:
        return str(importlib.import_module(name).__version__)
    except ImportError:
        return None


def library_versions() -> dict[str, str | None]:
    """``{name: __version__}`` of each of ``LIBRARIES`` (``module_version``)."""
    return {name: module_version(name) for name in LIBRARIES}


def package_version() -> str:
    """This package's installed version, or where its source runs from when not installed."""
    try:
        return metadata.version("hf-stable-attn")
    except metadata.PackageNotFoundError:
        return f"not installed (source at {Path(__file__).resolve().parent})"


def nvidia_capability(index: int) -> tuple[int, int] | None:
    """CUDA device ``index``'s capability as the kernels test it
    (``kernels._common.nvidia_capability``: None under ROCm, whose numbers name AMD
    architectures, gfx90a as 9.0); None without Triton, where no kernel runs."""
    import torch

    try:
        from .kernels._common import nvidia_capability as kernels_capability
    except ImportError:
        return None
    return kernels_capability(torch.device("cuda", index))


def hopper_forward_state(capability: tuple[int, int] | None) -> str:
    """Whether the Gluon (warp-specialized) forward serves a GPU of NVIDIA ``capability``
    (``nvidia_capability``'s)."""
    if capability != (9, 0):
        return "not used (it needs an NVIDIA Hopper GPU, capability 9.0)"
    try:
        from .kernels import flash_fwd_hopper
    except ImportError as err:  # a Triton without Gluon's Hopper modules
        return f"unavailable ({err}); the Triton forward serves every call"
    if not flash_fwd_hopper.ENABLED:
        return "off (HF_STABLE_ATTN_GLUON=0); the Triton forward serves every call"
    return "on, for the calls it covers and runs faster (docs/design.md)"


def gpu_paths() -> list[dict]:
    """One entry per visible CUDA device: its name, capability, memory and attention path."""
    import torch

    if not torch.cuda.is_available():
        return []
    paths = {"bf16_fp16": cuda_path(torch.bfloat16, torch.float16),
             "fp32": cuda_path(torch.float32)}  # the same on every device
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append({
            "index": index, "name": props.name, "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1), **paths,
            "hopper_forward": hopper_forward_state(nvidia_capability(index)),
        })
    return gpus


def cuda_path(*dtypes) -> str:
    """The path ``backend="auto"`` gives CUDA tensors of ``dtypes`` (``ops.auto_backend``, the
    same for each of them), with "(logged)" where it is the reference path, which warns there."""
    from .ops import auto_backend

    (backend,) = {auto_backend(True, dtype) for dtype in dtypes}
    return PATH_NAMES[backend] + (" (logged)" if backend == "reference" else "")


def registered() -> bool:
    """Whether ``attn_implementation="stable_flash"`` is registered with Transformers."""
    from transformers import AttentionInterface

    from .integration import ATTN_IMPLEMENTATION

    return ATTN_IMPLEMENTATION in AttentionInterface().valid_keys()


def settings() -> dict[str, str]:
    """The environment variables that change the plugin's or Triton's behaviour, as set."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(SETTING_PREFIXES)}


def report() -> dict:
    """Everything ``hf-stable-attn env`` prints, as plain data."""
    import torch

    return {
        "hf_stable_attn": package_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": library_versions(),
        "torch_cuda": torch.version.cuda,
        "stable_flash_registered": registered(),
        "cpu": CPU_PATH,
        "gpus": gpu_paths(),
        "settings": settings(),
    }


def format_report(data: dict) -> str:
    """``report()`` as the Markdown list a bug report can paste."""
    lines = [f"- hf-stable-attn: {data['hf_stable_attn']}", f"- Python: {data['python']}",
             f"- Platform: {data['platform']}"]
    for name, version in data["libraries"].items():
        lines.append(f"- {name}: {version or 'not installed'}")
    lines.append(f"- torch's CUDA build: {data['torch_cuda'] or 'none'}")
    lines.append(f"- stable_flash registered with Transformers: "
                 f"{'yes' if data['stable_flash_registered'] else 'no'}")
    lines.append(f"- CPU tensors: {data['cpu']}")
    if not data["gpus"]:
        lines.append("- GPUs: none visible")
    for gpu in data["gpus"]:
        lines.append(f"- GPU {gpu['index']}: {gpu['name']} (capability {gpu['capability']}, "
                     f"{gpu['memory_gib']} GiB): bf16/fp16 on {gpu['bf16_fp16']}, fp32 on "
                     f"{gpu['fp32']}; Gluon Hopper forward {gpu['hopper_forward']}")
    shown = ", ".join(f"{k}={v}" for k, v in data["settings"].items())
    lines.append(f"- Settings: {shown or 'none set'}")
    return "\n".join(lines)


def run(args) -> int:
    data = report()
    print(json.dumps(data, indent=1) if args.json else format_report(data))
    return 0


def add_subparser(subparsers) -> None:
    parser = subparsers.add_parser(
        "env", help="versions, devices and attention paths, for a bug report")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)
