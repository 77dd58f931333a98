"""Matplotlib figures the notebooks show (they also save PNGs into the run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def parity_errors(rows_by_impl: dict[str, Sequence[dict]], rel_tol: float, path: str | Path | None = None):
    """Scatter of relative-L2 error vs longest prefix (tokens), one series per implementation, tolerance line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for impl, rows in rows_by_impl.items():
        xs = [r["L_max"] for r in rows]
        ys = [max(r["rel_l2"], 1e-8) for r in rows]
        ax.scatter(xs, ys, s=12, label=f"{impl} ({len(rows)} cases)")
    ax.axhline(rel_tol, color="red", linestyle="--", label=f"tolerance {rel_tol:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("longest prefix in the batch (tokens)")
    ax.set_ylabel("relative L2 error vs fp64 oracle")
    ax.set_title("Verify kernels vs the fp64 oracle")
    ax.legend()
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig

