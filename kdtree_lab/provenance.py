"""Provenance of a result: the command, GPU, driver, library versions and date that produced it."""

from __future__ import annotations

import datetime as _dt
import platform
import shlex
import subprocess
import sys
from typing import Any


def _git_commit() -> str | None:
    from .paths import ROOT

    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip()
        return commit if len(commit) == 40 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith("__main__.py"):
        argv[0] = "python -m kdtree_lab"
    return " ".join(shlex.quote(a) for a in argv)


def provenance(command: str | None = None) -> dict[str, Any]:
    """Return a dict naming the command, date (UTC), host, GPU, driver and versions.

    Every figure committed under ``data/results/`` carries one of these.
    """
    from .doctor import collect

    env = collect()
    return {
        "command": command if command is not None else _command_line(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "git_commit": _git_commit(),
        "python": env.python,
        "torch": env.torch,
        "triton": env.triton,
        "cuda_runtime": env.cuda_runtime,
        "driver": env.driver,
        "nvcc": env.nvcc_version,
        "gpu": env.gpu_name,
        "compute_capability": env.compute_capability,
    }
