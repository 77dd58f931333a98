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
                 unit: str = "item", file=None, **_):
        import time

        self.iterable, self.desc, self.unit, self.n, self.file = iterable, desc or "progress", unit, 0, file
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.postfix, self._t0, self._closed = "", time.perf_counter(), False

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.n += 1
        except GeneratorExit:  # the loop was left (Ctrl-C in its body, a break): no count for a loop nobody finished
            self._closed = True
            raise
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
              file=self.file or sys.stdout, flush=True)


def progress(iterable: Iterable | None = None, **kwargs):
    """A progress bar: tqdm's widget in an interactive notebook and its bar in a terminal; in headless runs
    (``kdtree-lab run``) one line on stdout when the loop ends, with its final count and time; outside a notebook
    with stderr not a terminal (a log, a pipe) that line on stderr, not a bar redrawn with carriage returns."""
    import sys

    if headless():
        return _Counted(iterable, **kwargs)
    if "ipykernel" not in sys.modules and not sys.stderr.isatty():
        return _Counted(iterable, file=sys.stderr, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


def fmt(v: Any) -> str:
    """A table cell: integers with thousands separators, floats in fixed notation to three significant digits (never
    an exponent), True / False as yes / no, None as "-"."""
    import math

    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return ", ".join(f"{k} {fmt(x)}" for k, x in v.items()) if v else "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)):
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


def console(stderr: bool = False, **kwargs):
    """A rich Console for a terminal line or table. A broken pipe (``kdtree-lab ... | head``) raises
    BrokenPipeError here, as a plain print would (rich's own handling exits 1 on the spot, before a run could write
    its summary); ``cli.main`` then ends the command quietly."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError("the reader of the output went away")

    return _Console(stderr=stderr, **kwargs)


def terminal_width() -> int:
    """Columns a terminal table may use: $COLUMNS, else the terminal's width, else 120 (a pipe or a log)."""
    import shutil
    import sys

    if os.environ.get("COLUMNS", "").isdigit():
        return max(40, int(os.environ["COLUMNS"]))
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((120, 24)).columns)
    return 120


def paragraph(text: str, width: int | None = None, indent: str = "") -> str:
    """Prose for a terminal: wrapped at spaces to ``width`` (default ``terminal_width()``), continuation lines
    indented by ``indent`` (a launch line or a path is not prose: print it whole)."""
    import textwrap

    return textwrap.fill(text, width or terminal_width(), subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def _unicode_out() -> bool:
    """Whether stdout can print the table's rule (a C-locale terminal or log cannot: ASCII then)."""
    import sys

    try:
        "─".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def aligned_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str | None = None,
                  width: int | None = None) -> str:
    """A table for a terminal, the one style every command prints (rich's, rendered as plain text): a header line
    over its columns, numbers right-aligned, the title (if any) above, left. A table wider than ``width`` (default
    ``terminal_width()``) wraps its text columns (those over 24 characters, widest first, each kept at 20 or more)
    at spaces, never drops or cuts a cell; short columns keep one line."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return (f"{title}\n" if title else "") + "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[fmt(r.get(c, "")).replace("\\|", "|") for c in cols] for r in rows]
    body = [max(max(map(len, row[i].splitlines() or [""])) for row in cells) for i in range(len(cols))]
    sep = 3  # one space of padding either side of the blank rule between columns
    fixed = _fit_widths([max(b, len(str(c))) for b, c in zip(body, cols)],
                        [max(b, *map(len, str(c).split() or [""])) for b, c in zip(body, cols)],
                        (width or terminal_width()) - sep * (len(cols) - 1))
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if _unicode_out() else box.ASCII2,
                  pad_edge=False, show_edge=False, title_style="", header_style="bold",
                  show_lines=any(w < b for w, b in zip(fixed, body)))  # a rule between rows whose cells wrap
    for c, w in zip(cols, fixed):
        numeric = all(_is_number(r.get(c)) for r in rows)
        table.add_column(str(c), justify="right" if numeric else "left", width=w, overflow="fold")
    for row in cells:
        table.add_row(*row)
    out = io.StringIO()
    Console(file=out, width=sum(fixed) + sep * (len(cols) - 1) + 2, color_system=None, highlight=False, markup=False,
            force_jupyter=False, force_terminal=False,  # text, in a notebook too (not rich's own widget there)
            emoji=False, legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())


def _is_number(v: Any) -> bool:
    """A cell a terminal table right-aligns: a number, or text that reads as one ("1.63x", "-4.9%", "1,024")."""
    import re

    if isinstance(v, bool):
        return False
    return isinstance(v, (int, float)) or (isinstance(v, str) and bool(re.fullmatch(r"[-+]?[\d,]*\.?\d+[x%]?", v)))


def _fit_widths(natural: list[int], headed: list[int], room: int, short: int = 24, least: int = 20) -> list[int]:
    """Column widths within ``room`` characters: each column its ``natural`` width when they all fit; else first
    the headers wrap at spaces (``headed``: a column's width with its header's words one a line), then the text
    columns (cells wider than ``short``) narrow, widest first, down to ``least`` each. The table may stay wider
    than the room (a terminal wraps a long line), but a cell is never cut."""
    widths = list(natural)
    over = sum(widths) - room
    for i in sorted(range(len(widths)), key=lambda j: headed[j] - natural[j]):
        if over <= 0:
            break
        cut = min(over, natural[i] - headed[i])
        widths[i] -= cut
        over -= cut
    while over > 0:
        wide = [i for i, w in enumerate(widths) if headed[i] > short and w > least]
        if not wide:
            break
        i = max(wide, key=lambda j: widths[j])
        second = max([widths[j] for j in wide if j != i] + [least])
        cut = min(over, max(widths[i] - second, 1), widths[i] - least)
        widths[i] -= cut
        over -= cut
    return widths


def show(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str | None = None) -> None:
    """Display a markdown table in Jupyter (and print it, so papermill's output notebook keeps the text)."""
    text = (f"**{title}**\n\n" if title else "") + markdown_table(rows, columns)
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # outside IPython
        print(text)


def save_figure(fig, path: str | Path | None):
    """Save a matplotlib ``fig`` as a PNG at ``path`` (creating its folder) when a path is given, its title and
    ``figure_alt`` text in the PNG's Title and Description fields (the run's index.html shows them); inside a
    notebook, show it once with that text as its alt (the executed notebook's HTML page keeps it). Returns the
    figure."""
    alt = figure_alt(fig)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, metadata={"Title": figure_title(fig), "Description": alt})
    _show_with_alt(fig, alt)
    return fig


def _show_with_alt(fig, alt: str) -> None:
    """In a Jupyter kernel: display the figure as a PNG carrying ``alt`` (nbconvert writes it as the image's alt
    text) and close it, so the inline backend does not show it a second time without one."""
    import io
    import sys

    if "ipykernel" not in sys.modules:
        return
    from IPython import get_ipython

    if get_ipython() is None:
        return
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    display(Image(buf.getvalue(), metadata={"alt": alt}))
    plt.close(fig)


def figure_title(fig) -> str:
    """The figure's title: its suptitle, else its panels' titles joined."""
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""  # noqa: SLF001
    panels = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    return " ".join((sup or "; ".join(panels)).split())


def figure_alt(fig) -> str:
    """A figure in words, for a reader who cannot see it: its title, then per panel its title, axes and legend."""
    parts = [figure_title(fig) + "."]
    fig_legends = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        words = [ax.get_title()] if ax.get_title() and len(fig.axes) > 1 else []
        words += [f"{axis}: {label}" for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if label]
        legend = ax.get_legend()
        if legend is not None:
            words.append("series: " + ", ".join(t.get_text() for t in legend.get_texts()))
        if words:
            parts.append("; ".join(words) + ".")
    if fig_legends:
        parts.append("Series: " + ", ".join(fig_legends) + ".")
    return " ".join(" ".join(parts).split())


MIN_FONT_PT = 7.0  # the smallest text a saved figure may hold
SLIVER_PX = 4.0  # a bar segment narrower than this (at the saved size) cannot be told apart
# An axis label's unit: first in its final parentheses ("(tokens)", "(FLOP/B of latent KV)"); a ratio's (a label
# with " / ", a speed-up) is x, ratio or %, never the unit of what it divides ("tokens per second").
UNIT = __import__("re").compile(r"\((tokens/s|tokens|GiB|MiB|GB/s|TB/s|TFLOP/s|FLOP/B|ms|s|x|ratio|%|logits)(?:[,;][^()]*|"
                                r" of [^()]*)?\)\s*$")
RATIO_UNITS = ("x", "ratio", "%")


def figure_problems(fig, where: str | None = None) -> list[str]:
    """What a person could not read in ``fig`` as it is saved (same size, no tight cropping). Empty when clean.

    - no title (a suptitle, or the title of its one panel), or one that does not name ``where`` (when given: the
      GPU, model or source the figure shows);
    - a panel axis with tick labels but no label, or a label without its unit in final parentheses
      ("context (tokens)", "speed-up (x)": ``UNIT``);
    - text smaller than MIN_FONT_PT;
    - each visible text (tick labels, titles, annotations) and legend box outside the figure or overlapping
      another one, and an annotation outside its own axes (spilling into the next panel);
    - a legend inside a panel that covers its data (a line, a marker or a bar), and an annotation drawn over a line
      or a marker of its panel;
    - a bar segment narrower than SLIVER_PX pixels (a sliver nobody can read)."""
    import itertools

    from matplotlib.legend import Legend
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = _title_problems(fig, where) + _label_problems(fig)
    legends = [a for a in fig.findobj(Legend) if a.get_visible()]
    skip = {id(t) for leg in legends for t in leg.findobj(Text)}  # a legend is checked as one box
    for ax in fig.axes:  # matplotlib keeps tick labels past the axis limits, undrawn
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 * abs(lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi):
                    skip |= {id(tick.label1), id(tick.label2)}
    shown = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure is not None
             and id(t) not in skip]
    problems += [f"text {t.get_text()!r} is {t.get_fontsize():.0f} pt (at least {MIN_FONT_PT:.0f} pt)"
                 for t in shown + [t for leg in legends for t in leg.get_texts()] if t.get_fontsize() < MIN_FONT_PT]
    boxes = [(f"legend {leg.get_title().get_text() or i}", leg.get_window_extent(renderer))
             for i, leg in enumerate(legends)]
    boxes += [(repr(t.get_text()), Text.get_window_extent(t, renderer)) for t in shown]  # a text, not its arrow
    frame = fig.bbox
    problems += [f"annotation {t.get_text()!r} leaves its axes" for ax in fig.axes for t in ax.texts
                 if t.get_visible() and t.get_text().strip()
                 and not _within(Text.get_window_extent(t, renderer), ax.bbox)]
    problems += [f"{name} leaves the figure ({box.x0:.0f}..{box.x1:.0f} x {box.y0:.0f}..{box.y1:.0f} px of "
                 f"{frame.width:.0f} x {frame.height:.0f})" for name, box in boxes if not _within(box, frame)]
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        overlap_w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        overlap_h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if overlap_w > 1 and overlap_h > 1:
            problems.append(f"{a} overlaps {b}")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        name = f"panel {i + 1}" + (f" ({ax.get_title()})" if ax.get_title() else "")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible() and covers_data(ax, legend.get_window_extent(renderer)):
            problems.append(f"the legend of {name} covers its data")
        for t in ax.texts:
            if t.get_visible() and t.get_text().strip() and covers_data(ax, Text.get_window_extent(t, renderer),
                                                                         bars=False):
                problems.append(f"annotation {t.get_text()!r} of {name} is drawn over a line or a marker")
        problems += [f"a bar of {name} ({p.get_label() or 'unlabelled'}) is {w:.1f} px wide: a sliver"
                     for p, w in _bar_widths(ax) if 0 < w < SLIVER_PX]
    return problems


def _title_problems(fig, where: str | None) -> list[str]:
    title = figure_title(fig)
    sup = getattr(fig, "_suptitle", None)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    if not (sup is not None and sup.get_text().strip()) and not (len(visible) == 1 and visible[0].get_title()):
        return ["no title (a suptitle, or the title of its one panel)"]
    if where and " ".join(where.split()) not in title:
        return [f"the title does not say where it was measured ({where!r}): {title!r}"]
    return []


def _label_problems(fig) -> list[str]:
    """A panel axis whose tick labels show but which has no label, or a label without its unit."""
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:  # a hidden panel, or one that only holds a legend
            continue
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            ticks = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            label = axis.get_label().get_text().strip()
            if not ticks:
                continue
            if not label:
                if any(ax is not other and _shares(ax, other, name) and getattr(other, f"get_{name}label")()
                       for other in fig.axes):  # a shared axis labelled once, on its outer panel
                    continue
                out.append(f"panel {i + 1}: the {name} axis has tick labels but no label")
            elif not (m := UNIT.search(label)):
                out.append(f"panel {i + 1}: the {name} label {label!r} names no unit (expected one in final "
                           "parentheses, e.g. '(tokens)', '(x)')")
            elif (" / " in label[:m.start()] or "speed-up" in label[:m.start()]) and m.group(1) not in RATIO_UNITS:
                out.append(f"panel {i + 1}: the {name} label {label!r} is a ratio in {m.group(1)} (expected "
                           f"{', '.join(RATIO_UNITS)})")
    return out


def _shares(a, b, name: str) -> bool:
    group = a.get_shared_x_axes() if name == "x" else a.get_shared_y_axes()
    return group.joined(a, b)


def covers_data(ax, box, bars: bool = True) -> bool:
    """Whether ``box`` (display pixels, after a draw) lies over a line segment, a marker or (``bars``) a bar of
    ``ax``: what a legend or a label placed there would hide."""
    import numpy as np
    from matplotlib.collections import PathCollection

    def inside(xy) -> bool:
        return bool(np.any((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)))

    for line in ax.lines:
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) and (inside(xy) or any(_segment_hits(p, q, box) for p, q in zip(xy, xy[1:]))):
            return True
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and coll.get_visible() and len(coll.get_offsets()):
            if inside(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float))):
                return True
    if bars:
        for patch, _ in _bar_widths(ax):
            ext = patch.get_window_extent()
            if ext.x0 < box.x1 and ext.x1 > box.x0 and ext.y0 < box.y1 and ext.y1 > box.y0:
                return True
    return False


def _segment_hits(p, q, box) -> bool:
    """Whether the segment p-q (display pixels) crosses the rectangle ``box`` (Liang-Barsky clipping)."""
    (x0, y0), (x1, y1) = p, q
    t0, t1, dx, dy = 0.0, 1.0, x1 - x0, y1 - y0
    for d, lo in ((-dx, x0 - box.x0), (dx, box.x1 - x0), (-dy, y0 - box.y0), (dy, box.y1 - y0)):
        if d == 0:
            if lo < 0:
                return False
            continue
        t = lo / d
        if d < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _bar_widths(ax) -> list:
    """(patch, its smaller side in pixels) for every bar (a Rectangle of a bar container) in ``ax``."""
    out = []
    for container in ax.containers:
        for patch in getattr(container, "patches", []):
            ext = patch.get_window_extent()
            out.append((patch, min(abs(ext.width), abs(ext.height))))
    return out


def _within(box, frame, slack: float = 1.0) -> bool:
    return (box.x0 >= frame.x0 - slack and box.y0 >= frame.y0 - slack and box.x1 <= frame.x1 + slack
            and box.y1 <= frame.y1 + slack)


def as_parameters(message: str, names: dict[str, str]) -> str:
    """A library's one-line refusal ("tp: expected a divisor of 64, got 3") in the words of the caller that set
    the values: each name before the first colon replaced by ``names[name]`` (a flag, "-p tp"), prefixed
    "argument" as argparse's own lines are, "got X" as "found X" and a Python list of names as a plain one."""
    import re

    head, sep, rest = message.partition(":")
    if not sep:
        return message
    named = False
    for name in sorted(names, key=len, reverse=True):
        head, n = re.subn(rf"(?<![-\w]){re.escape(name)}(?!\w)", names[name], head)
        named = named or bool(n)
    if named and not head.startswith("argument"):
        head = ("arguments " if " and " in head or "/" in head else "argument ") + head
    rest = re.sub(r"\[('[^'\]]*'(?:, '[^'\]]*')*)\]", lambda m: m.group(1).replace("'", ""), rest)
    return head + sep + re.sub(r"\bgot\b", "found", rest)


def note(text: str) -> None:
    """Display markdown prose in Jupyter (printed outside IPython)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # outside IPython
        print(text)
