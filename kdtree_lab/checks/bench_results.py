"""Post-processing of benchmark results: per-implementation summaries, fp8-vs-bf16 speed-ups, streaming rates
separated from the fixed cost per call, and re-crediting old rows with their implementation's own work."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..core.paths import RESULTS, ROOT
from .roofline import ONE_TOKEN, Shape, derived, row_kv

MEASURED_ON = "h200"  # the GPU every committed grid ran on (data/results/h200/)


def summary(rows: list[dict]) -> list[dict]:
    """One line per implementation: shapes timed, roofline fraction (worst / median / best), median speed-up over
    SGLang's verify."""
    out = []
    for impl, kv in sorted({(r["impl"], row_kv(r)) for r in rows}):
        mine = [r for r in rows if r["impl"] == impl and row_kv(r) == kv]
        roof = sorted(r["of_roofline"] for r in mine)
        up = [r["speedup_vs_sglang_verify"] for r in mine if "speedup_vs_sglang_verify" in r]
        out.append({"impl": impl if kv == "bf16" else f"{impl} ({kv} KV)", "shapes": len(mine), "of roofline: worst": roof[0],
                    "median": statistics.median(roof), "best": roof[-1],
                    "median speed-up vs SGLang verify": statistics.median(up) if up else None})
    return out


def fp8_speedups(rows: list[dict]) -> list[dict]:
    """Per implementation and shape timed over both pools: the time over a bf16 pool / the time over an fp8 pool
    (issue 17's targets: >= 1.7 on memory-bound shapes, >= 1 on compute-bound ones) and the fp8 row's bound."""
    by = {(r["impl"], r["B"], r["L"], r["N"], r["H"], row_kv(r)): r for r in rows}
    out = []
    for (impl, b, length, n, h, kv), r in sorted(by.items()):
        base = by.get((impl, b, length, n, h, "bf16"))
        if kv == "fp8" and base:
            out.append({"impl": impl, "B": b, "L": length, "N": n, "H": h, "bf16 ms": base["ms"], "fp8 ms": r["ms"],
                        "bf16 / fp8": round(base["ms"] / r["ms"], 3), "bound (fp8)": r["bound"]})
    return out


def streaming_fits(rows: list[dict], ceilings: dict, impl: str = "cuda", min_points: int = 2) -> list[dict]:
    """Per (B, N, H) series of ``impl`` (bf16 rows) timed at ``min_points`` or more prefix lengths: the model
    ``t(L) = fixed + KV bytes(L) / rate``, least squares over the series' points with ``fixed >= 0`` (a series whose
    best line would start below zero, i.e. whose time grows faster than its bytes, is fitted through zero and shows
    no fixed cost). Returns the streaming rates (GB/s, TFLOP/s, and as fractions of the ceilings), ``fixed_us`` (the
    part of a call the prefix length does not explain) and ``worst_misfit`` (the largest |model - measured| /
    measured over the points). Separates a kernel's per-token speed from its fixed cost per call."""
    series: dict[tuple[int, int, int], list[tuple[int, float]]] = {}
    for r in rows:
        if r["impl"] == impl and row_kv(r) == "bf16":
            series.setdefault((r["B"], r["N"], r["H"]), []).append((r["L"], r["ms"]))
    out = []
    for (b, n, h), pts in sorted(series.items()):
        pts = sorted(set(pts))
        if len(pts) < min_points:
            continue
        x = [Shape(b, length, n, h).kv_bytes for length, _ in pts]
        t = [ms * 1e-3 for _, ms in pts]
        mx, mt = statistics.fmean(x), statistics.fmean(t)
        sxx = sum((xi - mx) ** 2 for xi in x)
        slope = sum((xi - mx) * (ti - mt) for xi, ti in zip(x, t)) / sxx if sxx else 0.0
        fixed = mt - slope * mx
        if fixed < 0 or slope <= 0:  # fixed >= 0: the least-squares line through the origin
            fixed, slope = 0.0, sum(xi * ti for xi, ti in zip(x, t)) / sum(xi * xi for xi in x)
        gbps = 1 / slope / 1e9
        flops_per_byte = Shape(b, pts[-1][0], n, h).flops / x[-1]
        misfit = max(abs(fixed + xi * slope - ti) / ti for xi, ti in zip(x, t))
        out.append({"B": b, "N": n, "H": h, "lengths": len(pts), "GB/s": round(gbps, 1),
                    "of_copy": round(gbps / ceilings["copy_gbps"], 3), "TFLOP/s": round(gbps * flops_per_byte / 1e3, 2),
                    "of_gemm": round(gbps * flops_per_byte / 1e3 / ceilings["gemm_tflops"], 3),
                    "fixed_us": round(fixed * 1e6, 1), "worst_misfit": round(misfit, 3)})
    return out


def _same(old, new) -> bool:
    """Equal, or equal up to the rounding of a value recomputed from a time rounded to 3 significant digits (GB/s
    82.7 vs 82.6, of_roofline 0.152 vs 0.151: up to ~0.7%); a row credited with the wrong work is off by N >= 4x."""
    if isinstance(old, float) and isinstance(new, float):
        return abs(old - new) <= 1e-2 * max(abs(old), abs(new), 1e-9)
    return old == new


def recredit(result: dict) -> int:
    """Recompute every row's rates and roofline fraction from its time and its implementation's own work (results
    written before one-token decode rows were credited with one token). Returns how many rows changed."""
    changed = 0
    for r in result["rows"]:
        if r["impl"] not in ONE_TOKEN:
            continue  # credited with their own work already (recomputing from the rounded ms would only jitter)
        new = derived(r["impl"], Shape(r["B"], r["L"], r["N"], r["H"], r.get("mask", "tree")), r["ms"],
                      result["ceilings"])
        if any(not _same(r.get(k), v) for k, v in new.items()):
            r.update(new)
            changed += 1
    return changed


def recredit_words(changed: int) -> str:
    """What ``recredit`` did, in a sentence for a reader."""
    if not changed:
        return "Every row is credited with its own work (SGLang's one-token decode with one token per request)."
    return (f"{changed} rows of SGLang's one-token decode had been credited with the work of the N draft tokens of "
            "the verify rows beside them; their rates and roofline shares are recomputed here for one token per "
            "request (the times are as measured).")


def sources_words(result: dict) -> str:
    """Which committed file each implementation of ``committed_current`` came from, one clause per file."""
    by: dict[str, list[str]] = {}
    for impl, path in result["sources"].items():
        by.setdefault(path, []).append(impl)
    return "; ".join(f"{', '.join(impls)} from {path}" for path, impls in by.items())


@dataclass(frozen=True)
class Grid:
    """One implementation's rows of one benchmark run, with that run's ceilings."""

    impl: str
    source: str  # repository-relative path, or "measured in this run"
    date: str
    gpu: str
    ceilings: dict
    rows: tuple[dict, ...]


ISSUE_PRESETS = ("issue", "issue-fp8")  # the issue grid (bf16) and its fp8 rows: what the tables' grids are


def _issue_grids(presets: tuple[str, ...] = ISSUE_PRESETS) -> list[tuple[str, Path, dict]]:
    """(date, path, data) of every committed benchmark file of one of ``presets`` (by default the ``issue`` preset
    or its fp8 rows, ``issue-fp8``), newest first."""
    out = []
    for path in sorted((RESULTS / MEASURED_ON).rglob("bench-*.json")):
        if path.name.endswith(".partial.json"):
            continue
        data = json.loads(path.read_text())
        if data.get("preset") in presets and "provenance" in data:
            out.append((data["provenance"].get("date_utc", ""), path, data))
    return sorted(out, key=lambda t: (t[0], str(t[1])), reverse=True)


def committed_grid(impl: str, kv: str = "bf16", presets: tuple[str, ...] = ISSUE_PRESETS) -> Grid:
    """The newest committed grid of one of ``presets`` (by default the issue grid) holding ``kv``-pool rows of
    ``impl`` (so a newly committed run of a default kernel is picked up without a code change). Raises LookupError
    naming the implementation when none does."""
    for date, path, data in _issue_grids(presets):
        rows = tuple(r for r in data["rows"] if r["impl"] == impl and r.get("kv", "bf16") == kv)
        if rows:
            return Grid(impl, str(path.relative_to(ROOT)), date, data["provenance"].get("gpu", MEASURED_ON),
                        data["ceilings"], rows)
    pool = "" if kv == "bf16" else f" over an {kv} pool"
    raise LookupError(f"impl {impl}: no committed {' or '.join(presets)} grid under data/results/{MEASURED_ON}/ "
                      f"holds its rows{pool}")


CURRENT = ("cuda", "cuda_wgmma", "cuda_sm120", "cuda_sm120_roles", "sglang_extend", "sglang_decode_1tok")  # defaults, peers


def committed_current(impls: tuple[str, ...] = CURRENT) -> dict:
    """A result of the ``issue`` preset made of each implementation's newest committed grid (``committed_grid``):
    ``cuda`` is then the current default's run. Rows keep their own run's rates and roofline fraction; speed-ups
    over SGLang's verify are recomputed against its newest rows, run beside or in another run on the same GPU
    (``sources`` says which file each implementation came from). The ceilings are those of the first grid."""
    grids = [committed_grid(i) for i in impls]
    verify = {(r["B"], r["L"], r["N"], r["H"]): r["ms"] for g in grids if g.impl == "sglang_extend" for r in g.rows}
    rows = []
    for g in grids:
        for r in g.rows:
            r = dict(r)
            r.pop("speedup_vs_sglang_verify", None)
            base = verify.get((r["B"], r["L"], r["N"], r["H"]))
            if base and r["impl"] != "sglang_extend":
                r["speedup_vs_sglang_verify"] = round(base / r["ms"], 1)
            rows.append(r)
    return {"preset": "issue", "ceilings": grids[0].ceilings, "sglang": "0.5.23", "timing": "graph", "rows": rows,
            "sources": {g.impl: g.source for g in grids}}
