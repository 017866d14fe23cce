"""A stand-in for a Triton or Gluon JIT function, for CPU tests of the launchers (no GPU)."""

from __future__ import annotations


class KernelStandIn:
    """``kernel[grid](*args, **kwargs)`` keeps the last launch's grid, arguments and keywords."""

    params: list = []

    def __init__(self):
        self.grid = self.args = self.kwargs = None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.grid, self.args, self.kwargs = grid, args, kwargs
        return launch
