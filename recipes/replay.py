"""Deterministic batch order: record the exact sequence of batches of a run, replay it in another.

The paper (Section 3.1) replays the batches of a failing run so that runs differing only in the
attention see identical data in the same order. `BatchOrder` is the training sampler that makes
this possible with Trainer and Accelerate:

- An epoch is a whole number of *global* batches (`global_batch = per_device_batch * processes *
  gradient_accumulation`), so every optimizer step sees a full global batch; the order is a
  stream of seeded permutations of the samples, a fresh one per epoch (`seed`, `epoch`).
- Accelerate hands each process consecutive micro-batches of the stream, so optimizer step `s`
  consumes samples `order[s * global_batch : (s + 1) * global_batch]` on any number of GPUs:
  a recording made on one GPU replays on four at the same global batch, and the reverse.
- `record=FILE` writes, at the start of each epoch, the epoch's global batches (lists of sample
  indices) to FILE (JSON); `replay=FILE` yields exactly those batches instead of its own.

File format: {"format": "hf-stable-attn/batch-order", "version": 1, "num_samples", "global_batch",
"dataset": fingerprint, "seed", "epochs": {"0": [[i, ...] * steps_per_epoch], ...}}.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

FORMAT = "hf-stable-attn/batch-order"


class BatchOrder(torch.utils.data.Sampler[int]):
    """Sample indices, one global batch after another, generated (and recorded) or replayed."""

    def __init__(
        self,
        num_samples: int,
        global_batch: int,
        *,
        seed: int = 0,
        dataset: str = "",
        record: str | None = None,
        replay: str | None = None,
        is_main_process: bool = True,
    ):
        if record and replay:
            raise ValueError("record and replay are exclusive")
        self.num_samples, self.global_batch, self.seed, self.dataset = num_samples, global_batch, seed, dataset
        self.steps_per_epoch = max(1, num_samples // global_batch)
        self.record = record if is_main_process else None
        self.epoch = 0
        self.recorded = self._load(replay) if replay else None
        if self.record:  # keep the epochs of a resumed recording, start afresh otherwise
            old = json.loads(Path(self.record).read_text()) if Path(self.record).is_file() else {}
            self._write(old.get("epochs", {}) if {k: old.get(k) for k in self._header()} == self._header() else {})

    def _header(self) -> dict:
        return {
            "format": FORMAT,
            "version": 1,
            "num_samples": self.num_samples,
            "global_batch": self.global_batch,
            "dataset": self.dataset,
            "seed": self.seed,
        }

    def _load(self, path: str) -> dict[str, list[list[int]]]:
        data = json.loads(Path(path).read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a batch-order file (format {data.get('format')!r})")
        for key in ("num_samples", "global_batch", "dataset"):
            if data[key] != self._header()[key]:
                raise ValueError(
                    f"{path} was recorded with {key}={data[key]!r}, this run has {self._header()[key]!r}: "
                    "replay needs the same data, block size and global batch (per-device batch x processes x "
                    "gradient accumulation)"
                )
        return data["epochs"]

    def _write(self, epochs: dict[str, list[list[int]]]):
        tmp = f"{self.record}.tmp"
        Path(tmp).write_text(json.dumps({**self._header(), "epochs": epochs}, separators=(",", ":")))
        os.replace(tmp, self.record)

    def set_epoch(self, epoch: int):
        """Trainer calls this before each epoch (also when resuming); without it epochs count up by iteration."""
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """The global batches of `epoch`: `steps_per_epoch` lists of `global_batch` sample indices."""
        if self.recorded is not None:
            if str(epoch) not in self.recorded:
                raise ValueError(
                    f"the replayed run recorded {len(self.recorded)} epochs; epoch {epoch} was not among them"
                )
            return self.recorded[str(epoch)]
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        length = self.steps_per_epoch * self.global_batch
        perms = [torch.randperm(self.num_samples, generator=g) for _ in range(-(-length // self.num_samples))]
        return torch.cat(perms)[:length].view(self.steps_per_epoch, self.global_batch).tolist()

    def __len__(self) -> int:
        return self.steps_per_epoch * self.global_batch

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        batches = self.batches(epoch)
        if self.record:
            epochs = json.loads(Path(self.record).read_text())["epochs"]
            epochs[str(epoch)] = batches
            self._write(epochs)
        return (i for batch in batches for i in batch)
