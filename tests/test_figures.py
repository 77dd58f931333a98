"""Every figure the notebooks write, rendered on representative data (the committed results a CPU run shows) and
read by ``display.figure_problems``: a title naming what and where it was measured, axis labels with units,
legends off the data, labels apart and off the lines, no slivers, readable text; its alt text in the HTML report;
and the checks themselves, each shown to catch what it names."""

import json
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from kdtree_lab.core.display import figure_alt, figure_problems  # noqa: E402
from kdtree_lab.core.paths import NOTEBOOKS, ROOT  # noqa: E402

COMMITTED_03 = ROOT / "data/results/h200/2026-12-01-sm120-per-shape/call1-notebooks/run/03_eager_parity.json"


def _sweep():
    from kdtree_lab.speculate import answer, sweep

    s = sweep.setup("rtx-pro-6000", "kimi-k2", 8, "int4")
    return sweep.sweep(s, sweep.DEFAULT_CONTEXTS), answer.headline(s, sweep.DEFAULT_CONTEXTS)


def _figures(out: Path):
    """(PNG name, figure, where its title must name) for every figure a notebook writes, drawn as the notebook
    draws it."""
    from kdtree_lab.budget import calculator, inputs, widget
    from kdtree_lab.checks import bench_results, parity
    from kdtree_lab.lab import plots
    from kdtree_lab.speculate import published

    cases = json.loads(COMMITTED_03.read_text())["cases"]
    committed = bench_results.committed_current()
    bench_where = "committed H200 results: " + bench_results.sources_words(committed)
    res, head = _sweep()
    model_where = plots.sweep_where(res)
    checks = published.check_all()
    budget = calculator.compute(inputs.BudgetInputs())
    from kdtree_lab.generate import results

    gen_where = "committed H200 results"
    return [
        ("08_margins.png", plots.generation_margins(results.margin_counts(results.committed()), out / "08_margins.png",
                                                    where=gen_where), gen_where),
        ("08_speed.png", plots.generation_speed(results.speed_rows(results.committed(only=results.TIMED)),
                                                out / "08_speed.png", where=gen_where), gen_where),
        ("03_parity_errors.png", plots.parity_errors(cases, parity.REL_L2_TOL, out / "03_parity_errors.png",
                                                     where="this machine (cpu; Triton in the CPU interpreter)"),
         "this machine (cpu; Triton in the CPU interpreter)"),
        ("04_budget_bar.png", widget.budget_bar(budget, out / "04_budget_bar.png"), "RTX PRO 6000 Blackwell"),
        ("06_roofline.png", plots.roofline(committed["rows"], committed["ceilings"], out / "06_roofline.png",
                                           where=bench_where), bench_where),
        ("06_speedup.png", plots.speedup_vs_length(committed["rows"], out / "06_speedup.png", where=bench_where),
         bench_where),
        ("07_headline.png", plots.speculation_headline(head, out / "07_headline.png", where=model_where), model_where),
        ("07_curves.png", plots.speculation_curves(res, out / "07_curves.png", where=model_where), model_where),
        ("07_best.png", plots.speculation_best(res, out / "07_best.png", where=model_where), model_where),
        ("07_published.png", plots.published_check(checks, out / "07_published.png",
                                                   where=plots.published_where(checks)), "voipmonitor/rtx6kpro"),
    ]


def _written_by_notebooks() -> set[str]:
    names = set()
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        names |= set(re.findall(r'"(\d\d_\w+\.png)"', text))
    return names


def test_every_figure_a_notebook_writes_is_drawn_here():
    from kdtree_lab.lab import plots

    written = _written_by_notebooks()
    assert written == {"03_parity_errors.png", "04_budget_bar.png", "06_roofline.png", "06_speedup.png",
                       "07_headline.png", "07_curves.png", "07_best.png", "07_published.png", "08_margins.png",
                       "08_speed.png"}, written
    drawing = {n for n in dir(plots) if callable(getattr(plots, n)) and not n.startswith("_")
               and n not in ("save_figure", "context_axis", "sweep_where", "published_where", "Path", "Any",
                             "Sequence")}
    assert drawing == {"parity_errors", "roofline", "speedup_vs_length", "speculation_headline",
                       "speculation_curves", "speculation_best", "published_check", "generation_margins",
                       "generation_speed"}, drawing


def test_every_plot_call_in_the_notebooks_says_where_its_numbers_come_from():
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        calls = re.findall(r"plots\.(\w+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)", text)
        for name, args in calls:
            if name not in ("sweep_where", "published_where"):
                assert "where=" in args, (nb.name, name, args)


def test_every_figure_the_notebooks_write_reads_clean(tmp_path):
    from kdtree_lab.lab.report import figure_text

    figures = _figures(tmp_path)
    assert {name for name, _, _ in figures} == _written_by_notebooks()  # every one, drawn as its notebook draws it
    for name, fig, where in figures:
        assert figure_problems(fig, where) == [], name
        title, alt = figure_text(tmp_path / name)
        assert where in title and alt.startswith(title) and len(alt) > len(title) + 20, (name, title, alt)


def _plain_figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([1, 2, 3], [1, 4, 9], label="a series")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("rate (tokens/s)")
    ax.set_title("A figure (this machine)")
    return fig, ax


def test_a_clean_figure_has_no_problems():
    fig, _ = _plain_figure()
    assert figure_problems(fig, where="this machine") == []
    assert figure_alt(fig) == "A figure (this machine). x: context (tokens); y: rate (tokens/s)."


@pytest.mark.parametrize("plant,found", [
    (lambda fig, ax: ax.set_title(""), "no title (a suptitle, or the title of its one panel)"),
    (lambda fig, ax: None, "the title does not say where it was measured ('the H200')"),
    (lambda fig, ax: ax.set_ylabel(""), "panel 1: the y axis has tick labels but no label"),
    (lambda fig, ax: ax.set_ylabel("tokens per second"), "panel 1: the y label 'tokens per second' names no unit"),
    (lambda fig, ax: ax.set_ylabel("tokens per second (one request)"), "names no unit"),
    (lambda fig, ax: ax.set_ylabel("ours / today's best (tokens per second)"), "names no unit"),
    (lambda fig, ax: ax.set_ylabel("ours / today's best (tokens/s)"), "is a ratio in tokens/s (expected x, ratio, %)"),
    (lambda fig, ax: ax.legend(loc="center", fontsize=10, markerscale=3, borderpad=3),
     "the legend of panel 1 (A figure (this machine)) covers its data"),
    (lambda fig, ax: ax.legend(fontsize=6, loc="upper left"), "text 'a series' is 6 pt (at least 7 pt)"),
    (lambda fig, ax: ax.annotate("9x", (2, 4), xytext=(0, 0), textcoords="offset points", ha="center"),
     "annotation '9x' of panel 1 (A figure (this machine)) is drawn over a line or a marker"),
    (lambda fig, ax: ax.barh([5], [0.005], left=[1]), "px wide: a sliver"),
])
def test_each_check_catches_what_it_names(plant, found):
    fig, ax = _plain_figure()
    plant(fig, ax)
    where = "the H200" if "where it was measured" in found else "this machine"
    problems = figure_problems(fig, where)
    assert any(found in p for p in problems), problems


def test_the_executed_notebook_page_carries_each_figure_s_alt_text(tmp_path):
    import base64
    import io

    import nbformat

    from kdtree_lab.lab.report import notebook_html

    fig, _ = _plain_figure()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": data},
                                           metadata={"image/png": {"alt": figure_alt(fig)}}),
                    nbformat.v4.new_output("display_data", data={"image/png": data})]
    nb.cells = [cell]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, str(path))
    page = notebook_html(path).read_text()
    assert 'alt="A figure (this machine). x: context (tokens); y: rate (tokens/s)."' in page
    assert 'alt="a figure (no description recorded)"' in page  # an image no plotting function made


def test_the_run_index_shows_each_figure_with_its_title_and_alt_text(tmp_path):
    from kdtree_lab.core.display import save_figure
    from kdtree_lab.lab.report import write_index

    fig, _ = _plain_figure()
    save_figure(fig, tmp_path / "09_plain.png")
    page = write_index(tmp_path, "cpu", []).read_text()
    assert '<a href="09_plain.png">A figure (this machine)</a>' in page
    assert 'alt="A figure (this machine). x: context (tokens); y: rate (tokens/s)."' in page


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
