"""Worker for tests/test_monitor_distributed.py: ``StabilityMonitor`` under DDP and FSDP on CPU (gloo).

Run as ``python -m torch.distributed.run --standalone --nproc_per_node 2 <this file> OUT PARTS``
(PARTS: comma-separated ``ddp``, ``fsdp2``, ``fsdp1``). Every rank trains a tiny GPT-2 for a few
optimizer steps with ``monitor.observe(step)`` / ``monitor.step(model, loss, step)`` and writes
into OUT, for the test to check in a single process:

- ``<part>_monitor_rank<r>.jsonl``: the monitor's log, one path per rank (only rank 0 may write);
- ``<part>_weights_rank<r>_step<s>.pt``: the rank's own parameters at measured step ``s``
  (DDP: full tensors; FSDP2: each rank's dim-0 shard, ``to_local()``; FSDP1: the full state dict
  gathered by rank 0 only), for the test to rebuild the unsharded weights without the monitor;
- ``<part>_info_rank<r>.json``: how the parameters were laid out (sharded or not).
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import hf_stable_attn  # noqa: E402,F401  (registers attn_implementation="stable_flash")
from hf_stable_attn.monitor import StabilityMonitor  # noqa: E402

STEPS = 3
POWER_ITERS = 30


def tiny_gpt2(seed: int = 0):
    """The tiny GPT-2 of tests/test_monitor.py (2 layers, 4 heads of 16, vocab 64)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=64, n_positions=64,
                     bos_token_id=0, eos_token_id=0, attn_implementation="stable_flash")
    return GPT2LMHeadModel(cfg)


def make_monitor(log_file) -> StabilityMonitor:
    """The monitor settings shared by the workers and the single-process replay of the test."""
    return StabilityMonitor(every_n_steps=1, log_file=log_file, power_iters=POWER_ITERS,
                            sample_rows=8)


def _train(model, part: str, out: Path, rank: int, save) -> None:
    """STEPS optimizer steps on rank-dependent batches (2, 16), measured at every step."""
    monitor = make_monitor(out / f"{part}_monitor_rank{rank}.jsonl")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(1, STEPS + 1):
        ids = torch.randint(0, 64, (2, 16), generator=gen)
        with monitor.observe(step):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        monitor.step(model, loss, step)
        save(step)


def ddp(out: Path, rank: int) -> None:
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(tiny_gpt2())

    def save(step):
        torch.save({k: v.detach().clone() for k, v in model.module.state_dict().items()},
                   out / f"ddp_weights_rank{rank}_step{step}.pt")

    _train(model, "ddp", out, rank, save)
    _info(out, "ddp", rank, sharded=False)


def fsdp2(out: Path, rank: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = tiny_gpt2()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)

    def save(step):
        torch.save({n: p.detach().to_local().clone() for n, p in model.named_parameters()},
                   out / f"fsdp2_weights_rank{rank}_step{step}.pt")

    _train(model, "fsdp2", out, rank, save)
    w = model.transformer.h[0].attn.c_attn.weight
    _info(out, "fsdp2", rank, sharded=tuple(w.to_local().shape) != tuple(w.shape),
          local_shape=list(w.to_local().shape), full_shape=list(w.shape))


def fsdp1(out: Path, rank: int) -> None:
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    module = tiny_gpt2()
    full_numel = sum(p.numel() for p in module.parameters())
    model = FSDP(module, device_id=torch.device("cpu"), use_orig_params=True)
    cfg = FullStateDictConfig(offload_to_cpu=False, rank0_only=True)

    def save(step):
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            sd = model.state_dict()
        if rank == 0:
            torch.save({k.replace("_fsdp_wrapped_module.", ""): v.clone() for k, v in sd.items()},
                       out / f"fsdp1_weights_rank{rank}_step{step}.pt")

    _train(model, "fsdp1", out, rank, save)
    local = sum(p.numel() for p in model.parameters())  # this rank's views into its flat shard
    _info(out, "fsdp1", rank, sharded=local < full_numel, local_numel=local, full_numel=full_numel)


def _info(out: Path, part: str, rank: int, **info) -> None:
    (out / f"{part}_info_rank{rank}.json").write_text(json.dumps(info))


def main():
    out, parts = Path(sys.argv[1]), sys.argv[2].split(",")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for part in parts:
        {"ddp": ddp, "fsdp2": fsdp2, "fsdp1": fsdp1}[part](out, rank)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
