"""The parser every command shares (one-line errors, defaults in --help), bounded argument types, --gpus flags."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..lab.record import emit


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
    ``high_open``)."""

    def parse(text: str) -> float:
        value = float(text)
        above = value > low if low_open else value >= low
        below = high is None or (value < high if high_open else value <= high)
        if not (above and below) or value != value:
            raise ValueError(text)
        return value

    first = f"> {low:g}" if low_open else f">= {low:g}"
    last = "" if high is None else f" and {'<' if high_open else '<='} {high:g}"
    parse.__name__ = f"a number {first}{last}"
    return parse


positive_int = bounded_int(1)
non_negative_int = bounded_int(0)


def ints_at_least(low: int) -> Callable[[str], list[int]]:
    """argparse type: comma-separated integers >= low."""
    one = bounded_int(low)

    def parse(text: str) -> list[int]:
        return [one(t) for t in text.split(",")]

    parse.__name__ = f"comma-separated integers >= {low}"
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
    """A library's one-line refusal in the command line's words: the parameter names before its first colon as
    the flags that set them (``flags``: name -> flag, or names spelled as flags: accept_length -> --accept-length),
    prefixed "argument" as argparse's own lines are, "got X" as "found X" and a Python list of names as a plain one."""
    table = dict(flags) if isinstance(flags, Mapping) else {n: "--" + n.replace("_", "-") for n in flags}
    head, sep, rest = message.partition(":")
    if not sep:
        return message
    named = False
    for name in sorted(table, key=len, reverse=True):
        head, n = re.subn(rf"(?<![-\w]){re.escape(name)}(?!\w)", table[name], head)
        named = named or bool(n)
    if named and not head.startswith("argument"):
        head = ("arguments " if " and " in head or "/" in head else "argument ") + head
    rest = re.sub(r"\[('[^'\]]*'(?:, '[^'\]]*')*)\]", lambda m: m.group(1).replace("'", ""), rest)
    return head + sep + re.sub(r"\bgot\b", "found", rest)


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


def fleet_labels(args: argparse.Namespace, cmd: str) -> list[str] | None:
    """The --gpus list, or None after a one-line refusal."""
    from ..lab.fleet import FleetError, parse_gpus, require

    try:
        require()
        return parse_gpus(args.gpus)
    except FleetError as exc:
        print(f"kdtree-lab {cmd}: {exc}", file=sys.stderr)
        return None


def fleet_report(args, cmd: str, rep, extra: dict, text: str) -> int:
    from ..core.display import markdown_table

    doc = extra | {"gpus": rep.summary(), "complete": rep.complete, "rows": rep.rows}
    emit(args, doc, text + "\n\n" + markdown_table(rep.summary()))
    for o in rep.outcomes:
        if o.error:
            print(f"kdtree-lab {cmd}: GPU {o.gpu}: {o.error}; the run is incomplete", file=sys.stderr)
    return 0 if rep.complete and all(r.get("ok", True) for r in rep.rows) else 1


def fleet_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", help="all | 0,1,... | cpu:N: shard the grid over these GPUs (one Dask worker each; "
                                  "needs the fleet extra), rows merged in grid order with their GPU (default: this "
                                  "machine's own device, no fleet)")
    p.add_argument("--scheduler", help="a running Dask scheduler (tcp://host:8786) whose workers serve --gpus "
                                       "(default: a local cluster, one worker per GPU)")
