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


def context_axis(ax, contexts, zero_at: int = 1000) -> None:
    """A log2 context axis with plain tick labels at the given contexts (16384 -> "16k"; 0 drawn at ``zero_at``
    and labelled "0"), thinned so two labels are at least half an octave apart, and no minor labels."""
    import math

    from matplotlib.ticker import FixedLocator, NullLocator

    from ..speculate.published import k_words

    ax.set_xscale("log", base=2)
    kept: list[int] = []
    for c in sorted(set(contexts)):
        x = max(c, zero_at)
        if not kept or math.log2(x) - math.log2(max(kept[-1], zero_at)) >= 0.5:
            kept.append(c)
        elif c == max(contexts):  # keep the longest context's label, drop the one before it
            kept[-1] = c
    ax.xaxis.set_major_locator(FixedLocator([max(c, zero_at) for c in kept]))
    ax.set_xticklabels([k_words(c) for c in kept])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("context (tokens)")


def _plain_y(ax) -> None:
    """A linear y axis from 0 with plain-number ticks."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=7))
    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    ax.yaxis.set_major_formatter(fmt)


KERNEL_TITLES = {"ours": "our kernel, bf16 pool", "ours-fp8": "our kernel, fp8 pool",
                 "sglang": "SGLang's Triton verify, bf16 pool"}


def speculation_headline(head: dict, path: str | Path | None = None):
    """Today's best (measured markers, modelled line) and the best setup with our kernel against context (left),
    and their ratio with its band (right, a linear axis with 1 marked). ``speculate.answer.headline``'s result."""
    import matplotlib.pyplot as plt

    rows = head["rows"]
    ctx = [max(r["context"], 1000) for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    a.plot(ctx, [r["today_model"] for r in rows], color="black", lw=2, label="today's best, model")
    m = [(x, r["today"]) for x, r in zip(ctx, rows) if r["today_how"].startswith("measured")]
    a.scatter([x for x, _ in m], [y for _, y in m], color="red", marker="o", s=45, zorder=3,
              label="today's best, measured")
    a.plot(ctx, [r["ours"] for r in rows], color="tab:blue", lw=2, marker="s", ms=4, label="best setup with ours")
    a.fill_between(ctx, [r["ours"] / (1 + head["band"]) for r in rows], [r["ours"] / (1 - head["band"]) for r in rows],
                   color="tab:blue", alpha=0.15, label=f"band (+-{head['band']:.0%})")
    a.plot(ctx, [r["same_draft"] for r in rows], color="tab:cyan", ls="--", label="ours, same EAGLE-3 chain")
    context_axis(a, [r["context"] for r in rows])
    _plain_y(a)
    a.set_ylabel("tokens per second (one request)")
    a.legend(fontsize=8, loc="lower left")
    a.grid(True, alpha=0.3)
    b.plot(ctx, [r["ratio"] for r in rows], color="tab:blue", lw=2, marker="s", ms=4, label="best setup with ours")
    b.fill_between(ctx, [r["band"][0] for r in rows], [r["band"][1] for r in rows], color="tab:blue", alpha=0.15,
                   label="band")
    b.plot(ctx, [r["same_draft_ratio"] for r in rows], color="tab:cyan", ls="--", label="ours, same EAGLE-3 chain")
    b.axhline(1.0, color="black", lw=1)
    for x, r in zip(ctx, rows):
        b.annotate(f"{r['ratio']:.2f}x", (x, r["ratio"]), textcoords="offset points", xytext=(0, 7), ha="center",
                   fontsize=7, color="tab:blue")
    context_axis(b, [r["context"] for r in rows])
    _plain_y(b)
    from matplotlib.ticker import MaxNLocator

    b.yaxis.set_major_locator(MaxNLocator(nbins=12, steps=[1, 2, 5, 10]))  # the ratio reads off its axis to 0.5
    b.set_ylabel("ours / today's best (tokens per second)")
    b.legend(fontsize=8, loc="lower right")
    b.grid(True, alpha=0.3)
    fig.suptitle(f"What our verify kernel buys against {head['today']} ({head['label']})", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def speculation_curves(res: dict, path: str | Path | None = None):
    """Tokens per second per request against context (``speculate.sweep`` result): one panel per verify kernel,
    no speculation in black, the draft's chain dashed, trees of N nodes from light to dark, the break-even context
    marked. A model, and the title says so."""
    import matplotlib.pyplot as plt

    kernels = list(res["break_even"])
    fig, axes = plt.subplots(1, len(kernels), figsize=(5.2 * len(kernels), 4.6), sharey=True, squeeze=False)
    ctx = [r["context"] for r in res["rows"]]
    sizes = sorted(int(n) for n in res["rows"][0]["trees"][kernels[0]])
    cmap = plt.get_cmap("viridis")

    def line(ax, rows, **kw):
        pts = [(c, r["tokens_per_s"]) for c, r in zip(ctx, rows) if r and r["fits"]]
        ax.plot([c for c, _ in pts], [y for _, y in pts], **kw)

    for ax, k in zip(axes[0], kernels):
        ax.plot(ctx, [r["no_spec"]["tokens_per_s"] for r in res["rows"]], color="black", lw=2.5,
                label="no speculation")
        chain_n = res["rows"][0]["chain"][k]["nodes"]
        line(ax, [r["chain"][k] for r in res["rows"]], color="grey", ls="--", lw=1.8, label=f"chain of {chain_n}")
        for i, n in enumerate(sizes):
            line(ax, [r["trees"][k][str(n)] for r in res["rows"]], marker="o", ms=3,
                 color=cmap(0.15 + 0.75 * i / max(1, len(sizes) - 1)), label=f"tree of {n}")
        b = res["break_even"][k]
        if b["context"]:
            ax.axvline(b["context"], color="red", ls=":", lw=1.5, label=f"stops paying: {b['context'] / 1000:.0f}k")
        context_axis(ax, ctx)
        _plain_y(ax)
        ax.set_title(KERNEL_TITLES.get(k, k), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[0][0].set_ylabel("tokens per second per request")
    fig.suptitle(f"Decode speed by context ({res['label']})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def speculation_best(res: dict, path: str | Path | None = None):
    """The best variant's speed over no speculation against context, one line per verify kernel, each point
    labelled with the winning tree size; below 1 speculation costs speed (a linear axis with 1 marked)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.4))
    ctx = [r["context"] for r in res["rows"]]
    series = {}
    for k in res["break_even"]:
        pts = [(c, r["best"][k], r["no_spec"]) for c, r in zip(ctx, res["rows"]) if r["best"][k]]
        series[k] = [(x, b, b["tokens_per_s"] / n["tokens_per_s"]) for x, b, n in pts]
    at: dict = {}  # per context, every series' speed-up
    for pts in series.values():
        for x, _, y in pts:
            at.setdefault(x, []).append(y)
    span = 1.1 * max(max(v) for v in at.values())
    placed: dict = {}  # per context, the heights of the labels already put above their points
    for (k, pts), colour in zip(series.items(), ("tab:blue", "tab:purple", "tab:orange")):
        ax.plot([x for x, _, _ in pts], [y for _, _, y in pts], marker="o", color=colour, label=KERNEL_TITLES.get(k, k))
        for x, b, y in pts:  # a label goes below its point where another series' point (or label) sits just above it
            above = not any(y < other < y + 0.08 * span for other in at[x]) and \
                not any(abs(y - other) < 0.04 * span for other in placed.get(x, []))
            if above:
                placed.setdefault(x, []).append(y)
            ax.annotate(f"{'C' if b['kind'] == 'chain' else 'N'}{b['nodes']}", (x, y), textcoords="offset points",
                        xytext=(0, 6 if above else -7), ha="center", va="bottom" if above else "top", fontsize=7,
                        color=colour)
    ax.axhline(1.0, color="black", lw=1)
    context_axis(ax, ctx)
    _plain_y(ax)
    ax.set_ylim(top=span)  # room for the highest labels inside the axes
    ax.set_ylabel("best speculative / no speculation (tokens per second)")
    ax.set_title(f"Best tree per context (N: tree of N nodes, C: the chain; {res['label']})", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def published_check(checks: list[dict], path: str | Path | None = None):
    """Measured (markers) against modelled (lines) tokens per second for each published table
    (``speculate.published.check``), with and without speculation; today's best first."""
    import matplotlib.pyplot as plt

    cols = min(3, len(checks))
    rows_n = -(-len(checks) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.4 * cols, 4.2 * rows_n), squeeze=False)
    styles = {"model no speculation": ("black", "-", "model: no speculation"),
              "model speculation": ("tab:red", "--", "model: the chain as decode rows (today)"),
              "model, ours (bf16 pool)": ("tab:blue", "-", "model: the chain, ours (bf16 pool)"),
              "model, ours (fp8 pool)": ("tab:purple", "-", "model: the chain, ours (fp8 pool)")}
    for ax, res in zip(axes.flat, checks):
        rows = res["rows"]
        ctx = [max(r["context"], 1000) for r in rows]  # context 0 drawn at 1k
        for key, (colour, ls, label) in styles.items():
            ax.plot(ctx, [r[key] for r in rows], color=colour, ls=ls, label=label)
        for key, marker in (("measured no speculation", "o"), ("measured speculation", "x")):
            pts = [(c, r[key]) for c, r in zip(ctx, rows) if r[key] is not None]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=60, color="red", zorder=3,
                       label=key)
        for r in res["reported"]:
            ax.scatter([r["context"]], [r["tokens_per_s"]], marker="*", s=120, color="purple", zorder=3,
                       label="reported second-hand")
        context_axis(ax, [r["context"] for r in rows])
        _plain_y(ax)
        ax.set_ylabel("tokens per second (one request)")
        ax.set_title(("" if res["role"] == "today" else "historical: ") + res["label"], fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    for ax in list(axes.flat)[len(checks):]:
        ax.set_visible(False)
    fig.tight_layout()
    return save_figure(fig, path)
