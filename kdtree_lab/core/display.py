"""Small display helpers for notebooks: markdown tables that also read well as plain text in headless runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Sequence

HEADLESS_ENV = "KDTREE_HEADLESS"  # set by kdtree-lab run for the notebook kernels it starts


def headless() -> bool:
    """True inside a notebook that ``kdtree-lab run`` executes: nobody watches widgets there and papermill does not
    save their state, so a progress widget would be stored as its first frame ("0/67") or an empty Output()."""
    return os.environ.get(HEADLESS_ENV) == "1"


def progress(iterable: Iterable, **kwargs):
    """A tqdm progress bar: a widget in an interactive notebook, plain text in headless runs and terminals."""
    if headless():
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, **kwargs)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-markdown table of ``rows`` (dicts), columns in the given order (default: the first row's keys)."""
    if not rows:
        return "_(no rows)_"
    cols = list(columns or rows[0].keys())

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def show(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str | None = None) -> None:
    """Display a markdown table in Jupyter (and print it, so papermill's output notebook keeps the text)."""
    text = (f"**{title}**\n\n" if title else "") + markdown_table(rows, columns)
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # outside IPython
        print(text)


def save_figure(fig, path: str | Path | None):
    """Save a matplotlib ``fig`` as a PNG at ``path`` (creating its folder) when a path is given; return the figure."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


def note(text: str) -> None:
    """Display markdown prose in Jupyter (printed outside IPython)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # outside IPython
        print(text)
