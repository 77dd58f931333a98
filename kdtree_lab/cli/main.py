"""The ``kdtree-lab`` console command. Every subcommand has ``--help``; data-producing ones take ``--json``."""

from __future__ import annotations

import argparse
import sys

from . import audit, bench, budget, build, capture, doctor, parity, run, speculate

COMMANDS = (doctor, run, audit, build, parity, budget, capture, bench, speculate)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kdtree-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
