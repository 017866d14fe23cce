"""YAML configs with Trainer-style command-line overrides.

A recipe's configuration is a few dataclasses (one of them transformers' `TrainingArguments`)
parsed by `HfArgumentParser`. A YAML file (`--config FILE`) holds flat `key: value` pairs, one per
dataclass field; every field can be overridden on the command line (`--max_steps 3`), and the
command line wins. Every mistake (unknown key, wrong type, value out of range) raises `ConfigError`
with a message that names the file and the key.

    (run_args, data_args, training_args) = parse_config(
        (RunArguments, DataArguments, TrainingArguments), ["--config", "gpt2_tiny_cpu.yaml", "--max_steps", "3"])
"""

from __future__ import annotations

import argparse
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from transformers import HfArgumentParser

ATTENTIONS = ("stable_flash", "sdpa", "flash_attention_2", "flex_attention", "eager")


class ConfigError(ValueError):
    """A config file or command line that cannot be run, with the reason."""


@dataclass
class RunArguments:
    """Attention, the fix's options, and run-level switches shared by the recipes."""

    attn: Literal[ATTENTIONS] = field(
        default="stable_flash",
        metadata={"help": "Attention implementation; runs that differ only here isolate the failure and the fix."},
    )
    stabilize: bool = field(default=True, metadata={"help": "stable_flash: apply the shift fix (False = plain FA2)."})
    beta: float = field(default=2.0, metadata={"help": "stable_flash: the fix's beta (paper: 2 to 8)."})
    tie_tolerance: float | None = field(
        default=None, metadata={"help": "stable_flash: relative tolerance for repeated maxima (None = dtype default)."}
    )
    backend: Literal["auto", "triton", "reference"] = field(
        default="auto", metadata={"help": "stable_flash backend: auto = triton on CUDA, reference on CPU."}
    )
    monitor: bool = field(default=False, metadata={"help": "Add hf_stable_attn.monitor.StabilityMonitor."})
    monitor_kwargs: str = field(default="{}", metadata={"help": "JSON dict of StabilityMonitor keyword arguments."})
    max_minutes: float | None = field(
        default=None, metadata={"help": "Stop after this many minutes of training (LR schedule unchanged)."}
    )
    stop_at_step: int | None = field(
        default=None,
        metadata={"help": "Stop (and save) at this optimizer step; unlike max_steps the LR schedule is unchanged."},
    )
    metrics_csv: str | None = field(
        default=None,
        metadata={"help": "Per-log-step CSV (loss, lr, tokens/s, memory); default OUTPUT_DIR/metrics.csv."},
    )

    def __post_init__(self):
        if self.beta <= 0:
            raise ConfigError(f"beta must be > 0, got {self.beta}")
        if self.tie_tolerance is not None and self.tie_tolerance < 0:
            raise ConfigError(f"tie_tolerance must be >= 0, got {self.tie_tolerance}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ConfigError(f"max_minutes must be > 0, got {self.max_minutes}")
        if self.stop_at_step is not None and self.stop_at_step < 1:
            raise ConfigError(f"stop_at_step must be >= 1, got {self.stop_at_step}")
        try:
            kwargs = json.loads(self.monitor_kwargs)
        except json.JSONDecodeError as e:
            raise ConfigError(f"monitor_kwargs is not JSON: {e}") from None
        if not isinstance(kwargs, dict):
            raise ConfigError(f"monitor_kwargs must be a JSON object, got {self.monitor_kwargs!r}")


@dataclass
class DataArguments:
    """Where the text comes from, how it is tokenized, cached and packed, and the batch order."""

    dataset: str = field(
        default="embedded",
        metadata={
            "help": "'embedded' (Shakespeare shipped in recipes/data, no download), local text files "
            "(a file, a directory or a glob), or a datasets hub name such as Skylion007/openwebtext."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset config name."})
    dataset_split: str = field(default="train", metadata={"help": "Hub dataset split."})
    text_column: str = field(default="text", metadata={"help": "Column holding the text (hub datasets)."})
    max_documents: int | None = field(default=None, metadata={"help": "Use only the first N documents."})
    tokenizer: str = field(
        default="auto",
        metadata={
            "help": "'auto' (the model's own if it is available offline, else 'bpe'), 'bpe' (a byte-level BPE "
            "trained offline on the data and cached), or a tokenizer name or path."
        },
    )
    bpe_vocab_size: int = field(default=8192, metadata={"help": "Vocabulary of the offline BPE tokenizer."})
    block_size: int = field(default=1024, metadata={"help": "Context length: documents are packed to it."})
    data_cache_dir: str = field(
        default="~/.cache/hf_stable_attn/recipes", metadata={"help": "Where tokenized data and tokenizers are cached."}
    )
    num_proc: int = field(default=1, metadata={"help": "Processes for tokenizing hub datasets."})
    record_batches: str | None = field(default=None, metadata={"help": "Write the batch order (indices) to FILE."})
    replay_batches: str | None = field(default=None, metadata={"help": "Replay the batch order recorded in FILE."})

    def __post_init__(self):
        if self.block_size < 2:
            raise ConfigError(f"block_size must be >= 2, got {self.block_size}")
        if self.bpe_vocab_size < 259:
            raise ConfigError(f"bpe_vocab_size must be >= 259 (256 bytes + specials), got {self.bpe_vocab_size}")
        if self.max_documents is not None and self.max_documents < 1:
            raise ConfigError(f"max_documents must be >= 1, got {self.max_documents}")
        if self.record_batches and self.replay_batches:
            raise ConfigError("record_batches and replay_batches are exclusive: a replayed run's order is the file")
        if self.replay_batches and not Path(self.replay_batches).is_file():
            raise ConfigError(f"replay_batches: no such file {self.replay_batches}")


# TrainingArguments fields that Transformers renamed within the releases we support: 5.23 made
# gradient_checkpointing(_kwargs) activation_checkpointing(_kwargs) and keeps the old names as
# deprecated aliases until v6. A config key or flag may use either name; it reaches the field
# under the name the installed release has, the new one where both exist.
RENAMED_FIELDS = {
    "gradient_checkpointing": "activation_checkpointing",
    "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs",
}


def _field_name(key: str, dests: set[str]) -> str:
    """``key`` under the name the installed Transformers gives that field (``RENAMED_FIELDS``)."""
    new = RENAMED_FIELDS.get(key)
    if new in dests:
        return new
    old = next((o for o, n in RENAMED_FIELDS.items() if n == key), None)
    if key not in dests and old in dests:
        return old
    return key


def _renamed_flags(tokens: list[str], dests: set[str]) -> list[str]:
    """Command-line ``tokens`` with each ``--key`` or ``--key=value`` flag's key as
    ``_field_name`` gives it."""
    out = []
    for token in tokens:
        if token.startswith("--"):
            key, eq, value = token[2:].partition("=")
            token = f"--{_field_name(key, dests)}{eq}{value}"
        out.append(token)
    return out


class _Parser(HfArgumentParser):
    """HfArgumentParser whose errors raise ConfigError instead of exiting."""

    def error(self, message):
        raise ConfigError(message)


def _yaml_to_argv(key: str, value: Any) -> list[str]:
    """One YAML entry as command-line tokens (`--key value...`)."""
    if isinstance(value, bool):
        return [f"--{key}", "true" if value else "false"]
    if isinstance(value, list):
        return [f"--{key}", *map(str, value)]
    if isinstance(value, dict):
        return [f"--{key}", json.dumps(value)]
    return [f"--{key}", str(value)]


def load_yaml(path: str | Path) -> dict[str, Any]:
    """The flat `key: value` mapping of a config file; raises ConfigError on anything else."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of key: value, got {type(data).__name__}")
    return data


def parse_config(dataclass_types: tuple[type, ...], argv: list[str] | None = None) -> tuple:
    """Parse `--config FILE` plus command-line overrides into instances of `dataclass_types`.

    YAML values that are null keep the field's default. Raises ConfigError naming the bad key.
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, overrides = pre.parse_known_args(argv)
    parser = _Parser(dataclass_types, allow_abbrev=False)
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    parser.add_argument("--config", help="YAML file of `key: value` defaults; command-line flags win")

    file_argv: list[str] = []
    if known.config:
        for key, value in load_yaml(known.config).items():
            key = _field_name(str(key), dests)
            if key not in dests:
                close = difflib.get_close_matches(str(key), dests, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(f"{known.config}: unknown key '{key}'{hint}")
            if value is None:
                continue
            tokens = _yaml_to_argv(key, value)
            try:
                parser.parse_known_args(tokens)
            except ConfigError as e:
                raise ConfigError(f"{known.config}: key '{key}': {e}") from None
            file_argv += tokens

    namespace, unknown = parser.parse_known_args(file_argv + _renamed_flags(overrides, dests))
    if unknown:
        flags = [u for u in unknown if u.startswith("--")]
        hints = [difflib.get_close_matches(f[2:], dests, n=1) for f in flags]
        hint = "".join(f" (did you mean '--{h[0]}'?)" for h in hints if h)
        raise ConfigError(f"unknown arguments {unknown}{hint}")
    outputs = []
    for dtype in dataclass_types:
        names = {f.name for f in dtype.__dataclass_fields__.values() if f.init}
        try:
            outputs.append(dtype(**{k: v for k, v in vars(namespace).items() if k in names}))
        except ConfigError:
            raise
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{dtype.__name__}: {e}") from None
    return tuple(outputs)
