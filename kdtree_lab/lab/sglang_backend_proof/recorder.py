"""The result JSON, rewritten after every row, and the hook's call counts a row reads."""

from __future__ import annotations

import json
import os
from pathlib import Path


class Recorder:
    """The result JSON, rewritten (atomically) after every row, so that a run cut off mid-way still leaves its
    rows and a summary whose status says it did not finish."""

    def __init__(self, path: Path | None, meta: dict):
        self.path = Path(path) if path else None
        self.data = {**meta, "status": "running (a run cut off here did not finish)", "phases": {}, "summary": {},
                     "seconds": {}}
        self.flush()

    def row(self, phase: str, row: dict) -> dict:
        self.data["phases"].setdefault(phase, []).append(row)
        self.flush()
        return row

    def seconds(self, phase: str, s: float) -> None:
        self.data["seconds"][phase] = round(self.data["seconds"].get(phase, 0.0) + s, 2)
        self.flush()

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.flush()

    def summary(self) -> dict:
        out = {}
        for phase, rows in self.data["phases"].items():
            for r in rows:
                key = f"{phase} {r.get('config', '')}".strip()
                s = out.setdefault(key, {"rows": 0, "ok": 0, "mismatches": 0, "calls": 0, "served": 0,
                                         "fell_back": 0})
                s["rows"] += 1
                s["ok"] += bool(r["ok"])
                s["mismatches"] += r.get("mismatches", 0 if r["ok"] else 1)
                for f in ("calls", "served", "fell_back"):
                    s[f] += r.get(f, 0)
        return out

    def flush(self) -> None:
        self.data["summary"] = self.summary()
        self.data["ok"] = bool(self.data["phases"]) and all(s["ok"] == s["rows"] for s in self.data["summary"].values())
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)


def stats(hook) -> dict:
    """The hook's call counts so far."""
    return {"calls": hook.stats.calls, "served": hook.stats.served, "fell_back": hook.stats.fell_back}


def delta(before: dict, hook) -> dict:
    """The hook's calls since ``before`` (a :func:`stats`)."""
    now = stats(hook)
    return {k: now[k] - before[k] for k in now}
