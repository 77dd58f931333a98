"""The memory-budget widget: ipywidgets controls -> :func:`kdtree_lab.budget.calculator.compute` -> table, bar
(:func:`budget_bar`), verdict, launch line. Errors from the calculator are shown in the widget, never swallowed.
CSS classes (``kd-*``) give browser tests stable handles."""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

from ..core.display import fmt, save_figure
from .calculator import compute
from .inputs import GIB, BudgetInputError, BudgetInputs
from .presets import gpus, models
from .proposals import with_proposals


def _controls(inp: BudgetInputs):
    import ipywidgets as w

    style = {"description_width": "150px"}
    lay = w.Layout(width="460px")
    ctl = {
        "gpu": w.Dropdown(options=[(g.label, k) for k, g in gpus().items()], value=inp.gpu, description="GPU"),
        "model": w.Dropdown(options=[(m.label, k) for k, m in models().items()], value=inp.model, description="model"),
        "quant": w.Dropdown(options=["int4", "fp8", "bf16"], value=inp.quant, description="weights"),
        "kv_dtype": w.Dropdown(options=["bf16", "fp8"], value=inp.kv_dtype, description="KV cache dtype"),
        "tp": w.Dropdown(options=[1, 2, 4, 8], value=inp.tp, description="tensor parallel"),
        "max_bs": w.IntSlider(value=inp.max_bs, min=1, max=48, description="max verify batch"),
        "spec_algorithm": w.Dropdown(options=["EAGLE", "EAGLE3", "DFLASH"], value=inp.spec_algorithm,
                                     description="speculative algorithm"),
        "topk": w.IntSlider(value=inp.topk, min=1, max=8, description="draft top-k (1: chain)"),
        "spec_steps": w.IntSlider(value=inp.spec_steps, min=1, max=8, description="draft steps"),
        "draft_tokens": w.IntSlider(value=inp.draft_tokens, min=1, max=64, description="draft tokens N"),
        "nsplit": w.IntSlider(value=inp.nsplit, min=0, max=128, description="nsplit (0: auto)"),
        "context": w.IntSlider(value=inp.context, min=4096, max=262_144, step=4096, description="context (tokens)"),
        "concurrency": w.IntSlider(value=inp.concurrency, min=1, max=48, description="concurrent requests"),
        "chunked_prefill": w.Dropdown(options=[("SGLang's default", None), 2048, 4096, 8192, 16384],
                                      value=inp.chunked_prefill, description="chunked prefill (tokens)"),
        "activation_model": w.Dropdown(options=[("measured (else modelled)", "measured"), ("modelled", "modelled"),
                                                ("SGLang's 1.5 MiB / token", "sglang-reserve")],
                                       value=inp.activation_model, description="activations follow"),
        "cuda_graphs": w.Checkbox(value=inp.cuda_graphs, description="CUDA graphs"),
        "mem_fraction": w.FloatSlider(value=inp.mem_fraction or 0.85, min=0.50, max=0.97, step=0.005,
                                      readout_format=".3f", description="mem-fraction-static"),
    }
    for c in ctl.values():
        c.style, c.layout = style, lay
        c.continuous_update = False
    ctl["mem_fraction"].add_class("kd-fraction")
    ctl["activation_model"].add_class("kd-activations")
    return ctl


def build(inp: BudgetInputs | None = None):
    """Return the widget (a VBox). Changing any control recomputes everything. In a headless run (``kdtree-lab
    run``), where no widget can live, display its static rendering (``static``) instead and return None."""
    from ..core.display import headless, markdown_table

    if headless():
        from IPython.display import HTML, display

        display(HTML(static(inp)))
        return None
    import ipywidgets as w
    import matplotlib.pyplot as plt

    inp = inp or BudgetInputs(mem_fraction=None)
    if inp.mem_fraction is None:  # start at the largest safe fraction
        inp = replace(inp, mem_fraction=compute(inp).safe_fraction)
    ctl = _controls(inp)
    verdict = w.HTML().add_class("kd-verdict")
    tokens = w.HTML().add_class("kd-kv-tokens-box")
    table = w.Output()
    bar = w.Output()
    launch = w.HTML().add_class("kd-launch")
    error = w.HTML().add_class("kd-error")
    proposals = w.HTML().add_class("kd-proposals")

    def update(_change=None):
        values = {k: c.value for k, c in ctl.items()}
        try:
            res = with_proposals(compute(replace(inp, **values)))
        except BudgetInputError as exc:
            error.value = f'<div style="color:#b00020"><b>input error:</b> {html.escape(str(exc))}</div>'
            return
        error.value = ""
        tokens.value, verdict.value, launch.value = _tokens_html(res), _verdict_html(res), _launch_html(res)
        proposals.value = _proposals_html(res)
        with table:
            table.clear_output(wait=True)
            from IPython.display import Markdown, display

            display(Markdown(markdown_table(res.table())))
        with bar:
            bar.clear_output(wait=True)
            fig = budget_bar(res)
            display_fig(fig)
            plt.close(fig)

    for c in ctl.values():
        c.observe(update, names="value")
    update()
    half = (len(ctl) + 1) // 2
    return w.VBox([w.HBox([w.VBox(list(ctl.values())[:half]), w.VBox(list(ctl.values())[half:])]), error, tokens,
                   verdict, launch, proposals, bar, table])


def _tokens_html(res) -> str:
    return (f'KV tokens: <span class="kd-kv-tokens" data-fraction="{res.fraction:.3f}">{res.kv_tokens:,}'
            f'</span> &middot; max context per request at {res.inputs.concurrency}: '
            f'<span class="kd-max-context">{res.max_context_per_request:,}</span>')


def _verdict_html(res) -> str:
    """The verdict as the CLI gives it: safe, or refused (cannot start / not safe) with the fractions to use."""
    by_model = ", ".join(f"{html.escape(m)} {f:.3f}" for m, f in res.safe_fractions.items())
    if res.fraction_is_safe:
        head = '<b class="kd-safe">safe</b>' + ("" if not res.warnings else " (check the warnings)")
    elif res.impossible:
        head = '<b class="kd-refused" style="color:#b00020">no fraction is safe</b>'
    else:
        head = ('<b class="kd-refused" style="color:#b00020">'
                f'{"cannot start" if not res.starts else "not safe"}</b>')
    return (f"{head}: {html.escape(res.verdict())}<br>largest safe fraction {res.safe_fraction:.3f} "
            f"(activations {html.escape(res.activation)}; by estimate: {by_model}); smallest that starts "
            f"{res.start_fraction:.3f}, smallest that holds one {res.inputs.context:,}-token request "
            f"{res.serve_fraction:.3f}; SGLang's default {res.sglang_default_fraction:.3f}<br>"
            + "<br>".join(f"&#9888; {html.escape(x)}" for x in res.warnings))


def _launch_html(res) -> str:
    """The launch line, or why there is none: an unsafe fraction gets no line to paste (as ``kdtree-lab budget``)."""
    if not res.fraction_is_safe:
        return f"<i>no launch line: {html.escape(res.refusal())}</i>"
    return f"<code>{html.escape(res.launch_line)}</code>"


def static(inp: BudgetInputs | None = None) -> str:
    """What the widget shows at ``inp`` (the largest safe fraction when none is set), as static HTML: the headless
    rendering a stored notebook keeps, where no live widget can run. The table and bar are the notebook's first
    section."""
    inp = inp or BudgetInputs(mem_fraction=None)
    if inp.mem_fraction is None:
        inp = replace(inp, mem_fraction=compute(inp).safe_fraction)
    res = with_proposals(compute(inp))
    return ("<p><i>The live widget runs in JupyterLab or Voila (<code>make lab</code>); here, where nothing can run "
            f"it, is what it shows at fraction {res.fraction:.3f} (the table and bar are above).</i></p>"
            + "<br>".join([_tokens_html(res), _verdict_html(res), _launch_html(res), _proposals_html(res)]))


def _proposals_html(res) -> str:
    """The deployments that hold the context (empty when this one does), as an HTML table with launch lines."""
    if not res.proposals:
        return ""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in [*res.proposals[0].row(), "launch line"])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v) if isinstance(v, (int, float)) else str(v))}</td>"
                                   for v in p.row().values())
                   + f"<td><code>{html.escape(p.launch_line)}</code></td></tr>" for p in res.proposals)
    return (f"<b>deployments that hold the {res.inputs.context:,}-token context</b> (each at its largest safe "
            f"fraction)<table>{'<tr>' + head + '</tr>'}{body}</table>")


def display_fig(fig) -> None:
    from IPython.display import display

    display(fig)


def budget_bar(result, path: str | Path | None = None, smallest: float = 0.03):
    """The GPU's memory as two stacked bars (GiB): the whole GPU (CUDA context, weights, KV pool, the slack
    consumers, what is left), and under it the slack consumers alone, at a scale where each can be read. Consumers
    under ``smallest`` of that bar are drawn as one segment (a sliver cannot be read; the legend names them). The
    title names the GPU, the model and the fraction."""
    import textwrap

    import matplotlib.pyplot as plt

    inp = result.inputs
    slack = [(c.name.split(" (")[0], c.bytes) for c in result.consumers if c.where == "slack"]
    slack_bytes = sum(b for _, b in slack)
    whole = [("weights", result.weights_bytes),
             ("draft weights + reserve", result.draft_weights_bytes + result.reserve_bytes),
             ("KV pool", result.kv_pool_bytes), ("slack consumers (the lower bar)", slack_bytes)]
    whole.append(("CUDA context, NCCL and unassigned", max(0, result.gpu_bytes - sum(b for _, b in whole))))
    room = result.g_bytes * (1 - result.fraction)  # the slack the fraction leaves
    scale = max(room, slack_bytes)
    big = [(n, b) for n, b in slack if b >= smallest * scale]
    small = [(n, b) for n, b in slack if b < smallest * scale]
    if small:
        names = f"{len(small)} under {smallest:.0%} of this bar ({', '.join(n for n, _ in small)})"
        big.append(("\n".join(textwrap.wrap(names, 70)), sum(b for _, b in small)))
    fig, (top, top_key, low, low_key) = plt.subplots(4, 1, figsize=(10, 7.2), layout="constrained",
                                                     gridspec_kw={"height_ratios": [1.2, 0.6, 1.2, 1.2]})
    cmap = plt.get_cmap("tab20")
    for ax, parts, offset in ((top, whole, 0), (low, big, 6)):
        left = 0.0
        for i, (name, b) in enumerate(parts):
            if b > 0:
                ax.barh([0], [b / GIB], left=left, color=cmap((i + offset) % 20), label=f"{name}: {_size(b)}")
                left += b / GIB
        ax.set_yticks([])
    top.axvline(result.g_bytes * result.fraction / GIB, color="black", linestyle="--",
                label=f"G x fraction ({result.fraction:.3f}): weights and KV pool end here")
    top.set_xlim(0, result.gpu_bytes / GIB)
    top.set_xlabel("memory of one GPU (GiB)")
    low.axvline(room / GIB, color="red" if slack_bytes > room else "black", linestyle="--",
                label=f"the slack the fraction leaves: {_size(room)}")
    low.set_xlim(0, scale / GIB * 1.02)
    low.set_xlabel("the slack consumers alone (GiB)")
    for ax, key in ((top, top_key), (low, low_key)):  # each bar's legend in a panel of its own below it
        key.axis("off")
        key.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="upper center", ncol=2, frameon=False)
    g, m = gpus()[inp.gpu], models()[inp.model]
    state = ("" if result.fraction_is_safe else
             ": CANNOT START, the weights exceed G x fraction" if not result.starts else ": NOT SAFE")
    title = (f"Memory of one {g.label}: {m.label}, {inp.quant}, TP{inp.tp}, at --mem-fraction-static "
             f"{result.fraction:.3f}{state} (the budget's estimate of SGLang's allocations)")
    fig.suptitle("\n".join(textwrap.wrap(title, 120)), fontsize=9)
    return save_figure(fig, path)


def _size(nbytes: float) -> str:
    """A size for a legend: GiB from 1 GiB, MiB below."""
    return f"{nbytes / GIB:.1f} GiB" if nbytes >= GIB else f"{nbytes / 2**20:,.0f} MiB"
