"""The ``hf-stable-attn`` command: ``demo``, ``bias``, ``probe``, ``env``."""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    from . import demo, environment, probe
    from .numerics import cli as numerics_cli

    parser = argparse.ArgumentParser(
        prog="hf-stable-attn",
        description="Stabilized flash attention for bf16 training (transformers plugin).",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    demo.add_subparser(subparsers)
    numerics_cli.add_subparser(subparsers)
    probe.add_subparser(subparsers)
    environment.add_subparser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
