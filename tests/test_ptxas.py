"""Which ptxas builds our kernels (kernels/_ptxas.py), with stand-in ptxas executables."""

import os
import stat

import pytest
import torch
import triton

from hf_stable_attn.kernels import _common, _ptxas, _tuning, flash_bwd, flash_fwd
from hf_stable_attn.kernels._common import TiledLaunch, tile_config

# The variable that chooses the ptxas Triton builds sm_90 with, for the two rules Triton has had:
# ``ptxas`` up to 3.8, ``ptxas-blackwell`` from 3.9.
ENVS = {False: "TRITON_PTXAS_PATH", True: "TRITON_PTXAS_BLACKWELL_PATH"}


def _fake_ptxas(folder, release):
    """An executable that answers ``--version`` like the ptxas of CUDA ``release``."""
    path = folder / f"ptxas-{release}"
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(params=[False, True], ids=["sm90-ptxas", "sm90-ptxas-blackwell"])
def env(request, monkeypatch):
    """Each test runs under both of Triton's rules for the ptxas that builds sm_90; this is the
    variable that chooses it under the rule in force."""
    tool = "ptxas-blackwell" if request.param else "ptxas"
    monkeypatch.setattr(_ptxas, "sm90_ptxas", lambda: tool)
    for name in ENVS.values():
        monkeypatch.delenv(name, raising=False)
    return ENVS[request.param]


@pytest.fixture
def ptxas_pair(tmp_path, monkeypatch, env):
    """Points Triton's and torch's ptxas at stand-ins of the given releases (None: absent)."""

    def install(triton_release, torch_release):
        bundled = _fake_ptxas(tmp_path, triton_release)
        ours = _fake_ptxas(tmp_path, torch_release) if torch_release else str(tmp_path / "none")
        monkeypatch.setattr(_ptxas, "triton_ptxas", lambda: bundled)
        monkeypatch.setattr(_ptxas, "torch_ptxas", lambda: ours)
        _ptxas.newer_torch_ptxas.cache_clear()
        return bundled, ours

    yield install
    _ptxas.newer_torch_ptxas.cache_clear()


def test_the_installed_triton_says_which_ptxas_builds_sm90():
    """Triton 3.9 builds sm_90 with ``ptxas-blackwell``; 3.6-3.8 with ``ptxas`` (their
    ``get_ptxas``). The module must read that off the installed Triton, whichever it is."""
    _ptxas.sm90_ptxas.cache_clear()
    version = tuple(int(part) for part in triton.__version__.split(".")[:2])
    expected = version >= (3, 9)
    assert _ptxas.sm90_ptxas() == ("ptxas-blackwell" if expected else "ptxas")
    assert _ptxas.ptxas_env() == ENVS[expected]
    assert os.path.basename(_ptxas.triton_ptxas()) == ("ptxas-blackwell" if expected else "ptxas")


def test_release_reads_the_version_line(tmp_path):
    assert _ptxas.release(_fake_ptxas(tmp_path, "13.0")) == (13, 0)
    assert _ptxas.release(str(tmp_path / "missing")) is None


def test_a_newer_torch_ptxas_builds_our_kernels_only_while_they_compile(ptxas_pair, env):
    _, ours = ptxas_pair("12.8", "13.0")
    assert _ptxas.compiling_ptxas() == ours and _ptxas.two_stage_tma_ok()
    with _ptxas.ptxas_for_compile():
        assert os.environ[env] == ours
        assert [name for name in ENVS.values() if name in os.environ] == [env]
    assert env not in os.environ


def test_the_environment_is_restored_when_compiling_fails(ptxas_pair, env):
    ptxas_pair("12.8", "13.0")
    with pytest.raises(RuntimeError), _ptxas.ptxas_for_compile():
        raise RuntimeError("ptxas crashed")
    assert env not in os.environ


def test_overlapping_compiles_in_two_threads_keep_the_newer_ptxas_until_both_are_done(ptxas_pair,
                                                                                      env):
    """Thread A enters, thread B enters, A leaves while B still compiles: B must still see
    torch's ptxas, or its PTX for CUDA 13 would go to Triton's ptxas 12.8."""
    import threading

    _, ours = ptxas_pair("12.8", "13.0")
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with _ptxas.ptxas_for_compile():
            a_inside.set()
            b_inside.wait(5)
        a_left.set()

    def thread_b():
        a_inside.wait(5)
        with _ptxas.ptxas_for_compile():
            seen["entering"] = os.environ.get(env)
            b_inside.set()
            a_left.wait(5)
            seen["after_a_left"] = os.environ.get(env)

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"entering": ours, "after_a_left": ours}
    assert env not in os.environ


@pytest.mark.parametrize("torch_release", [None, "12.8", "12.6"])
def test_tritons_own_ptxas_stays_when_torch_has_none_newer(ptxas_pair, env, torch_release):
    bundled, _ = ptxas_pair("12.8", torch_release)
    assert _ptxas.compiling_ptxas() == bundled and not _ptxas.two_stage_tma_ok()
    with _ptxas.ptxas_for_compile():
        assert env not in os.environ


def test_the_users_ptxas_is_left_alone(ptxas_pair, env, tmp_path, monkeypatch):
    ptxas_pair("12.8", "13.0")
    chosen = _fake_ptxas(tmp_path, "12.9")
    monkeypatch.setenv(env, chosen)
    with _ptxas.ptxas_for_compile():
        assert os.environ[env] == chosen
    assert os.environ[env] == chosen
    assert _ptxas.compiling_ptxas() == chosen and not _ptxas.two_stage_tma_ok()


@pytest.mark.parametrize("two_stage_ok", [True, False])
def test_tuning_tries_2_stage_tma_configs_only_where_the_ptxas_builds_them(monkeypatch,
                                                                          two_stage_ok):
    monkeypatch.setattr(_tuning, "two_stage_tma_ok", lambda: two_stage_ok)
    entries = [tile_config(c) for c in [(64, 128, 4, 3, True), (64, 64, 4, 2, True), (64, 64, 4, 2)]]
    kept = sorted((c[3], c[4]) for c in _tuning.candidates(entries, tma_ok=True))
    assert kept == ([(2, False), (2, True), (3, True)] if two_stage_ok else [(2, False), (3, True)])


class _RecordingKernel:
    """``kernel[grid](...)`` that records the ptxas Triton would compile with at that moment
    (the value of ``env``)."""

    def __init__(self, env):
        self.env, self.params, self.seen = env, [], []
        self.cache_key, self.__name__ = "stand-in source", "stand_in"

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.seen.append(os.environ.get(self.env))
            return {(1, 1, 1): lambda *a: None}  # the compiled kernel: compiled[grid](*args)

        return launch


@pytest.mark.parametrize("table", [{64: [(64, 64, 4, 3)]}, {64: [(64, 64, 4, 3), (128, 64, 8, 3)]}],
                         ids=["one-config", "tuned"])
@pytest.mark.parametrize("autotune", [True, False])
def test_the_launchers_first_calls_compile_under_the_newer_ptxas(ptxas_pair, env, monkeypatch,
                                                                   autotune, table):
    _, ours = ptxas_pair("12.8", "13.0")
    monkeypatch.setattr(_common, "AUTOTUNE", autotune)
    monkeypatch.setattr(_common, "AUTOTUNE_CACHE", False)
    monkeypatch.setattr(_common, "INTERPRET", False)
    monkeypatch.setattr(_tuning, "bench_median", lambda fn: 1.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "stand-in GPU")
    kernel = _RecordingKernel(env)
    TiledLaunch(kernel, table)(lambda meta: (1,), 64, ("key",), (torch.zeros(4),), {})
    # one compile per config the call tries: each candidate when tuning, else the first entry
    assert kernel.seen == [ours] * (len(table[64]) if autotune else 1)
    assert env not in os.environ


@pytest.mark.parametrize("table", [flash_fwd._FWD_CONFIGS, flash_bwd._DKDV_CONFIGS,
                                   flash_bwd._DQ_CONFIGS])
def test_no_table_launches_a_2_stage_tma_config_without_autotuning(table):
    # Without autotuning the first entry runs (its first pointer entry without TMA), and no
    # ptxas check guards it: it must build with every ptxas.
    for entries in table.values():
        first = tile_config(entries[0])
        assert not (first[4] and first[3] < 3), entries
