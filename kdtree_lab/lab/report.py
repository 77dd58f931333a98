"""A run as HTML: ``runs/<id>/index.html`` holds the summary (status, time, key figures and what was skipped, per
notebook) and links each executed notebook rendered to ``<notebook>.html`` by nbconvert, so a run can be looked at
in a browser without Jupyter. ``write_index`` is called by the runner after every run, failed or interrupted."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..core.display import fmt

_STATUS_COLOUR = {"passed": "#1a7f37", "passed-with-skips": "#9a6700", "failed": "#cf222e", "interrupted": "#cf222e",
                  "not-run": "#57606a"}
_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#1f2328}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #d0d7de;padding:.35em .6em;text-align:left;
vertical-align:top}th{background:#f6f8fa}.status{font-weight:600;white-space:nowrap}code{font-size:90%}ul{margin:0;padding-left:1.2em}"""


TEMPLATES = Path(__file__).parent / "nbconvert_templates"  # kdtree-offline: the lab template, nothing from a CDN


def notebook_html(notebook: Path) -> Path | None:
    """Render an executed notebook to HTML beside it (nbconvert's lab template less its CDN scripts, outputs and
    figures embedded: the page opens offline); None when the file is missing or not a readable notebook (a run
    stopped before papermill wrote it)."""
    import nbformat
    from nbconvert import HTMLExporter

    try:
        nb = nbformat.read(str(notebook), as_version=4)
        exporter = HTMLExporter(template_name="kdtree-offline", extra_template_basedirs=[str(TEMPLATES)])
        body, _ = exporter.from_notebook_node(nb)
    except Exception:  # noqa: BLE001 - a missing, half-written or foreign file: no page, the index says so
        return None
    out = notebook.with_suffix(".html")
    out.write_text(body, encoding="utf-8")
    return out


def _cell(text: Any) -> str:
    return html.escape(fmt(text) if not isinstance(text, str) else text)


def _row(o) -> str:
    page = notebook_html(Path(o.output)) if o.output else None
    name = (f'<a class="notebook" href="{html.escape(page.name)}">{html.escape(o.notebook)}</a>' if page
            else html.escape(o.notebook) + ("" if o.status == "not-run" else " (no executed notebook)"))
    json_link = Path(o.output).with_suffix(".json") if o.output else None
    if json_link and json_link.exists():
        name += f' &middot; <a href="{html.escape(json_link.name)}">results JSON</a>'
    figures = "".join(f"<li>{_cell(k)}: {_cell(v)}</li>" for k, v in o.figures.items())
    skipped = "".join(f'<li class="skip"><b>{_cell(s["what"])}</b>: {_cell(s["why"])}</li>' for s in o.skipped)
    status = f'<span class="status" style="color:{_STATUS_COLOUR.get(o.status, "#1f2328")}">{o.status}</span>'
    if o.error:
        status += f'<br><span class="error">{html.escape(o.error)}</span>'
    return (f'<tr data-notebook="{html.escape(o.notebook)}" data-status="{o.status}"><td>{name}</td><td>{status}</td>'
            f"<td>{o.duration_s:,.1f}</td><td><ul>{figures}</ul></td><td><ul>{skipped}</ul></td></tr>")


def notes(outcomes: list) -> list[str]:
    """The sentences under a run's summary (file, page and terminal): what passed-with-skips means, when a notebook
    skipped something; that the run was interrupted, when it was."""
    out = []
    if any(o.skipped for o in outcomes):
        out.append("A notebook that passed-with-skips did everything this machine allows; what it skipped is listed "
                   "beside it and is not a pass.")
    if any(o.status == "interrupted" for o in outcomes):
        out.append("This run was interrupted (Ctrl-C): the notebooks after the interrupted one did not run.")
    return out


def figure_text(png: Path) -> tuple[str, str]:
    """(title, description) a figure was saved with (``core.display.save_figure``: the PNG's Title and Description
    fields); the file's name and "" for a PNG without them."""
    from PIL import Image

    try:
        with Image.open(png) as im:
            text = dict(getattr(im, "text", {}) or {})
    except OSError:
        text = {}
    return text.get("Title") or png.stem, text.get("Description", "")


def _picture(png: Path) -> str:
    """One figure of the run: its title, linked, over the image with its description as the alt text."""
    title, alt = figure_text(png)
    return (f'<li><a href="{html.escape(png.name)}">{html.escape(title)}</a><br><img src="{html.escape(png.name)}" '
            f'alt="{html.escape(alt or title)}" style="max-width:100%"></li>')


def write_index(run_dir: Path, profile: str, outcomes: list) -> Path:
    """``run_dir/index.html``: one row per notebook (linked to its HTML page and results JSON), its status, seconds,
    key figures and each skipped part with the reason, and the figures (PNG) the run saved."""
    rows = "".join(_row(o) for o in outcomes)
    pictures = "".join(_picture(p) for p in sorted(run_dir.glob("*.png")))
    sentences = [html.escape(n) for n in notes(outcomes)]
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kdtree-lab run ({html.escape(profile)})</title>
<style>{_STYLE}</style></head><body>
<h1>kdtree-lab run ({html.escape(profile)})</h1>
<p>Run directory: <code>{html.escape(str(run_dir))}</code>. Each notebook links to its executed copy rendered as HTML
(outputs and figures included) and to the JSON it wrote.</p>
<table id="summary"><thead><tr><th>notebook</th><th>status</th><th>seconds</th><th>key figures</th><th>skipped here, and
why</th></tr></thead><tbody>{rows}</tbody></table>
{''.join(f'<p class="note">{n}</p>' for n in sentences)}
{f'<h2>Figures</h2><ul>{pictures}</ul>' if pictures else ''}
</body></html>
"""
    out = run_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out
