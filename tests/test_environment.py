"""``hf-stable-attn env``: the report a bug report pastes (CPU; the GPU entries through their
helpers)."""

import json
from types import SimpleNamespace

import pytest
import torch
import transformers

from hf_stable_attn import environment
from hf_stable_attn.cli import main


def test_env_json_reports_what_runs(capsys, monkeypatch):
    monkeypatch.setenv("HF_STABLE_ATTN_GLUON", "0")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["libraries"]["torch"] == torch.__version__
    assert data["libraries"]["transformers"] == transformers.__version__
    assert data["torch_cuda"] == torch.version.cuda
    assert data["stable_flash_registered"] is True
    assert data["settings"]["HF_STABLE_ATTN_GLUON"] == "0"
    assert data["settings"]["TRITON_INTERPRET"] == "1"
    assert "UNRELATED_SETTING" not in data["settings"]
    assert len(data["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_env_text_lists_each_library_and_the_cpu_path(capsys):
    assert main(["env"]) == 0
    text = capsys.readouterr().out
    for name in environment.LIBRARIES:
        assert f"- {name}: " in text
    assert f"- CPU tensors: {environment.CPU_PATH}" in text
    assert "- stable_flash registered with Transformers: yes" in text


def test_missing_library_reads_not_installed(monkeypatch):
    real_import = environment.importlib.import_module

    def without_peft(name):
        if name == "peft":
            raise ImportError("no peft here")
        return real_import(name)

    monkeypatch.setattr(environment.importlib, "import_module", without_peft)
    versions = environment.library_versions()
    assert versions["peft"] is None and versions["torch"] == torch.__version__
    data = environment.report()
    assert "- peft: not installed" in environment.format_report(data)


def test_gpu_lines_name_the_hopper_forward_state():
    data = environment.report()
    data["gpus"] = [{"index": 0, "name": "NVIDIA H200", "capability": "9.0", "memory_gib": 139.8,
                     "bf16_fp16": "the Triton kernels", "fp32": "the PyTorch reference path",
                     "hopper_forward": "on"}]
    text = environment.format_report(data)
    assert "- GPU 0: NVIDIA H200 (capability 9.0, 139.8 GiB)" in text
    assert "Gluon Hopper forward on" in text and "GPUs: none visible" not in text


@pytest.mark.parametrize("enabled", [True, False])
def test_hopper_forward_state_follows_the_switch_and_capability(monkeypatch, enabled):
    pytest.importorskip("triton")
    from hf_stable_attn.kernels import flash_fwd_hopper

    monkeypatch.setattr(flash_fwd_hopper, "ENABLED", enabled)
    state = environment.hopper_forward_state((9, 0))
    assert state.startswith("on") if enabled else state.startswith("off (HF_STABLE_ATTN_GLUON=0)")
    assert environment.hopper_forward_state((8, 0)).startswith("not used")
    assert environment.hopper_forward_state((10, 0)).startswith("not used")
    assert environment.hopper_forward_state(None).startswith("not used")  # ROCm, no Triton


def test_rocm_devices_are_not_taken_for_hopper(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setattr(torch.version, "hip", "6.4")  # AMD numbers gfx90a as capability 9.0
    assert environment.nvidia_capability(0) is None


def test_gpu_paths_on_a_stand_in_device(monkeypatch):
    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=139.8 * 2**30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(environment, "nvidia_capability", lambda index: (8, 0))
    (gpu,) = environment.gpu_paths()
    assert gpu["name"] == "NVIDIA H200" and gpu["capability"] == "9.0"
    assert gpu["memory_gib"] == 139.8
    assert gpu["bf16_fp16"] == "the Triton kernels"
    assert gpu["fp32"] == "the PyTorch reference path (logged)"
    assert gpu["hopper_forward"].startswith("not used")


def test_cuda_paths_follow_the_dispatch_rule(monkeypatch):
    from hf_stable_attn import ops

    assert environment.cuda_path(torch.bfloat16, torch.float16) == "the Triton kernels"
    assert environment.cuda_path(torch.float32) == "the PyTorch reference path (logged)"
    monkeypatch.setattr(ops, "KERNEL_DTYPES", (torch.bfloat16,))
    assert environment.cuda_path(torch.float16) == "the PyTorch reference path (logged)"
    with pytest.raises(ValueError):  # one line cannot name two paths
        environment.cuda_path(torch.bfloat16, torch.float16)
