"""The card model (``card_model``) against every published sm_120 measurement of a kernel that also runs on Hopper:
``data/published/sm120_checks.yaml`` holds each figure with its source and conditions, the H200 input it is
predicted from, the prediction and the ratio measured / predicted; ``python -m kdtree_lab.speculate.card_checks
--write`` recomputes the computed fields, tests/test_card_checks.py holds the file to them.

``error_band(card)`` is the spread of those ratios that a prediction for ``card`` carries: the card's own checks,
plus, for a bound (bytes, tensor, issue) none of its checks is bound by, the other cards' checks of that bound (the
SM's instruction stream is the same silicon on both cards).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from functools import lru_cache

import yaml

from ..core.paths import DATA, ROOT
from . import card_model as cm

CHECKS = DATA / "published" / "sm120_checks.yaml"
COMPUTED = ("h200_ms", "measured_ms", "predicted_ms", "bound", "ratio")  # the fields --write recomputes
DIGITS = 4  # significant digits the computed fields are written with


@dataclass(frozen=True)
class Check:
    """One published measurement and the model's prediction of it (ms)."""

    id: str
    card: str
    kernel: str
    source: str
    conditions: str
    measured_ms: float
    h200_ms: float
    h200_source: str
    prediction: cm.Prediction

    @property
    def ratio(self) -> float:
        """measured / predicted: what the prediction must be multiplied by to land on the measurement."""
        return self.measured_ms / self.prediction.ms

    @property
    def miss(self) -> float:
        """The factor the prediction is off by, either way (>= 1)."""
        return max(self.ratio, 1 / self.ratio)


def _round(x: float) -> float:
    return float(f"{x:.{DIGITS}g}")


def _where() -> str:
    return str(CHECKS.relative_to(ROOT)) if CHECKS.is_relative_to(ROOT) else str(CHECKS)


def _fail(entry: dict, what: str) -> cm.CardModelError:
    return cm.CardModelError(f"{_where()}: check {entry.get('id', '?')}: {what}")


def _work(entry: dict) -> cm.Work:
    w = entry["work"]
    if "gemm" in w:
        m, n, k = w["gemm"]
        return cm.Work(2 * (m * k + k * n + m * n), 2.0 * m * n * k, w.get("kind", "bf16"))
    if "decode" in w:
        d = w["decode"]
        work = cm.verify_work("sglang_decode_1tok", d["B"], d["L"], 1, d["H"], d.get("kv", "bf16"))
        return work
    raise _fail(entry, f"work: expected gemm or decode, found {sorted(w)}")


def _measured_ms(entry: dict, work: cm.Work) -> float:
    m = entry["measured"]
    if "ms" in m:
        return float(m["ms"])
    if "us" in m:
        return float(m["us"]) / 1e3
    if "it_per_s" in m:
        return 1e3 / float(m["it_per_s"])
    if "tflops" in m:
        return work.flops / (float(m["tflops"]) * 1e12) * 1e3
    raise _fail(entry, f"measured: expected ms, us, it_per_s or tflops, found {sorted(m)}")


def _h200(entry: dict, work: cm.Work) -> tuple[float, str]:
    """(the H200 time of the same work, its source)."""
    h = entry["h200"]
    path = ROOT / h["run"]
    if not path.exists():
        raise _fail(entry, f"h200.run: {h['run']} is not committed")
    data = json.loads(path.read_text())
    if "ceiling" in h:
        rate = data["ceilings"][h["ceiling"]]
        return work.flops / (rate * 1e12) * 1e3, f"{h['run']} ceilings.{h['ceiling']} ({rate:.1f} TFLOP/s)"
    if "impl" in h:
        from .kernel_times import KernelTable, _series

        rows = [r for r in data["rows"] if r["impl"] == h["impl"] and r.get("kv", "bf16") == "bf16"]
        table = KernelTable("decode", h["impl"], cm.REFERENCE, False, h["run"], data["ceilings"],
                            _series(rows, lambda r: r["ms"], True))
        d = entry["work"]["decode"]
        ms, extrapolated = table.lookup(d["B"], d["L"], 1, d["H"])
        if extrapolated:
            raise _fail(entry, "h200: the shape lies beyond the run's longest prefix")
        return ms, f"{h['run']} {h['impl']} rows (B {d['B']}, H {d['H']}), interpolated in L and B"
    if "decode_row" in h:  # the same decode kernel at the published shape, pool and split count (one graph replay)
        d, rule = entry["work"]["decode"], h["decode_row"]["splits_rule"]
        kv = d.get("kv", "bf16")
        rows = [r for r in data["decode"] if (r["B"], r["L"], r["H"], r["kv"], r["splits_rule"]) ==
                (d["B"], d["L"], d["H"], kv, rule)]
        if len(rows) != 1:
            raise _fail(entry, f"h200: {h['run']} holds {len(rows)} decode rows of B {d['B']}, L {d['L']}, H {d['H']}, "
                               f"{kv}, {rule} splits (expected 1)")
        return rows[0]["graph_ms"], (f"{h['run']} decode row (B {d['B']}, L {d['L']}, H {d['H']}, {kv}, "
                                     f"{rows[0]['splits']} splits as {rule} chose them), graph replay")
    raise _fail(entry, f"h200: expected ceiling, impl or decode_row, found {sorted(h)}")


def check(entry: dict) -> Check:
    """One entry of the checks file, predicted."""
    work = _work(entry)
    measured = _measured_ms(entry, work)
    h200_ms, h200_src = _h200(entry, work)
    floor = 0.0 if entry["timing"] == "loop" else None  # a back-to-back loop hides the per-call floor
    if entry["timing"] not in ("loop", "alone"):
        raise _fail(entry, f"timing: expected loop or alone, found {entry['timing']!r}")
    # a ceiling is timed in a loop (no floor inside it); a grid row is a graph replay of one call (the floor)
    pred = cm.predict(h200_ms, work, cm.card(entry["card"]), floor_ms=floor,
                      h200_floor_ms=0.0 if "ceiling" in entry["h200"] else None)
    return Check(entry["id"], entry["card"], entry["kernel"], entry["source"], entry["conditions"], measured,
                 h200_ms, h200_src, pred)


def _load() -> dict:
    return yaml.safe_load(CHECKS.read_text())


@lru_cache(maxsize=None)
def checks() -> tuple[Check, ...]:
    """Every check of the committed file, recomputed."""
    return tuple(check(e) for e in _load()["checks"])


def computed(c: Check) -> dict:
    """The fields of a check the file carries as computed (rounded as written)."""
    return {"h200_ms": _round(c.h200_ms), "measured_ms": _round(c.measured_ms), "predicted_ms": _round(c.prediction.ms),
            "bound": c.prediction.bound, "ratio": _round(c.ratio)}


def excluded() -> list[dict]:
    """Published sm_120 measurements found but not checkable, each with why."""
    return list(_load().get("excluded", []))


def worst() -> Check:
    """The check the model misses most (either way)."""
    return max(checks(), key=lambda c: c.miss)


def error_band(card: str, bound: str | None = None) -> tuple[float, float, int]:
    """(lo, hi, checks used): the card's time lies in [predicted x lo, predicted x hi] as far as the checks go. With
    ``bound`` (a Prediction's: bytes, tensor, issue), the checks of predictions bound the same way: the card's own,
    else the other cards' (a bound none of its checks has); else every check the card-level band uses. Without it, the
    card's own checks and, for a bound none of them has, the other cards' checks of it."""
    every = checks()
    if bound is not None:
        same = [c for c in every if c.card == card and c.prediction.bound == bound] or \
            [c for c in every if c.prediction.bound == bound]
        if same:
            ratios = [c.ratio for c in same]
            return min(ratios), max(ratios), len(same)
    mine = [c for c in every if c.card == card]
    seen = {c.prediction.bound for c in mine}
    borrowed = [c for c in every if c.card != card and c.prediction.bound not in seen]
    used = mine + borrowed
    if not used:
        raise cm.CardModelError(f"gpu {card}: no check in {_where()} to carry an error band from")
    ratios = [c.ratio for c in used]
    return min(ratios), max(ratios), len(used)


def write() -> None:
    """Recompute every check's computed fields and write the file back (inputs untouched)."""
    data = _load()
    for e in data["checks"]:
        e.update(computed(check(e)))
    CHECKS.write_text(yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))
    checks.cache_clear()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {_where()}'s computed fields")
    args = ap.parse_args(argv)
    try:
        checks.cache_clear()
        if args.write:
            write()
        for c in checks():
            print(f"{c.id}: measured {c.measured_ms:.4g} ms, predicted {c.prediction.ms:.4g} ms "
                  f"({c.prediction.bound}), ratio {c.ratio:.3g}")
        w = worst()
        print(f"worst miss: {w.id}, {w.miss:.2f}x")
    except (cm.CardModelError, KeyError) as exc:
        print(f"card_checks: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("card_checks: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
