"""``hf-stable-attn bias``: run the numerics lab (and optionally the training experiment).

Examples::

    hf-stable-attn bias --device cpu --quick              # reference path, under a minute
    hf-stable-attn bias --device cuda --out results/       # full run: JSON, markdown, PNG
    hf-stable-attn bias --device cuda --train --out results/   # the training experiment instead
    python -m hf_stable_attn.numerics.cli bias --quick     # without the package's entry point
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Callable

from .bf16_addition import appendix_b_example, format_two_bit_table, two_bit_table
from .implementations import IMPLEMENTATIONS
from .inputs import CASES
from .lab import FULL, QUICK, LabConfig, markdown_tables, run_lab, text_summary


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(valid) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(x for x in text.split(",") if x)
        unknown = [n for n in names if n not in valid]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(valid)}")
        return names

    return parse


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Register ``bias`` on the package CLI's subparsers."""
    p = subparsers.add_parser(
        "bias",
        help="measure the bf16 rounding bias of attention implementations (the paper's delta drift)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--device", help="cpu or cuda (default: cuda if available)")
    p.add_argument("--quick", action="store_true", help="small reference-path run (CPU: < 1 minute)")
    p.add_argument("--seqlens", type=_ints, help="comma-separated sequence lengths")
    p.add_argument("--head-dims", type=_ints, help="comma-separated head dims")
    p.add_argument("--cases", type=_names(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    p.add_argument("--impls", type=_names(IMPLEMENTATIONS), help=f"comma-separated, from: {', '.join(IMPLEMENTATIONS)}")
    p.add_argument("--seeds", type=int, help="independent draws per cell (each batch*heads heads)")
    p.add_argument("--causal", action="store_true", help="causal mask (default: full attention)")
    p.add_argument("--time-budget", type=float, help="seconds after which no new block starts")
    p.add_argument("--out", type=Path, help="folder for numerics.json, numerics_tables.md and PNG plots")
    p.add_argument("--rounding", action="store_true", help="also print the paper's BF16 addition example and 2-bit table")
    p.add_argument("--train", action="store_true", help="run the short GPT-2 training experiment instead of the lab (GPU: ~2 min)")
    p.add_argument("--train-steps", type=int, help="steps per training run")
    p.add_argument("--train-time-budget", type=float, default=90.0, help="seconds per training run at most")
    p.set_defaults(func=run)
    return p


def _device(args: argparse.Namespace) -> str:
    import torch

    return args.device or ("cuda" if torch.cuda.is_available() else "cpu")


def lab_config(args: argparse.Namespace) -> LabConfig:
    """The preset (QUICK or FULL) with the command line's overrides."""
    base = QUICK if args.quick else FULL
    changes = {
        "device": _device(args),
        "seqlens": args.seqlens,
        "head_dims": args.head_dims,
        "cases": args.cases,
        "implementations": args.impls,
        "seeds": args.seeds,
        "time_budget_s": args.time_budget,
    }
    if args.causal:
        changes["causal"] = True
    return dataclasses.replace(base, **{k: v for k, v in changes.items() if v is not None})


def _train(args: argparse.Namespace) -> None:
    from .plots import plot_training
    from .train_experiment import TINY, TrainConfig, run_experiment

    device = _device(args)
    config = TINY if device == "cpu" else TrainConfig(device=device)
    config = dataclasses.replace(config, time_budget_s=args.train_time_budget)
    if args.train_steps:
        config = dataclasses.replace(config, steps=args.train_steps)
    log = run_experiment(config, log=lambda m: print(m, flush=True))
    if args.out:
        (args.out / "train.json").write_text(json.dumps(log))
        plot_training(log, args.out / "train.png")
    for name, run in log["runs"].items():
        last = run["points"][-1]
        print(
            f"train {name}: step {last['step']} loss {last['loss']:.3f} tied rows {last['tied_frac']:.4f} "
            f"delta drift/step {last['delta_drift_abs_mean']:.2f} across steps {last['step_drift_abs_mean']:.2f}"
        )


def _write_lab(result: dict, out: Path) -> None:
    (out / "numerics.json").write_text(json.dumps(result))
    (out / "numerics_tables.md").write_text(markdown_tables(result))


def run(args: argparse.Namespace) -> int:
    if args.rounding:
        ex = appendix_b_example()
        print(f"Appendix B: {ex.acc_fp32!r} + {ex.addend_bf16!r} -> bf16 {ex.sum_bf16!r}, error {ex.error!r}")
        print(format_two_bit_table(two_bit_table()))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if args.train:
        _train(args)
        return 0
    checkpoint = (lambda partial: _write_lab(partial, args.out)) if args.out else None
    result = run_lab(lab_config(args), log=lambda m: print(m, flush=True), checkpoint=checkpoint)
    if args.out:
        from .plots import plot_cumulative, plot_drift

        _write_lab(result, args.out)
        if result["rows"]:
            plot_drift(result, args.out / "delta_drift.png")
        if result["curves"]["impl"]:
            plot_cumulative(result, args.out / "delta_cumulative.png")
    print(text_summary(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hf-stable-attn")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
