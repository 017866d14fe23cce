"""What a results file says about its run: the device, the software versions, the code, the date.

Every benchmark writes one JSON file ``{header..., "records": [flat dicts]}``; this module builds
the header and writes the file (atomically, so a crash mid-run leaves the last complete state).

``python -m benchmarks.runinfo [REV ...] [--find DIGEST]`` prints the source digest of the tree
(or of each revision), or the commits whose code has ``DIGEST``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("hf_stable_attn", "kernels")  # the code a benchmark runs


def device_name(device: torch.device) -> str:
    """The accelerator's marketing name (``"NVIDIA H100 80GB HBM3"``) or ``"cpu"``."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def device_slug(name: str) -> str:
    """A file-name-safe short form: ``"NVIDIA H100 80GB HBM3"`` -> ``"h100-80gb-hbm3"``."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


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


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def _blob_id(data: bytes) -> str:
    """Git's id of a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def source_digest(root: Path = REPO, rev: str | None = None) -> str:
    """12 hex digits naming the code that runs: sha256 over every ``.py`` file under
    ``SOURCE_DIRS``, by path and git blob id, of the tree at ``root`` or (``rev``) of that
    revision of its repository. Read from the files themselves, it names the code where a
    copy's ``.git`` lags its files (the GPU machine's copies)."""
    if rev is None:
        blobs = {p.relative_to(root).as_posix(): _blob_id(p.read_bytes())
                 for d in SOURCE_DIRS for p in (root / d).rglob("*.py")}
    else:
        blobs = {}
        for line in _git(root, "ls-tree", "-r", rev, "--", *SOURCE_DIRS).splitlines():
            meta, path = line.split("\t", 1)
            if path.endswith(".py"):
                blobs[path] = meta.split()[2]
    h = hashlib.sha256("".join(f"{p}\0{b}\n" for p, b in sorted(blobs.items())).encode())
    return h.hexdigest()[:12]


def commits_with_digest(digest: str, root: Path = REPO, count: int = 500) -> list[str]:
    """The last ``count`` commits of every branch whose code has ``source_digest`` ``digest``."""
    revs = _git(root, "rev-list", "--all", f"--max-count={count}").split()
    return [rev[:12] for rev in revs if source_digest(root, rev) == digest]


def header(benchmark: str, device: torch.device, config: dict) -> dict:
    """The top-level fields of a results file (everything but ``records``)."""
    from hf_stable_attn.environment import module_version  # the benchmarks have it imported

    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": module_version("triton"),
        "transformers": module_version("transformers"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "hf_stable_attn_commit": _git_commit(),
        "hf_stable_attn_source": source_digest(),
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


def main() -> None:
    ap = argparse.ArgumentParser(description="source digests of the code (see source_digest)")
    ap.add_argument("revs", nargs="*", help="revisions (default: the working tree)")
    ap.add_argument("--find", metavar="DIGEST", help="print the commits whose code has DIGEST")
    args = ap.parse_args()
    if args.find:
        print("\n".join(commits_with_digest(args.find)) or f"no commit has {args.find}")
        return
    for rev in args.revs or [None]:
        print(f"{rev or 'working tree'}: {source_digest(rev=rev)}")


if __name__ == "__main__":
    main()
