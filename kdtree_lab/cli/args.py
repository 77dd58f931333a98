"""Argument types and the --gpus flags the commands share."""

from __future__ import annotations

import argparse
import sys

from ..lab.record import emit


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the ValueError into one usage line and exit 2)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "integer >= 1"


def positive_ints(text: str) -> list[int]:
    """argparse type: comma-separated integers >= 1."""
    return [positive_int(t) for t in text.split(",")]


positive_ints.__name__ = "comma-separated integers >= 1"


def readable_file(text: str) -> str:
    """argparse type: a path that names a readable file."""
    from pathlib import Path

    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: expected a readable file, found none")
    return text


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
                                  "needs the fleet extra), rows merged in grid order with their GPU")
    p.add_argument("--scheduler", help="a running Dask scheduler (tcp://host:8786) whose workers serve --gpus")
