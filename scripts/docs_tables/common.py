"""What every table uses: reading a run's rows by shape, paths relative to the repository, the timing sentence,
spans of values, the shape classes the targets name and the targets table's layout."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from kdtree_lab.checks.bench_results import ISSUE_PRESETS, Grid, committed_grid
from kdtree_lab.core.paths import ROOT

from .runs import H200_BENCH


# The shape classes the targets name (keys (B, L, N, H) of _bench's by_shape): long prefixes, H x N <= 64
# memory-bound, >= 128 compute-bound; issue 15's and 18's memory-bound targets also ask B >= 8.
def _long_memory_bound(key: tuple[int, int, int, int], min_batch: int = 1) -> bool:
    b, length, n, h = key
    return length >= 32_768 and n * h <= 64 and b >= min_batch


def _long_compute_bound(key: tuple[int, int, int, int]) -> bool:
    b, length, n, h = key
    return length >= 32_768 and n * h >= 128


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _bench(path: Path = H200_BENCH) -> tuple[dict, dict]:
    data = json.loads(path.read_text())
    by_shape: dict = {}
    for r in data["rows"]:
        by_shape.setdefault((r["B"], r["L"], r["N"], r["H"]), {})[r["impl"]] = r
    return data, by_shape


@functools.lru_cache(maxsize=None)
def grid_rows(impl: str, kv: str = "bf16", presets: tuple[str, ...] = ISSUE_PRESETS) -> tuple[Grid, dict]:
    """The newest committed grid of one of ``presets`` holding ``kv``-pool rows of ``impl``
    (``bench_results.committed_grid``: LookupError where none does) and its rows by (B, L, N, H). Cached for the
    process (the committed files do not change while the tables are made); the rows are not to be changed."""
    g = committed_grid(impl, kv, presets)
    return g, {(r["B"], r["L"], r["N"], r["H"]): r for r in g.rows}


def _timing_words(data: dict) -> str:
    if data.get("timing") == "graph":
        return ("CUDA-graph replays of one call timed with CUDA events, i.e. the GPU time of a call as SGLang runs "
                "verify, without host launch overhead")
    return "eager calls timed with CUDA events (host launch overhead included)"


def _span(values: list[float], fmt: str) -> str:
    return f"{min(values):{fmt}} to {max(values):{fmt}}"


def _target_lines(source: str, rows: list[tuple[str, str, str]]) -> str:
    """A targets table: a source line, then (target, measured, met or not) rows."""
    lines = [source, "", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    return "\n".join(lines)
