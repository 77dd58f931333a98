"""The ``kdtree-lab`` console command: one module per subcommand, each with ``--help``; data-producing ones take
``--json``. ``main`` turns every way a command can end into one line and an exit code (``args``: the codes)."""

from __future__ import annotations

import os
import sys

from . import audit, bench, budget, build, capture, doctor, generate, parity, run, speculate
from .args import BROKEN_PIPE, FAILED, INTERRUPTED, Parser, Refusal

COMMANDS = (doctor, run, audit, build, parity, budget, capture, bench, speculate, generate)  # in the order --help lists them
DESCRIPTION = ("Tree-verify attention for MLA models: the notebook sequence, the kernel's build, parity, capture and "
               "benchmark, SGLang's buffer contract, the memory budget, the speculation model and generation checked token for token. Each command has "
               "--help; those that produce data take --json. Exit codes: 0 answered, 1 a check failed, 2 a bad "
               "argument, 3 a well-formed request whose answer is no (or that this machine cannot serve), 130 "
               "Ctrl-C.")
TRACEBACK_ENV = "KDTREE_TRACEBACK"  # =1: an internal error raises with its traceback instead of one line


def version() -> str:
    """The installed package's version (pyproject.toml's, through the package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("kdtree-lab")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def build_parser() -> Parser:
    parser = Parser(prog="kdtree-lab", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"kdtree-lab {version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run its command. One line on stderr for a refusal (its code), Ctrl-C (130) and an
    internal error (1, its traceback under KDTREE_TRACEBACK=1); nothing more once stdout's reader went away."""
    prog = "kdtree-lab"
    try:
        parser = build_parser()
        argv = sys.argv[1:] if argv is None else list(argv)
        sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 - argparse has no public type
        if not any(a in sub.choices or a in ("-h", "--help", "--version") for a in argv):  # name what came instead
            parser.error(f"argument COMMAND: expected one of {', '.join(sub.choices)}, found "
                         + (repr(argv[0]) if argv else "none"))
        args, extra = parser.parse_known_args(argv)
        prog = f"kdtree-lab {args.command}"
        if extra:  # named by the command they were given to, with its --help
            sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
        return int(args.func(args) or 0)
    except Refusal as exc:
        return _say(prog, str(exc), exc.code)
    except KeyboardInterrupt:
        return _say(prog, "interrupted (Ctrl-C)", INTERRUPTED)
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a page
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        detail = " ".join(str(exc).split())[:300] or "no detail"
        return _say(prog, f"internal error, not a problem with the arguments: {type(exc).__name__}: {detail} (run "
                          f"again with {TRACEBACK_ENV}=1 for the traceback, and report it)", FAILED)


def _say(prog: str, message: str, code: int) -> int:
    try:
        print(f"{prog}: {message}", file=sys.stderr, flush=True)
    except BrokenPipeError:
        return _reader_gone()
    return code


def _reader_gone() -> int:
    """stdout's (or stderr's) reader went away (``kdtree-lab ... | head``): point both at /dev/null, so that the
    interpreter's flush at exit has nowhere to fail, and exit quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # a stream without a descriptor (captured by a test)
            pass
    return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
