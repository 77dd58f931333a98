"""Matplotlib figures the notebooks show (they also save PNGs into the run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

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


SHAPE_CLASSES = (("H x N <= 64 (memory-bound)", 0, 64), ("128 <= H x N <= 1024", 65, 1024),
                 ("H x N >= 2048 (compute-bound)", 1025, 1 << 30))


def speedup_vs_length(rows: list[dict], path: str | Path | None = None):
    """Speed-up over SGLang's verify (extend_attention_fwd) against prefix length: one panel per shape class (H x N),
    one line per implementation (the median over the class's B, N, H at each length) with the range shaded,
    labelled at its end inside the panel (labels that would overprint are spread apart, each tied to its line);
    the legend sits outside the panels."""
    import statistics

    import matplotlib.pyplot as plt

    points: dict[tuple[str, str], dict[int, list[float]]] = {}
    for r in rows:
        if "speedup_vs_sglang_verify" not in r:
            continue
        cls = next(c[0] for c in SHAPE_CLASSES if c[1] <= r["H"] * r["N"] <= c[2])
        points.setdefault((cls, r["impl"]), {}).setdefault(r["L"], []).append(r["speedup_vs_sglang_verify"])
    classes = [c[0] for c in SHAPE_CLASSES if any(k[0] == c[0] for k in points)] or [SHAPE_CLASSES[0][0]]
    impls = sorted({k[1] for k in points})
    colours = {i: plt.get_cmap("tab10")(n % 10) for n, i in enumerate(impls)}
    fig, axes = plt.subplots(1, len(classes), figsize=(4.2 * len(classes) + 2.6, 4.2), sharey=True, squeeze=False,
                             layout="constrained")
    ends: dict = {}
    for ax, cls in zip(axes[0], classes):
        for impl in impls:
            by_len = points.get((cls, impl))
            if not by_len:
                continue
            ls = sorted(by_len)
            med = [statistics.median(by_len[x]) for x in ls]
            ax.fill_between(ls, [min(by_len[x]) for x in ls], [max(by_len[x]) for x in ls], color=colours[impl],
                            alpha=0.15, lw=0)
            ax.plot(ls, med, marker="o", color=colours[impl], label=impl)
            ends.setdefault(ax, []).append((ls[-1], med[-1], colours[impl]))
        ax.axhline(1, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(cls, fontsize=10)
        ax.set_xlabel("prefix length L (tokens)")
    axes[0][0].set_ylabel("speed-up over SGLang's verify (median, range shaded)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    for ax, points_at_end in ends.items():
        _end_labels(ax, points_at_end, fontsize=8, fig_height_in=4.2)
    if handles:
        fig.legend(handles, labels, loc="outside right center", fontsize=9, title="implementation")
    return save_figure(fig, path)


def _end_labels(ax, ends: list[tuple[float, float, Any]], fontsize: float, fig_height_in: float) -> None:
    """Label each line's last point ("209x") just right of it, inside ``ax`` (the x range is widened on a log axis
    to hold them); labels closer than a line of text are spread apart vertically and tied to their point."""
    from matplotlib.transforms import blended_transform_factory

    x_end = max(x for x, _, _ in ends)
    lo, _ = ax.get_xlim()
    ax.set_xlim(lo, x_end * 2.6)
    ax.get_ylim()  # settles the autoscaled (shared) y limits the fractions below are taken against
    to_axes = ax.transScale + ax.transLimits  # data -> axes fraction, whatever the layout does to the axes later
    gap = 1.3 * fontsize / 72 / (0.72 * fig_height_in)  # a line of text, as a fraction of the axes height
    order = sorted(range(len(ends)), key=lambda i: to_axes.transform(ends[i][:2])[1])
    wanted = [float(to_axes.transform(ends[i][:2])[1]) for i in order]
    placed = list(wanted)
    for k in range(1, len(placed)):
        placed[k] = max(placed[k], placed[k - 1] + gap)
    overflow = placed[-1] - (1 - gap / 2) if placed else 0
    if overflow > 0:
        placed[-1] -= overflow
        for k in range(len(placed) - 2, -1, -1):
            placed[k] = min(placed[k], placed[k + 1] - gap)
    where = blended_transform_factory(ax.transData, ax.transAxes)
    for i, y_frac, want in zip(order, placed, wanted):
        x, y, colour = ends[i]
        moved = abs(y_frac - want) > gap / 4
        ax.annotate(f"{y:,.0f}x", (x, y), xytext=(x * 1.35, y_frac), textcoords=where, fontsize=fontsize,
                    color=colour, va="center", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", lw=0.6, color=colour, shrinkA=0, shrinkB=2) if moved else None)


def speculation_curves(res: dict, path: str | Path | None = None):
    """Tokens per second per request against context (``speculate.sweep`` result): one panel per verify kernel,
    no speculation in black, the draft's chain dashed, trees of N nodes from light to dark, the break-even context
    marked. A model, and the title says so."""
    import matplotlib.pyplot as plt

    kernels = list(res["break_even"])
    fig, axes = plt.subplots(1, len(kernels), figsize=(6.2 * len(kernels), 4.6), sharey=True, squeeze=False)
    ctx = [r["context"] for r in res["rows"]]
    sizes = sorted(int(n) for n in res["rows"][0]["trees"][kernels[0]])
    cmap = plt.get_cmap("viridis")
    for ax, k in zip(axes[0], kernels):
        ax.plot(ctx, [r["no_spec"]["tokens_per_s"] for r in res["rows"]], color="black", lw=2.5,
                label="no speculation")
        chain_n = res["rows"][0]["chain"][k]["nodes"]
        ax.plot(ctx, [r["chain"][k]["tokens_per_s"] for r in res["rows"]], color="grey", ls="--", lw=1.8,
                label=f"chain of {chain_n}")
        for i, n in enumerate(sizes):
            ax.plot(ctx, [r["trees"][k][str(n)]["tokens_per_s"] for r in res["rows"]], marker="o", ms=3,
                    color=cmap(0.15 + 0.75 * i / max(1, len(sizes) - 1)), label=f"tree of {n}")
        b = res["break_even"][k]
        if b["context"]:
            ax.axvline(b["context"], color="red", ls=":", lw=1.5, label=f"stops paying: {b['context'] / 1000:.0f}k")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_title({"ours": "verify with our kernel", "sglang": "verify with SGLang's Triton kernel"}.get(k, k))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    axes[0][0].set_ylabel("tokens per second per request")
    fig.suptitle(f"Decode speed by context ({res['label']})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def speculation_best(res: dict, path: str | Path | None = None):
    """The best variant's speed-up over no speculation against context, one line per verify kernel, each point
    labelled with the winning tree size; below 1 speculation costs speed."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ctx = [r["context"] for r in res["rows"]]
    for k, colour in zip(res["break_even"], ("tab:blue", "tab:orange", "tab:green")):
        up = [r["best"][k]["tokens_per_s"] / r["no_spec"]["tokens_per_s"] for r in res["rows"]]
        ax.plot(ctx, up, marker="o", color=colour, label={"ours": "our verify", "sglang": "SGLang's verify"}.get(k, k))
        for x, y, r in zip(ctx, up, res["rows"]):
            b = r["best"][k]
            ax.annotate(f"{'C' if b['kind'] == 'chain' else 'N'}{b['nodes']}", (x, y), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7, color=colour)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("best speculative / no speculation (tokens per second)")
    ax.set_title(f"Best tree per context (N: tree of N nodes, C: the chain; {res['label']})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def published_check(checks: list[dict], path: str | Path | None = None):
    """Measured (markers) against modelled (lines) tokens per second for each published deployment
    (``speculate.published.check``), with and without speculation."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(checks), figsize=(6.2 * len(checks), 4.4), squeeze=False)
    styles = {"model no speculation": ("black", "-"), "model speculation, decode rows verify": ("tab:green", "--"),
              "model speculation, ours verify": ("tab:blue", "-"), "model speculation, sglang verify": ("tab:orange", "-")}
    for ax, res in zip(axes[0], checks):
        rows = res["rows"]
        ctx = [max(r["context"], 1000) for r in rows]  # context 0 drawn at 1k on the log axis
        for key, (colour, ls) in styles.items():
            ax.plot(ctx, [r[key] for r in rows], color=colour, ls=ls, label=key.replace("model ", "model: "))
        for key, marker in (("measured no speculation", "o"), ("measured speculation", "x")):
            pts = [(c, r[key]) for c, r in zip(ctx, rows) if r[key] is not None]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=60, color="red", zorder=3,
                       label=key)
        for r in res["reported"]:
            ax.scatter([r["context"]], [r["tokens_per_s"]], marker="*", s=120, color="purple", zorder=3,
                       label="reported second-hand")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("tokens per second (one request)")
        ax.set_title(res["label"], fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    return save_figure(fig, path)
