"""The launch cache of the Triton launchers (CPU: stand-ins for the kernel and the autotuner)."""

import triton

from hf_stable_attn.kernels._common import AutotunedLaunch


class _Kernel:
    """Records launches like ``kernel[grid](*args, **kwargs)``."""

    def __init__(self, best=None):
        self.launches, self.best_config = [], best

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


def test_first_call_per_key_autotunes_then_the_chosen_config_is_launched_directly():
    chosen = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)
    kernel, tuned = _Kernel(), _Kernel(best=chosen)
    launch = AutotunedLaunch(kernel, tuned)
    launch("g", ("key", 1), (1, 2), {"FLAG": True})
    assert len(tuned.launches) == 1 and not kernel.launches
    launch("g", ("key", 1), (3, 4), {"FLAG": True})
    assert len(tuned.launches) == 1
    grid, args, kwargs = kernel.launches[0]
    assert args == (3, 4) and kwargs["FLAG"] is True
    assert (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["num_warps"], kwargs["num_stages"]) == (64, 32, 4, 2)
    launch("g", ("other key", 1), (5, 6), {"FLAG": False})
    assert len(tuned.launches) == 2
