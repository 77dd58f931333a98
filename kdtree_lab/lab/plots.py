"""Matplotlib figures the notebooks show (they also save PNGs into the run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..core.display import save_figure


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
    return save_figure(fig, path)


def roofline(rows: list[dict], ceilings: dict, path: str | Path | None = None):
    """Achieved TFLOP/s vs arithmetic intensity (FLOP per byte of latent KV), one series per implementation, with
    the measured copy-bandwidth and GEMM ceilings."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    bw, peak = ceilings["copy_gbps"] / 1e3, ceilings["gemm_tflops"]  # TB/s, TFLOP/s
    ridge = peak / bw
    ax.plot([1, ridge, 1e5], [bw, peak, peak], color="black", lw=1.5, label=f"roofline ({bw:.2f} TB/s, {peak:.0f} TF/s)")
    for impl in sorted({r["impl"] for r in rows}):
        pts = [r for r in rows if r["impl"] == impl]
        # each row at the intensity of the work its implementation does (one-token decode: N = 1)
        ax.scatter([1.889 * r["H"] * r.get("work_N", r["N"]) for r in pts], [r["TFLOP/s"] for r in pts], s=18,
                   label=impl)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of latent KV = 1.89 x H x N)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def speedup_vs_length(rows: list[dict], path: str | Path | None = None):
    """Speed-up over SGLang's verify (extend_attention_fwd) vs prefix length, per implementation and shape."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 6.5))
    series: dict[tuple, list[tuple[int, float]]] = {}
    for r in rows:
        if "speedup_vs_sglang_verify" in r:
            series.setdefault((r["impl"], r["B"], r["N"], r["H"]), []).append((r["L"], r["speedup_vs_sglang_verify"]))
    for (impl, b, n, h), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{impl} B={b} N={n} H={h}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("prefix length L (tokens)")
    ax.set_ylabel("speed-up over SGLang's verify")
    if series:  # below the axes: a legend inside covers the curves
        ax.legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    return save_figure(fig, path)
