"""Compare runs of scripts/fixed_cost.py (no GPU needed): per automatic-split row (impl, pool, N, L) each run's time of
one call in its own graph (end to end) and its marginal cost inside a graph of calls (--repeat), in us, and each
run's difference from the first. What the device calls of docs/experiments/ that alternate main and a change
(split-pdl, call-halves, short-splits, indptr-loads-first) print their results with.

    python3 scripts/fixed_cost_compare.py main-1.json pdl-1.json main-2.json pdl-2.json [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kdtree_lab.core.display import aligned_table, markdown_table  # noqa: E402


def auto_rows(run: dict) -> dict[tuple, dict]:
    """(impl, kv, N, L) -> the run's automatic-split row."""
    return {(r["impl"], r["kv"], r["N"], r["L"]): r for r in run["rows"] if r.get("auto")}


def compare(named: list[tuple[str, dict]]) -> list[dict]:
    """One row per (impl, kv, N, L) of the first run: each run's end-to-end and marginal us ('-' where the run lacks
    the row or its marginal) and, for the runs after the first, the marginal's difference from the first's."""
    runs = [(name, auto_rows(run)) for name, run in named]
    base_name, base = runs[0]
    out = []
    for key, b in base.items():
        impl, kv, n, length = key
        row = {"impl": impl, "kv": kv, "N": n, "L": length, "nsplit": b["nsplit"]}
        for name, rows in runs:
            r = rows.get(key)
            row[f"{name} e2e"] = f"{1000 * r['ms']:.1f}" if r else "-"
            m = r.get("marginal_ms") if r else None
            row[f"{name} marginal"] = f"{1000 * m:.1f}" if m is not None else "-"
            if name != base_name:
                bm = b.get("marginal_ms")
                row[f"{name} - {base_name}"] = f"{1000 * (m - bm):+.1f}" if m is not None and bm is not None else "-"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="fixed_cost.py JSON files, the first the baseline")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for docs) instead of aligned text")
    a = ap.parse_args(argv)
    named = []
    for i, path in enumerate(a.runs):
        name = path.stem if path.stem not in {n for n, _ in named} else f"{path.stem}#{i + 1}"
        try:
            named.append((name, json.loads(path.read_text())))
        except (OSError, ValueError) as exc:
            print(f"{path}: expected a fixed_cost.py JSON file, found {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        if "rows" not in named[-1][1]:
            print(f"{path}: expected a fixed_cost.py JSON file (a 'rows' list), found keys "
                  f"{', '.join(named[-1][1]) or 'none'}", file=sys.stderr)
            return 2
    rows = compare(named)
    print(markdown_table(rows) if a.markdown else aligned_table(rows, title="fixed cost per call (us)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
