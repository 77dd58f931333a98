"""The parser every command shares (one-line errors, defaults in --help), the exit codes and the refusals a command
raises, bounded argument types, --gpus flags.

Exit codes (the README's "The command line" states them for a user):

- 0 ``OK``: answered (a budget's fraction is safe, a check passed);
- 1 ``FAILED``: a check ran and found a problem (a parity case out of tolerance, an audit mismatch, a failed build,
  capture or notebook), or an internal error;
- 2 ``BAD_ARGUMENT``: an argument malformed or outside its documented range; nothing ran;
- 3 ``ANSWER_NO``: a well-formed request whose answer is no: the budget finds the fraction unsafe or the deployment
  unable to start, or this machine lacks what the command needs (a CUDA GPU, nvcc, Triton's interpreter);
- 130 ``INTERRUPTED``: Ctrl-C; 141 ``BROKEN_PIPE``: the reader of the output went away (``... | head``), nothing
  more printed.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..lab.record import emit

OK, FAILED, BAD_ARGUMENT, ANSWER_NO, INTERRUPTED, BROKEN_PIPE = 0, 1, 2, 3, 130, 141
SEED_MAX = 2**32 - 1  # numpy's and torch's generators both take 0 .. 2**32 - 1


class Refusal(Exception):
    """A command's one-line refusal: ``main`` prints "kdtree-lab COMMAND: <message>" on stderr and exits ``code``."""

    code = FAILED


class BadArgument(Refusal):
    """An argument malformed, outside its range or given where it does not apply (exit 2)."""

    code = BAD_ARGUMENT


class AnswerNo(Refusal):
    """A well-formed request whose answer is no, or one this machine cannot serve (exit 3)."""

    code = ANSWER_NO


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` that shows each option's default (unless its help already says it; "none" for an option whose value
    is optional), wraps at spaces only (a name is never broken) and keeps a help's own line breaks (a list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or default is argparse.SUPPRESS or default is False
                or isinstance(action, argparse._HelpAction) or action.nargs == 0):  # noqa: SLF001 - no public type
            return text
        shown = "none" if default is None else ",".join(map(str, default)) if isinstance(default, (list, tuple)) \
            else default
        return text + f" (default: {shown})".replace("%", "%%")

    def _split_lines(self, text: str, width: int) -> list[str]:
        out = []
        for line in text.splitlines():  # a list in a help: one item per line, continuations indented
            out += textwrap.wrap(" ".join(line.split()), width, subsequent_indent="  " if "\n" in text else "",
                                 break_long_words=False, break_on_hyphens=False) or [""]
        return out


_INVALID = re.compile(r"argument (?P<arg>\S+): invalid (?P<what>.+?) value: (?P<found>.+)$")
_CHOICE = re.compile(r"argument (?P<arg>\S+): invalid choice: (?P<found>.+?) \(choose from (?P<choices>.+)\)$")


def one_line(message: str) -> str:
    """argparse's error message as "argument X: expected WHAT, found VALUE"."""
    if m := _CHOICE.match(message):
        choices = ", ".join(c.strip("'") for c in m["choices"].split(", "))
        return f"argument {m['arg']}: expected one of {choices}, found {m['found']}"
    if m := _INVALID.match(message):
        return f"argument {m['arg']}: expected {m['what']}, found {m['found']}"
    if message.startswith("unrecognized arguments: "):
        return f"unrecognized argument(s) {message.split(': ', 1)[1]}: expected only the options --help lists"
    if message.endswith(": expected one argument"):
        return message.replace(": expected one argument", ": expected a value after it, found none")
    if message.startswith("the following arguments are required: "):
        return f"argument(s) {message.split(': ', 1)[1]}: expected, found none"
    return message


class Parser(argparse.ArgumentParser):
    """An argument error is one line naming the argument, what was expected and what was found, plus where the
    help is; exit 2. No usage block before it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in [low, high] (high None: no upper bound)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value

    parse.__name__ = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
    return parse


def bounded_float(low: float, high: float | None = None, low_open: bool = False,
                  high_open: bool = False) -> Callable[[str], float]:
    """argparse type: a finite number >= low (> low when ``low_open``), <= high when given (< high when
    ``high_open``); nan and inf are refused."""

    def parse(text: str) -> float:
        value = float(text)
        if not math.isfinite(value) or not (value > low if low_open else value >= low) or (
                high is not None and not (value < high if high_open else value <= high)):
            raise ValueError(text)
        return value

    first = f"> {low:g}" if low_open else f">= {low:g}"
    parse.__name__ = f"a number {first}" + (f" and {'<' if high_open else '<='} {high:g}" if high is not None else "")
    return parse


def finite_float(text: str) -> float:
    """argparse type: a finite number (a value the library checks the range of itself)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


finite_float.__name__ = "a finite number"
positive_int = bounded_int(1)
non_negative_int = bounded_int(0)
seed = bounded_int(0, SEED_MAX)  # every command's --seed


def non_empty(what: str) -> Callable[[str], str]:
    """argparse type: a non-blank string (an empty --out or --only would silently mean the default)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"expected {what}, found an empty value")
        return text

    return parse


def ints_at_least(low: int, high: int | None = None) -> Callable[[str], list[int]]:
    """argparse type: comma-separated integers >= low (and <= high when given)."""
    one = bounded_int(low, high)

    def parse(text: str) -> list[int]:
        return [one(t) for t in text.split(",")]

    parse.__name__ = f"comma-separated integers >= {low}" if high is None else \
        f"comma-separated integers from {low} to {high}"
    return parse


positive_ints = ints_at_least(1)


def one_of(names: Callable[[], Iterable[str]]) -> Callable[[str], str]:
    """argparse type: one of ``names()`` (read when a value is parsed, e.g. a preset file's keys); refused as
    "argument --gpu: expected one of a, b, found 'x'", the wording of argparse's own choices."""

    def parse(text: str) -> str:
        known = sorted(names())
        if text not in known:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(known)}, found {text!r}")
        return text

    return parse


def gpu_preset(text: str) -> str:
    """argparse type: a GPU preset of data/presets/gpus.yaml."""
    from ..budget.presets import gpus

    return one_of(gpus)(text)


def as_flags(message: str, flags: Mapping[str, str] | Iterable[str]) -> str:
    """A library's one-line refusal in the command line's words (``display.as_parameters``): ``flags`` maps a
    parameter name to its flag, or lists names spelled as flags (accept_length -> --accept-length)."""
    from ..core.display import as_parameters

    table = dict(flags) if isinstance(flags, Mapping) else {n: "--" + n.replace("_", "-") for n in flags}
    return as_parameters(message, table)


def readable_file(text: str) -> str:
    """argparse type: a path that names a readable file (relative paths: against the caller's directory)."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"expected a readable file, found {'a directory' if path.is_dir() else 'none'}"
                                         f" at {text}")
    return str(path.resolve())


def text_file(text: str) -> str:
    """argparse type: a readable UTF-8 text file (a log), refused in one line when binary or undecodable."""
    path = Path(readable_file(text))
    data = path.read_bytes()
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\0"), data.index(b"\0") + 1, "NUL byte")
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a UTF-8 text log, found binary data at byte {exc.start} of "
                                         f"{text}") from None
    return str(path)


def fleet_labels(args: argparse.Namespace) -> list[str]:
    """The --gpus list; a list this machine cannot serve (or no Dask) is refused in one line (exit 3), a
    malformed one exit 2."""
    from ..lab.fleet import FleetError, parse_gpus, require

    try:
        require()
    except FleetError as exc:
        raise AnswerNo(str(exc)) from None
    try:
        return parse_gpus(args.gpus)
    except FleetError as exc:
        raise (BadArgument if "expected all, cpu:N" in str(exc) or "expected cpu:N" in str(exc) else AnswerNo)(
            str(exc)) from None


def check_fleet_flags(args: argparse.Namespace) -> None:
    """--scheduler only with --gpus (alone it would be ignored); neither may be empty."""
    if args.gpus is not None and not args.gpus.strip():
        raise BadArgument("argument --gpus: expected all, cpu:N or GPU indices such as 0,1, found an empty value")
    if args.scheduler is not None and args.gpus is None:
        raise BadArgument(f"argument --scheduler: applies with --gpus only (the workers it serves), found "
                          f"--scheduler {args.scheduler} without it")


def fleet_report(args, cmd: str, rep, extra: dict, text: str) -> int:
    doc = extra | {"gpus": rep.summary(), "complete": rep.complete, "rows": rep.rows}
    from ..core.display import aligned_table

    emit(args, doc, text + "\n\n" + aligned_table(rep.summary()))
    for o in rep.outcomes:
        if o.error:
            print(f"kdtree-lab {cmd}: GPU {o.gpu}: {o.error}; the run is incomplete", file=sys.stderr)
    return OK if rep.complete and all(r.get("ok", True) for r in rep.rows) else FAILED


def fleet_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", help="all | 0,1,... | cpu:N: shard the grid over these GPUs (one Dask worker each; "
                                  "needs the fleet extra), rows merged in grid order with their GPU (default: this "
                                  "machine's own device, no fleet)")
    p.add_argument("--scheduler", help="with --gpus: a running Dask scheduler (tcp://host:8786) whose workers serve "
                                       "them (default: a local cluster, one worker per GPU)")
