"""Matplotlib figures the notebooks show (they also save PNGs into the run directory). Each takes ``where``: what
the figure's numbers come from, in words its title carries ("this machine: cpu, Triton in the CPU interpreter",
"committed H200 results", a GPU and model for a model's figures); ``display.figure_problems`` checks each
against it (tests/test_figures.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..core.display import save_figure


def parity_errors(rows_by_impl: dict[str, Sequence[dict]], rel_tol: float, path: str | Path | None = None,
                  where: str = ""):
    """Scatter of relative-L2 error vs longest prefix (tokens), one series per implementation, tolerance line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.4))
    for impl, rows in rows_by_impl.items():
        xs = [r["L_max"] for r in rows]
        ys = [max(r["rel_l2"], 1e-8) for r in rows]
        ax.scatter(xs, ys, s=12, label=f"{impl} ({len(rows)} cases)")
    ax.axhline(rel_tol, color="red", linestyle="--", label=f"tolerance {rel_tol:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=rel_tol * 30)  # room above the tolerance line for the legend
    ax.set_xlabel("longest prefix in the batch (tokens)")
    ax.set_ylabel("relative L2 error vs the fp64 oracle (ratio)")
    ax.set_title(_wrapped(f"Verify kernels against the fp64 oracle ({where})", 80), fontsize=9)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    fig.tight_layout()
    return save_figure(fig, path)


def _wrapped(text: str, width: int) -> str:
    """A title over lines of at most ``width`` characters."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False))


def roofline(rows: list[dict], ceilings: dict, path: str | Path | None = None, where: str = ""):
    """Achieved TFLOP/s vs arithmetic intensity (FLOP per byte of latent KV), one series per implementation, with
    the measured copy-bandwidth and GEMM ceilings; the legend beside the panel."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.6), layout="constrained")
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
    ax.set_xlabel("arithmetic intensity, 1.89 x H x N (FLOP/B of latent KV)")
    ax.set_ylabel("achieved rate (TFLOP/s)")
    ax.set_title(_wrapped(f"Verify kernels on the roofline of their GPU ({where})", 90), fontsize=9)
    fig.legend(fontsize=8, loc="outside right center", title="implementation", title_fontsize=8)
    return save_figure(fig, path)


SHAPE_CLASSES = (("H x N <= 64 (memory-bound)", 0, 64), ("128 <= H x N <= 1024", 65, 1024),
                 ("H x N >= 2048 (compute-bound)", 1025, 1 << 30))


def speedup_vs_length(rows: list[dict], path: str | Path | None = None, where: str = ""):
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
    axes[0][0].set_ylabel("speed-up over SGLang's verify, median, range shaded (x)")
    fig.suptitle(_wrapped(f"Speed-up over SGLang's verify by prefix length ({where})", 120), fontsize=9)
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


def context_axis(ax, contexts, zero_at: int = 1000) -> list[int]:
    """A log2 context axis with plain tick labels at the given contexts (16384 -> "16k"; 0 drawn at ``zero_at``
    and labelled "0"), thinned so two labels are at least half an octave apart, and no minor labels. Returns the
    contexts labelled."""
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
    return kept


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


def sweep_where(res: dict) -> str:
    """What a speculation figure models, for its title: the model and the GPU of a sweep (``speculate.sweep``'s
    inputs), where its kernel times come from, and that it is a model."""
    inputs = {r["input"]: r for r in res["inputs"]}
    model = inputs["model"]["value"].split(", ")
    gpu = inputs["GPU"]["value"].split(", ")
    times = inputs.get("attention: ours", {}).get("source", "")
    how = "kernel times predicted from committed H200 results" if "predicted" in times else \
        "kernel times measured on this machine"
    return f"{model[0]}, {model[-1]}, on {gpu[0]}, {gpu[1] if len(gpu) > 1 else ''}; {how}; {res['label']}"


def speculation_headline(head: dict, path: str | Path | None = None, where: str = ""):
    """Today's best (measured markers, modelled line) and the best setup with our kernel against context (left),
    and their ratio with its band (right, a linear axis with 1 marked; the ratio written above the panel at each
    labelled context, where no data is). ``speculate.answer.headline``'s result."""
    import matplotlib.pyplot as plt

    rows = head["rows"]
    ctx = [max(r["context"], 1000) for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.0))
    a.plot(ctx, [r["today_model"] for r in rows], color="black", lw=2, label="today's best, model")
    m = [(x, r["today"]) for x, r in zip(ctx, rows) if r["today_how"].startswith("measured")]
    a.scatter([x for x, _ in m], [y for _, y in m], color="red", marker="o", s=45, zorder=3,
              label="today's best, measured")
    a.plot(ctx, [r["ours"] for r in rows], color="tab:blue", lw=2, marker="s", ms=4, label="best setup with ours")
    a.fill_between(ctx, [r["ours"] / (1 + head["band"]) for r in rows], [r["ours"] / (1 - head["band"]) for r in rows],
                   color="tab:blue", alpha=0.15, label=f"the step model's worst miss (+-{head['band']:.0%})")
    a.plot(ctx, [r["same_draft"] for r in rows], color="tab:cyan", ls="--", label="ours, today's EAGLE-3 chain")
    context_axis(a, [r["context"] for r in rows])
    _plain_y(a)
    a.set_ylabel("tokens per second, one request (tokens/s)")
    a.set_title("tokens per second", fontsize=9)
    a.grid(True, alpha=0.3)
    b.plot(ctx, [r["ratio"] for r in rows], color="tab:blue", lw=2, marker="s", ms=4, label="best setup with ours")
    b.fill_between(ctx, [r["band"][0] for r in rows], [r["band"][1] for r in rows], color="tab:blue", alpha=0.15,
                   label="band (the step model's miss and our kernel's card-prediction spread)")
    b.plot(ctx, [r["same_draft_ratio"] for r in rows], color="tab:cyan", ls="--", label="ours, today's EAGLE-3 chain")
    b.axhline(1.0, color="black", lw=1)
    labelled = set(context_axis(b, [r["context"] for r in rows]))
    _plain_y(b)
    b.set_ylim(top=1.25 * max(r["band"][1] for r in rows))  # a free strip along the top for the ratios
    from matplotlib.ticker import MaxNLocator

    b.yaxis.set_major_locator(MaxNLocator(nbins=10, steps=[1, 2, 2.5, 5, 10]))  # ticks at most 0.5 apart
    for x, r in zip(ctx, rows):  # along the top, at the ticks' contexts: over no line, apart from each other
        if r["context"] in labelled:
            b.annotate(f"{r['ratio']:.2f}x", (x, 0.985), xycoords=("data", "axes fraction"), ha="center", va="top",
                       fontsize=7, color="tab:blue")
    b.set_ylabel("ours / today's best (x)")
    b.set_title("ratio, best setup with ours (written along the top)", fontsize=9)
    b.grid(True, alpha=0.3)
    handles, labels = a.get_legend_handles_labels()
    for h, lab in zip(*b.get_legend_handles_labels()):  # the right panel's own band
        if lab not in labels:
            handles.append(h)
            labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(_wrapped(f"What our verify kernel buys against {head['today']} ({where})", 150), fontsize=9)
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    return save_figure(fig, path)


def speculation_curves(res: dict, path: str | Path | None = None, where: str = ""):
    """Tokens per second per request against context (``speculate.sweep`` result): one panel per verify kernel,
    no speculation in black, the draft's chain dashed, trees of N nodes from light to dark, the break-even context
    marked (and named in the panel's title); one legend below the panels, off the data."""
    import matplotlib.pyplot as plt

    kernels = list(res["break_even"])
    fig, axes = plt.subplots(1, len(kernels), figsize=(5.2 * len(kernels), 5.0), sharey=True, squeeze=False)
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
        title = KERNEL_TITLES.get(k, k)
        if b["context"]:
            ax.axvline(b["context"], color="red", ls=":", lw=1.5, label="speculation stops paying")
            title += f": stops paying at {b['context'] / 1000:.0f}k"
        context_axis(ax, ctx)
        _plain_y(ax)
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("tokens per second per request (tokens/s)")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    fig.suptitle(_wrapped(f"Decode speed by context and tree size ({where})", 170), fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, path)


def speculation_best(res: dict, path: str | Path | None = None, where: str = ""):
    """The best variant's speed over no speculation against context, one line per verify kernel; the winning tree
    size written where it changes along a line (and at its first point), beside its point and off every line; below
    1 speculation costs speed (a linear axis with 1 marked)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    ctx = [r["context"] for r in res["rows"]]
    series = {}
    for k in res["break_even"]:
        pts = [(c, r["best"][k], r["no_spec"]) for c, r in zip(ctx, res["rows"]) if r["best"][k]]
        series[k] = [(x, b, b["tokens_per_s"] / n["tokens_per_s"]) for x, b, n in pts]
    span = 1.15 * max(y for pts in series.values() for _, _, y in pts)
    colours = dict(zip(series, ("tab:blue", "tab:purple", "tab:orange")))
    for k, pts in series.items():
        ax.plot([x for x, _, _ in pts], [y for _, _, y in pts], marker="o", color=colours[k],
                label=KERNEL_TITLES.get(k, k))
    ax.axhline(1.0, color="black", lw=1)
    context_axis(ax, ctx)
    _plain_y(ax)
    ax.set_ylim(top=span)
    fig.canvas.draw()
    for k, pts in series.items():
        last = None
        for x, b, y in pts:
            name = f"{'C' if b['kind'] == 'chain' else 'N'}{b['nodes']}"
            if name != last:
                _label_off_lines(ax, (x, y), name, colours[k])
            last = name
    ax.set_ylabel("best speculative / no speculation (x)")
    ax.set_title(_wrapped(f"Best tree per context, where it changes (N: a tree of N nodes, C: the chain; {where})",
                          100), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return save_figure(fig, path)


def _label_off_lines(ax, xy, text: str, colour) -> None:
    """Write ``text`` beside the point ``xy``: the first of above, below, right, left (each a few points away)
    where it covers no line or marker of ``ax`` and no earlier label; above when none is free."""
    from ..core.display import covers_data

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    taken = [t.get_window_extent(renderer) for t in ax.texts]
    for dx, dy, ha, va in ((0, 7, "center", "bottom"), (0, -7, "center", "top"), (7, 0, "left", "center"),
                           (-7, 0, "right", "center")):
        t = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                        color=colour)
        box = t.get_window_extent(renderer)
        if not covers_data(ax, box, bars=False) and not any(box.overlaps(o) for o in taken) and \
                box.x0 >= ax.bbox.x0 and box.x1 <= ax.bbox.x1 and box.y0 >= ax.bbox.y0 and box.y1 <= ax.bbox.y1:
            return
        t.remove()
    ax.annotate(text, xy, xytext=(0, 7), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                color=colour)


def published_where(checks: list[dict]) -> str:
    """Where the published tables were measured, for their figure's title: by whom, on which GPUs and model."""
    from ..budget.presets import gpus, models
    from ..speculate.presets import published

    tables = published()
    decks = sorted({(t.tp, gpus()[t.gpu].label.split(" (")[0], models()[t.model].label.split(" (")[0], t.quant)
                    for t in (tables[c["name"]] for c in checks)})
    who = sorted({c["source"].split()[0] for c in checks})
    return (f"measured by {', '.join(who)} on " + "; ".join(f"{tp} x {g}, {m} {q}" for tp, g, m, q in decks)
            + ", one request; lines: the model")


def published_check(checks: list[dict], path: str | Path | None = None, where: str = ""):
    """Measured (markers) against modelled (lines) tokens per second for each published table
    (``speculate.published.check``), with and without speculation; today's best first; one legend below."""
    import matplotlib.pyplot as plt

    cols = min(3, len(checks))
    rows_n = -(-len(checks) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.4 * cols, 4.2 * rows_n + 0.8 * (len(checks) == rows_n * cols)),
                             squeeze=False)
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
        ax.set_ylabel("tokens per second, one request (tokens/s)")
        ax.set_title(_wrapped(("" if res["role"] == "today" else "historical: ") + res["label"], 60), fontsize=8)
        ax.grid(True, alpha=0.3)
    handles = {}
    for ax in list(axes.flat)[:len(checks)]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    spare = list(axes.flat)[len(checks):]
    for ax in spare[1:]:
        ax.set_visible(False)
    if spare:  # the legend in the first free panel, off every panel's data
        spare[0].axis("off")
        spare[0].legend(list(handles.values()), list(handles), loc="center", fontsize=8, title="series",
                        title_fontsize=8)
    else:
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(_wrapped(f"The model against each published table of vLLM's decode speed ({where})", 170),
                 fontsize=9)
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0 if spare else 0.8 / (4.2 * rows_n + 0.8) + 0.02, 1, 1 - 0.45 / height))
    return save_figure(fig, path)


def generation_speed(rows: list[dict], path: str | Path | None = None, where: str = ""):
    """Tokens per second (all requests) against context, ours (solid) and SGLang's verify (dashed) in the same loop,
    one colour per draft configuration, one panel per KV pool (``generate.results.speed_rows``, H = 8 rows)."""
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["H"] == 8]
    pools = sorted({r["pool"] for r in rows})
    drafts = sorted({r["draft"] for r in rows})
    fig, axes = plt.subplots(1, len(pools), figsize=(5.6 * len(pools), 4.8), squeeze=False)
    colours = dict(zip(drafts, plt.get_cmap("tab10").colors))
    for ax, pool in zip(axes[0], pools):
        for d in drafts:
            pts = sorted((r["context"], r["ours tok/s"], r["SGLang tok/s"]) for r in rows
                         if r["pool"] == pool and r["draft"] == d)
            if not pts:
                continue
            ctx = [p[0] for p in pts]
            ax.plot(ctx, [p[1] for p in pts], color=colours[d], lw=2, marker="o", ms=4, label=f"{d}, ours")
            ax.plot(ctx, [p[2] for p in pts], color=colours[d], lw=1.5, ls="--", marker="s", ms=4,
                    label=f"{d}, SGLang's verify")
        context_axis(ax, sorted({r["context"] for r in rows}))
        _plain_y(ax)
        ax.set_title(f"{pool} KV pool, 8 heads", fontsize=9)
        ax.grid(True, alpha=0.3)
    for ax in axes[0]:
        ax.set_ylabel("tokens per second, all 8 requests (tokens/s)")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(_wrapped(f"Speculative decoding end to end, ours against SGLang's verify in the same loop ({where})",
                          150), fontsize=9)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    return save_figure(fig, path)


def generation_margins(counts: dict, path: str | Path | None = None, where: str = ""):
    """How far apart the fp32 reference's top two logits are at every compared token (grey), and at the tokens
    where a path's token differs from the reference's (red): ``generate.results.margin_counts``; a log count axis."""
    import matplotlib.pyplot as plt

    edges = counts["edges"]
    labels = [f"{lo:g}-{hi:g}" if hi < 1000 else f">= {lo:g}" for lo, hi in zip(edges[:-1], edges[1:])]
    x = list(range(len(labels)))
    fig, ax = plt.subplots(figsize=(9, 4.6))
    ax.bar([i - 0.2 for i in x], counts["all"], width=0.4, color="grey", label="every compared token")
    ax.bar([i + 0.2 for i in x], counts["mismatched"], width=0.4, color="tab:red",
           label="tokens where the path's token is not the reference's")
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=30, fontsize=8)
    ax.set_xlabel("top-2 margin of the fp32 reference (logits)")
    ax.set_ylabel("compared tokens (tokens)")
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(_wrapped(f"Greedy decoding's margins and the mismatches among them, {counts['runs']} runs "
                          f"({where})", 110), fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save_figure(fig, path)
