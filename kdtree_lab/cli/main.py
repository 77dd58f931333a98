"""The ``kdtree-lab`` console command: one module per subcommand, each with ``--help``; data-producing ones take
``--json``."""

from __future__ import annotations

import sys

from . import audit, bench, budget, build, capture, doctor, parity, run, speculate
from .args import Parser

COMMANDS = (doctor, run, audit, build, parity, budget, capture, bench, speculate)  # in the order --help lists them
DESCRIPTION = ("Tree-verify attention for MLA models: the notebook sequence, the kernel's build, parity, capture and "
               "benchmark, SGLang's buffer contract, the memory budget and the speculation model. Each command has "
               "--help; those that produce data take --json.")


def build_parser() -> Parser:
    parser = Parser(prog="kdtree-lab", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 - argparse has no public type
    if not any(a in sub.choices or a in ("-h", "--help") for a in argv):  # no command: name what came instead
        parser.error(f"argument COMMAND: expected one of {', '.join(sub.choices)}, found "
                     + (repr(argv[0]) if argv else "none"))
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command they were given to, with its --help
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
