"""User-facing options of the fix, and where the active ones come from.

Three places set them, most specific first:
1. keyword arguments of ``flash_attn_func`` / ``flash_attn_varlen_func``;
2. per model: ``hf_stable_attn.configure(model, beta=4.0)`` stores them in ``model.config``
   (key ``stable_flash``, saved with the config); the registered attention function makes a
   model's options active while its attention runs;
3. process defaults: ``hf_stable_attn.set_default_options(...)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .shift_rule import DEFAULT_BETA

CONFIG_KEY = "stable_flash"
BACKENDS = ("auto", "triton", "reference")


@dataclass(frozen=True)
class StableAttnOptions:
    """Options of the stabilized attention.

    stabilize: apply the repeated-maximum fix (False: plain FlashAttention-2 numerics).
    beta: multiplier of a positive repeated row maximum, > 1 (the paper uses 2..8).
    tie_tolerance: score distance that counts as a tie; None derives it from the dtype
        (1.955e-3 for bf16, 2.44e-4 for fp16: where exp() rounds to 1.0).
    backend: "auto" (CUDA -> Triton kernel, CPU -> reference), "triton" or "reference".
    """

    stabilize: bool = True
    beta: float = DEFAULT_BETA
    tie_tolerance: float | None = None
    backend: str = "auto"

    def __post_init__(self):
        if not isinstance(self.stabilize, bool):  # a string such as "false" would read as on
            raise TypeError(f"stabilize must be True or False, got {self.stabilize!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not self.beta > 1.0:
            raise ValueError(f"beta must be > 1 (the paper uses 2..8), got {self.beta}")

    def updated(self, **changes) -> "StableAttnOptions":
        """A copy with the non-None ``changes`` applied (``self`` when there are none)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **changes) if changes else self


# Process defaults and the options of the model whose attention is running. A module-level
# dict, not class attributes: torch.compile (fullgraph) traces item assignment on a global
# dict, but not setattr on a class (torch 2.11).
_STATE: dict[str, StableAttnOptions | None] = {"default": StableAttnOptions(), "active": None}


def set_default_options(**changes) -> StableAttnOptions:
    """Change the process-wide defaults (e.g. ``set_default_options(backend="reference")``)."""
    _STATE["default"] = _STATE["default"].updated(**changes)
    return _STATE["default"]


def current_options() -> StableAttnOptions:
    """The options in force: the running model's, else the process defaults."""
    active = _STATE["active"]
    return active if active is not None else _STATE["default"]


def options_from_config(config) -> StableAttnOptions:
    """Options stored on a transformers config by ``configure`` (defaults if none)."""
    stored = getattr(config, CONFIG_KEY, None)
    if not stored:
        return _STATE["default"]
    return _STATE["default"].updated(**stored)


def configure(model, **changes) -> StableAttnOptions:
    """Set the fix's options for one model (and its sub-models' configs).

    Example: ``configure(model, stabilize=False)`` for an A/B run, ``configure(model, beta=4.0)``.
    The options are stored in ``model.config.stable_flash`` and saved with the model.
    """
    unknown = set(changes) - {f.name for f in dataclasses.fields(StableAttnOptions)}
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; valid: stabilize, beta, tie_tolerance, backend")
    options = options_from_config(model.config).updated(**changes)
    stored = dataclasses.asdict(options)
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None:
            setattr(config, CONFIG_KEY, stored)
            for sub in ("text_config", "vision_config", "audio_config"):
                sub_config = getattr(config, sub, None)
                if sub_config is not None:
                    setattr(sub_config, CONFIG_KEY, stored)
    return options
