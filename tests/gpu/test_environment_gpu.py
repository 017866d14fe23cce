"""``hf-stable-attn env`` on a GPU machine (``pytest -m gpu``): one entry per visible device,
named as torch names it, and on Hopper the Gluon forward's state as its switch sets it."""

import pytest
import torch

from hf_stable_attn import environment

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_env_lists_every_visible_gpu_with_its_path():
    from hf_stable_attn.kernels import flash_fwd_hopper

    gpus = environment.report()["gpus"]
    assert [g["index"] for g in gpus] == list(range(torch.cuda.device_count()))
    for gpu in gpus:
        assert gpu["name"] == torch.cuda.get_device_name(gpu["index"])
        major, minor = torch.cuda.get_device_capability(gpu["index"])
        assert gpu["capability"] == f"{major}.{minor}"
        hopper_on = (major, minor) == (9, 0) and flash_fwd_hopper.ENABLED
        assert gpu["hopper_forward"].startswith("on") == hopper_on
    text = environment.format_report(environment.report())
    assert "- GPU 0: " in text and "GPUs: none visible" not in text
