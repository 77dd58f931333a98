"""Correct committed benchmark files in place: every row's rates, floor and roofline fraction recomputed from its
time and its implementation's own work (``bench_results.recredit``: SGLang's one-token decode rows credited with
one token per request, not the N draft tokens of the verify rows beside them). Times are not touched.

    python scripts/recredit_results.py data/results/h200/<folder>/bench-issue.json ...

Prints how many rows each file had wrong; the folder's README says the file was corrected and how."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kdtree_lab.checks.bench_results import recredit


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        text = path.read_text()
        data = json.loads(text)
        changed = recredit(data)
        if changed:  # in the file's own indentation, so that the diff shows only the corrected fields
            indent = len(text.split("\n", 2)[1]) - len(text.split("\n", 2)[1].lstrip())
            path.write_text(json.dumps(data, indent=indent) + ("\n" if text.endswith("\n") else ""))
        print(f"{path}: {changed} rows re-credited")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
