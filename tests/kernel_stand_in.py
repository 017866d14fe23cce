"""A stand-in for a Triton or Gluon JIT function, for CPU tests of the launchers (no GPU)."""

from __future__ import annotations


class KernelStandIn:
    """``kernel[grid](*args, **kwargs)`` keeps the last launch's grid, arguments and keywords;
    ``arg_names``: the stood-in kernel's parameters, for ``arg``."""

    params: list = []

    def __init__(self, arg_names: list[str] | None = None):
        self.grid = self.args = self.kwargs = None
        self.arg_names = arg_names or []

    def arg(self, name: str):
        """The last launch's positional argument for the kernel's parameter ``name``."""
        return self.args[self.arg_names.index(name)]

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.grid, self.args, self.kwargs = grid, args, kwargs
        return launch
