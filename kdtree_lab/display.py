"""Small display helpers for notebooks: markdown tables that also read well as plain text in headless runs."""

from __future__ import annotations

from typing import Any, Sequence


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
