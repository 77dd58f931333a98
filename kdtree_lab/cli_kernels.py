"""Subcommands that work on the contract and the kernels: audit, build, parity."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    """Add this module's subcommands to the ``kdtree-lab`` parser (filled in as they land)."""
    return None
