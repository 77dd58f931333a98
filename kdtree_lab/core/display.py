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


class _Counted:
    """A loop's progress as one line when it ends ("parity triton: 66/66 in 95.2 s"), not a frame per update: what a
    stored notebook or a log keeps of it. ``set_postfix`` / ``update`` / ``close`` as tqdm's, for callers that use
    them."""

    def __init__(self, iterable: Iterable | None = None, desc: str | None = None, total: int | None = None,
                 unit: str = "item", **_):
        import time

        self.iterable, self.desc, self.unit, self.n = iterable, desc or "progress", unit, 0
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.postfix, self._t0, self._closed = "", time.perf_counter(), False

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.n += 1
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def close(self) -> None:
        import sys
        import time

        if self._closed:
            return
        self._closed = True
        count = f"{self.n:,}/{self.total:,}" if self.total is not None else f"{self.n:,}"
        done = "" if self.total is None or self.n == self.total else " (stopped early)"
        print(f"{self.desc}: {count} {self.unit}{'' if self.unit.endswith('s') else 's'} in "
              f"{time.perf_counter() - self._t0:,.1f} s{done}" + (f"; {self.postfix}" if self.postfix else ""),
              file=sys.stdout, flush=True)


def progress(iterable: Iterable | None = None, **kwargs):
    """A progress bar: tqdm's widget in an interactive notebook and its bar in a terminal; in headless runs
    (``kdtree-lab run``) one line when the loop ends, with its final count and time."""
    if headless():
        return _Counted(iterable, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


def fmt(v: Any) -> str:
    """A table cell: integers with thousands separators, floats in fixed notation to three significant digits (never
    an exponent), None as "-"."""
    import math

    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return ", ".join(f"{k} {fmt(x)}" for k, x in v.items()) if v else "none"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v).replace("|", "\\|")
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}" if abs(v) >= 1000 or v == round(v) else f"{v:,.1f}"
    decimals = min(9, max(0, 2 - math.floor(math.log10(abs(v)))))
    return f"{v:,.{decimals}f}"


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-markdown table of ``rows`` (dicts), columns in the given order (default: the first row's keys)."""
    if not rows:
        return "_(no rows)_"
    cols = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def aligned_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A plain-text table for a terminal: columns padded to their widest cell, numbers right-aligned."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[fmt(r.get(c, "")).replace("\\|", "|") for c in cols] for r in rows]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows) for c in cols]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells])


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
