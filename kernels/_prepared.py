"""Launches prepared once per call signature, so that repeated calls skip the launchers' Python.

A training step calls every layer's attention with the same shapes and options, and a small
model's step waits on the host: GPT-2's forward issued its kernels about as fast as the GPU ran
them, with our attention calls a fifth of that host time (docs/kernel_notes.md, session 38).
The first call with a signature (``signature``: shapes, strides, dtypes, 16-byte alignment,
device and every option) takes the launcher's full path, which picks the route and the tile
config and compiles; the launcher then keeps a plan: its compiled kernels with their grids and
every argument but the tensors and the dropout seed (``Prepared``). Later calls with that
signature allocate the outputs and launch the plan.

A plan holds the decisions of its first call, so code that changes the kernels' tables, routes or
switches at run time (the tuning and route-check scripts, tests) calls ``clear_plans`` after the
change. ``HF_STABLE_ATTN_PREPARED=0`` turns plans off.
"""

from __future__ import annotations

import os

import torch

from . import _common

ENABLED = os.environ.get("HF_STABLE_ATTN_PREPARED", "1") != "0"
MAX_PLANS = 256  # distinct signatures kept; past that the store starts again

_PLANS: dict = {}


def active() -> bool:
    """Whether plans are made and used: on, and not under the interpreter."""
    return ENABLED and not _common.INTERPRET


def clear_plans() -> None:
    """Forget every plan (after a change of the kernels' tables, routes or switches)."""
    _PLANS.clear()


def lookup(signature: tuple):
    """The plan kept for ``signature``, or None."""
    return _PLANS.get(signature)


def keep(signature: tuple, plan) -> None:
    """Keep ``plan`` for ``signature``."""
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[signature] = plan


def layout(*tensors: torch.Tensor) -> tuple:
    """What a plan depends on of each tensor: shape, strides, dtype and 16-byte alignment."""
    return tuple((t.shape, t.stride(), t.dtype, t.data_ptr() % 16 == 0) for t in tensors)


def seed_width(seed: int) -> bool:
    """Whether ``seed`` fits 32 bits: Triton passes it as i32 or i64 accordingly."""
    return -0x80000000 <= seed <= 0x7FFFFFFF


class Prepared:
    """One ``TiledLaunch`` launch fixed but for its first ``tensors`` arguments and the dropout
    seed (argument ``seed_at``): ``prepared(tensors, seed)`` launches the same compiled kernel
    on the same grid, a TMA config's descriptors made from the tensors at ``slots``
    (``TiledLaunch.descriptor_slots``). Its config becomes the launcher's ``last``, as a full
    launch's does."""

    __slots__ = ("launch", "config", "runner", "before", "after", "constexprs", "slots")

    def __init__(self, launch, runner, constexprs, args, tensors: int, seed_at: int,
                 slots: tuple):
        self.launch, self.config, self.runner = launch, launch.last, runner
        self.before, self.after = args[tensors:seed_at], args[seed_at + 1:]
        self.constexprs = constexprs
        self.slots = slots

    def __call__(self, tensors: tuple, seed: int) -> None:
        self.launch.last = self.config
        tensors = _common.with_descriptors(tensors, self.slots)
        self.runner(*tensors, *self.before, seed, *self.after, *self.constexprs)


def prepare(launch, compiled, grid, args, flags, tensors: int, seed_at: int) -> Prepared | None:
    """The launch ``launch`` (a ``TiledLaunch``) just made with these arguments, which ran
    ``compiled`` (its return value), as a ``Prepared``; None where there is no compiled kernel
    to keep (the interpreter)."""
    if compiled is None:
        return None
    named = {**flags, **_common.tile_meta(launch.last)}
    slots = launch.descriptor_slots(named)  # among the tensors, made per call
    return Prepared(launch, *launch.bound(compiled, grid, named), args, tensors, seed_at, slots)
