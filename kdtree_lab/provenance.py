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
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(command: str | None = None) -> dict[str, Any]:
    """Return a dict naming the command, date (UTC), host, GPU, driver and versions.

    Every figure committed under ``data/results/`` carries one of these.
    """
    from .doctor import collect

    env = collect()
    return {
        "command": command if command is not None else " ".join(shlex.quote(a) for a in sys.argv),
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
