"""Provenance of a result: the command, GPU, driver, library versions and date that produced it."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import shlex
import subprocess
import sys
from typing import Any


def _git_commit() -> str | None:
    from ..core.paths import ROOT

    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip()
        return commit if len(commit) == 40 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _git_dirty() -> bool | None:
    """Whether tracked files differ from HEAD (a copied work tree with a stale .git shows up here too)."""
    from ..core.paths import ROOT

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        return bool(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def source_digest() -> str:
    """sha256 of the CUDA kernel source and every kdtree_lab module, each with its path: identifies the code that
    ran even where the repository's git metadata is missing or stale."""
    from ..core.paths import ROOT, kernel_sources

    h = hashlib.sha256()
    for path in sorted([*kernel_sources(), *(ROOT / "kdtree_lab").rglob("*.py")]):
        h.update(os.path.relpath(path, ROOT).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


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
        "git_dirty": _git_dirty(),
        "source_sha256": source_digest(),
        "python": env.python,
        "torch": env.torch,
        "triton": env.triton,
        "cuda_runtime": env.cuda_runtime,
        "driver": env.driver,
        "nvcc": env.nvcc_version,
        "gpu": env.gpu_name,
        "compute_capability": env.compute_capability,
    }
