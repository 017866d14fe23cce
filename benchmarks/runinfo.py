"""What a results file says about its run: the device, the software versions, the date.

Every benchmark writes one JSON file ``{header..., "records": [flat dicts]}``; this module builds
the header and writes the file (atomically, so a crash mid-run leaves the last complete state).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
from pathlib import Path

import torch


def device_name(device: torch.device) -> str:
    """The accelerator's marketing name (``"NVIDIA H100 80GB HBM3"``) or ``"cpu"``."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def device_slug(name: str) -> str:
    """A file-name-safe short form: ``"NVIDIA H100 80GB HBM3"`` -> ``"h100-80gb-hbm3"``."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def _git_commit() -> str | None:
    """The repository's commit (None where the tree is a copy without .git), or $GIT_COMMIT."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0:
        return out.stdout.strip()
    return os.environ.get("GIT_COMMIT")


def header(benchmark: str, device: torch.device, config: dict) -> dict:
    """The top-level fields of a results file (everything but ``records``)."""
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "transformers": _version("transformers"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "hf_stable_attn_commit": _git_commit(),
    }
    return {
        "benchmark": benchmark,
        "gpu": device_name(device),
        "device": str(device),
        "versions": versions,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "config": config,
    }


def results_path(out_dir: str | Path, head: dict) -> Path:
    """``<out_dir>/<gpu>-<YYYYmmdd-HHMM>-<benchmark>.json`` (UTC), named from a header."""
    stamp = datetime.datetime.fromisoformat(head["date"]).strftime("%Y%m%d-%H%M")
    return Path(out_dir) / f"{device_slug(head['gpu'])}-{stamp}-{head['benchmark']}.json"


def write_results(path: Path, head: dict, records: list[dict], **extra) -> None:
    """Write ``{**head, **extra, "records": records}`` to ``path`` via a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**head, **extra, "records": records}, indent=1) + "\n")
    os.replace(tmp, path)
