"""scripts/fixed_cost_compare.py: the table the fixed-cost device calls print, from fixed_cost.py's JSON (no GPU)."""

import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
fcc = importlib.import_module("fixed_cost_compare")


def _run(marginals: dict[tuple, float | None], e2e: float = 0.03) -> dict:
    rows = []
    for (impl, n, length), m in marginals.items():
        row = {"impl": impl, "kv": "fp8", "B": 1, "L": length, "N": n, "H": 8, "nsplit": 131, "auto": True, "ms": e2e}
        if m is not None:
            row["marginal_ms"] = m
        rows.append(row)
        rows.append(dict(row, nsplit=8, auto=False, ms=1.0))  # a fixed split count: not an automatic-split row
    return {"rows": rows}


def test_each_automatic_row_with_every_runs_times_and_its_difference_from_the_first():
    main = _run({("a", 4, 128): 0.0142, ("a", 4, 4096): 0.0171})
    patch = _run({("a", 4, 128): 0.0125, ("a", 4, 4096): None}, e2e=0.028)
    rows = fcc.compare([("main", main), ("pdl", patch)])
    assert len(rows) == 2
    first = rows[0]
    assert first["main e2e"] == "30.0" and first["main marginal"] == "14.2"
    assert first["pdl e2e"] == "28.0" and first["pdl marginal"] == "12.5" and first["pdl - main"] == "-1.7"
    assert rows[1]["pdl marginal"] == "-" and rows[1]["pdl - main"] == "-"


def test_a_row_the_later_run_lacks_is_shown_as_missing():
    rows = fcc.compare([("main", _run({("a", 4, 128): 0.01})), ("other", _run({("b", 4, 128): 0.01}))])
    assert rows[0]["other e2e"] == "-" and rows[0]["other - main"] == "-"


def test_the_committed_run_against_itself_differs_by_zero(capsys):
    path = ROOT / "data/results/h200/2026-12-03-e4m3-32/call7-fixed-cost/fixed-cost.json"
    assert fcc.main([str(path), str(path), "--markdown"]) == 0
    out = capsys.readouterr().out
    body = [line for line in out.splitlines() if line.startswith("| cuda")]
    assert body and all(line.rstrip(" |").endswith("+0.0") for line in body)
    assert "fixed-cost#2 marginal" in out


def test_a_file_that_is_not_a_run_is_named_in_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"a": 1}))
    assert fcc.main([str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "x.json: expected a fixed_cost.py JSON file" in err
