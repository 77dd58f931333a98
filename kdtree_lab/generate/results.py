"""The committed H200 generation results and the views notebook 08 shows of any result: speed by context (ours
against SGLang's verify in the same loop) and the reference margins with the mismatches among them."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.paths import ROOT

COMMITTED = ROOT / "data" / "results" / "h200" / "2026-12-04-generation"
# the runs timed after every batch size was captured (or compiled) before the first timed step: what speed reads
TIMED = ("h8-bf16-contexts", "h8-fp8-contexts", "h8-fp8-eagle-long", "h16-h64-32k")


def committed(folder: Path = COMMITTED, only: tuple[str, ...] | None = None) -> list[dict]:
    """Every run of every ``generation.json`` under ``folder`` (the newest committed H200 results; ``only``: these
    subfolders), each with the file it came from as ``source``."""
    runs = []
    for path in sorted(folder.glob("*/generation.json")):
        if only is not None and path.parent.name not in only:
            continue
        data = json.loads(path.read_text())
        for run in data["runs"]:
            runs.append(run | {"source": str(path.relative_to(ROOT)), "layers": data["spec"]["layers"]})
    return runs


def speed_rows(runs: list[dict]) -> list[dict]:
    """Per (H, pool, draft, context) with both ours and SGLang's verify in graphs: tokens/s of each, their ratio and
    each one's verify share of a step, sorted by H, pool, draft, context."""
    paired: dict[tuple, dict] = {}
    for r in runs:
        if r["draft"].startswith("none") or not r["graphs"] or r["path"] not in ("ours", "sglang"):
            continue
        paired.setdefault((r["heads"], r["pool"], r["draft"], r["context"]), {})[r["path"]] = r
    out = []
    for (h, pool, draft, ctx), p in sorted(paired.items()):
        if {"ours", "sglang"} <= set(p):
            o, s = p["ours"], p["sglang"]
            out.append({"H": h, "pool": pool, "draft": draft, "context": ctx,
                        "ours tok/s": round(o["tokens_per_s"], 1), "SGLang tok/s": round(s["tokens_per_s"], 1),
                        "ours / SGLang": round(o["tokens_per_s"] / s["tokens_per_s"], 2),
                        "verify share, ours": round(o["verify_share"], 2),
                        "verify share, SGLang": round(s["verify_share"], 2)})
    return out


def totals(runs: list[dict]) -> dict:
    """The check over all runs: runs, compared tokens, mismatches, explained, unexplained, acceptance errors."""
    c = [r["check"] for r in runs]
    return {"runs": len(runs), "compared": sum(x["compared"] for x in c),
            "mismatches": sum(len(x["mismatches"]) for x in c), "explained": sum(x["explained"] for x in c),
            "unexplained": sum(x["unexplained"] for x in c), "acceptance errors": sum(x["self_mismatches"] for x in c)}


def margin_counts(runs: list[dict]) -> dict:
    """The reference's top-2 margins summed over the runs that kept their histogram: edges (logits), counts of all
    compared tokens, counts of the mismatched ones."""
    hists = [r["check"]["margin_hist"] for r in runs if "margin_hist" in r["check"]]
    if not hists:
        raise ValueError("runs: none keeps its margin histogram (results written before 2026-12-04's third call)")
    edges = hists[0]["edges"]
    return {"edges": edges, "all": [sum(h["all"][i] for h in hists) for i in range(len(edges) - 1)],
            "mismatched": [sum(h["mismatched"][i] for h in hists) for i in range(len(edges) - 1)],
            "runs": len(hists)}


def beyond_greedy_bound(runs: list[dict]) -> list[dict]:
    """Mismatches whose reference margin is not below the bound of greedy decoding (no speculation) at the same H,
    pool and context: the rule the loop applies since 2026-12-04's last commit, applied to results judged before it
    by their own run's bound. Empty when every mismatch is explained under it."""
    greedy = {(r["source"], r["heads"], r["pool"], r["context"]): r["check"]["bound"] for r in runs
              if r["draft"].startswith("none")}
    out = []
    for r in runs:
        bound = greedy[(r["source"], r["heads"], r["pool"], r["context"])]
        out += [m | {"run": f"{r['source']}: H={r['heads']} {r['pool']} {r['context']} {r['draft']} {r['path']}",
                     "bound": bound} for m in r["check"]["mismatches"] if m["margin"] >= bound]
    return out
