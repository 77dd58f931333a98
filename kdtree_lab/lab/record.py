"""Results files: each notebook writes ``<run_dir>/<notebook>.json``; the runner summarises them.

A results dict has free-form keys plus three conventional ones:

- ``figures``: the key numbers the summary table shows (name -> number or short string);
- ``skipped``: a list of ``{"what": ..., "why": ...}`` for work that could not run here;
- ``checks``: a list of ``{"name": ..., "ok": bool, ...}``; any ``ok: False`` fails the notebook.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any


def jsonable(value: Any) -> Any:
    """Convert numpy / torch scalars, paths, dataclasses and non-finite floats to JSON values."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return jsonable(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def save_results(run_dir: str | Path, notebook: str, results: dict[str, Any]) -> None:
    """Write ``results`` (plus a timestamp) to ``<run_dir>/<notebook>.json`` and say so in one sentence with the
    checks passed and the parts skipped (a notebook's last cell: it returns nothing, so no value is displayed)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = dict(results)
    payload.setdefault("notebook", notebook)
    payload.setdefault("written_at", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    payload.setdefault("skipped", [])
    payload.setdefault("figures", {})
    payload.setdefault("checks", [])
    path = run_dir / f"{notebook}.json"
    path.write_text(json.dumps(jsonable(payload), indent=2, sort_keys=True) + "\n")
    checks, skipped = payload["checks"], payload["skipped"]
    passed = sum(bool(c.get("ok")) for c in checks)
    words = [f"{passed} of {len(checks)} checks passed" if checks else "no checks"]
    if skipped:
        words.append(f"{len(skipped)} part{'s' * (len(skipped) > 1)} skipped on this machine "
                     f"({'; '.join(s['what'] for s in skipped)})")
    print(f"Results written to {path}: {', '.join(words)}.")


def load_results(run_dir: str | Path, notebook: str) -> dict[str, Any] | None:
    """Read a notebook's results JSON from ``run_dir``, or None when it was not written."""
    path = Path(run_dir) / f"{notebook}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def skip(what: str, why: str) -> dict[str, str]:
    """One entry of a results file's ``skipped`` list; says where it is called, in a sentence, what was skipped on
    this machine and why (so the executed notebook shows the skip where it happened)."""
    from ..core.display import note

    note(f"**Skipped on this machine: {what}.** {why[0].upper() + why[1:]}.")
    return {"what": what, "why": why}


def emit(args, data, text: str) -> None:
    """Print ``data`` as JSON when the command was given ``--json``, else the human ``text`` (CLI commands)."""
    if getattr(args, "json", False):
        print(json.dumps(jsonable(data), indent=2))
    else:
        print(text)
