"""The Triton kernels compile, on the CPU, for NVIDIA GPUs other than Hopper, and at head dim 128
some entry of each table fits such a GPU's shared memory per block: the first that fits is
what the launcher runs there with autotuning off (``TiledLaunch.launch_first_fitting``; the
tuner times only those that fit). No GPU of these kinds was lent, so this is the check that
needs none: a Triton upgrade that stops compiling for them, or a table change that leaves
them without a fitting entry, fails here. TMA entries only from compute capability 9.0, as
``_common.has_tma`` allows. ``benchmarks.shared_memory_fit`` reports every entry and head dim.
"""

from __future__ import annotations

import pytest

from benchmarks.compile_targets import (
    GPUS, SHARED_PER_BLOCK, compile_for, entries_shared, training_constexprs,
)
from hf_stable_attn.kernels import LAUNCHES
from hf_stable_attn.kernels._common import INTERPRET, tile_config

pytestmark = pytest.mark.skipif(INTERPRET, reason="the kernels' GPU code is not traced under "
                                                  "TRITON_INTERPRET=1")


def first_fitting(part: str, head_dim: int, capability: int):
    """``(config, shared bytes)`` of the first entry of ``part``'s table at ``head_dim`` whose
    kernel compiled for ``capability`` fits its shared memory per block, or None."""
    return next(((config, shared) for config, shared in entries_shared(capability, part, head_dim)
                 if shared <= SHARED_PER_BLOCK[capability]), None)


@pytest.mark.parametrize("part", sorted(LAUNCHES))
@pytest.mark.parametrize("capability", [80, 89, 100, 120],
                         ids=[f"sm{c}-{GPUS[c].split(',')[0]}" for c in (80, 89, 100, 120)])
def test_a_head_dim_128_entry_compiles_and_fits(capability, part):
    assert first_fitting(part, 128, capability) is not None


def test_the_fit_report_names_the_first_fitting_entry_or_none(monkeypatch, tmp_path):
    """``benchmarks.shared_memory_fit`` on one pointer entry per table at head dim 64, for sm_80
    with a shared memory limit just below the largest entry's: that part has no fit."""
    import json

    from benchmarks import compile_targets, shared_memory_fit

    entries = {part: next(c for c in map(tile_config, launch.table[64]) if not c[4])
               for part, launch in LAUNCHES.items()}
    for part, launch in LAUNCHES.items():
        monkeypatch.setitem(launch.table, 64, [entries[part]])
    shared = {part: compile_for(LAUNCHES[part].kernel_for(64), training_constexprs(
        part, 64, config), config[2], config[3], capability=80).metadata.shared
        for part, config in entries.items()}
    limit = max(shared.values()) - 1
    monkeypatch.setitem(compile_targets.SHARED_PER_BLOCK, 80, limit)
    out = tmp_path / "fit.json"
    shared_memory_fit.main(["--capabilities", "80", "--head-dims", "64", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["first_fitting"] == {
        f"sm80 {part} d64": None if shared[part] > limit else list(entries[part])
        for part in LAUNCHES}
    assert None in report["first_fitting"].values()
    assert [r["shared"] for r in report["records"]] == [shared[p] for p in LAUNCHES]
