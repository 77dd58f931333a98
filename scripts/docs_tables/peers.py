"""b12x's dense MLA, the closest sm_120 peer, beside ours: the README's sentence and docs/sglang.md's table."""

from __future__ import annotations

import json

from .common import _rel, _timing_words
from .runs import B12X_BENCH, B12X_P64_BENCH

SM120_FORMS = "cuda_sm120"  # the prefix of every sm_120 configuration (forced on the H200 under sm_120's limits)


def _b12x_shapes() -> tuple[dict, dict]:
    """(the run, {(B, L, N, H, kv): {impl: row}}) with the 64-token-page rows of the second run merged in."""
    data = json.loads(B12X_BENCH.read_text())
    by: dict = {}
    for r in data["rows"] + json.loads(B12X_P64_BENCH.read_text())["rows"]:
        by.setdefault((r["B"], r["L"], r["N"], r["H"], r.get("kv", "bf16")), {})[r["impl"]] = r
    return data, by


def _best_sm120(impls: dict) -> dict:
    return min((r for i, r in impls.items() if i.startswith(SM120_FORMS)), key=lambda r: r["ms"])


def b12x_sentence() -> str:
    """The README's line on b12x: how much faster our sm_120 forms are on its grid (H200, forced)."""
    data, by = _b12x_shapes()
    ratios = [d["b12x"]["ms"] / _best_sm120(d)["ms"] for d in by.values()]
    one = [d["b12x"]["ms"] / _best_sm120(d)["ms"] for k, d in by.items() if k[0] == 1]
    return (f"b12x's dense MLA (SM120, CuTe DSL; causal rows, no tree), the closest peer on these cards, ran beside "
            f"ours on the H200 on {len(by)} chain shapes (B 1 and 8, L 4k-200k, N 1-8, H 8 and 16, both pools): our "
            f"sm_120 forms took {min(ratios):.2f}-{max(ratios):.1f}x less time ({min(one):.2f}-{max(one):.1f}x at "
            f"B = 1; `docs/sglang.md`, \"b12x\").")


def b12x_table() -> str:
    """Per shape and pool: the fastest sm_120 form, b12x (token pages, and 64-token pages where timed), the ratio."""
    data, by = _b12x_shapes()
    p, c = data["provenance"], data["ceilings"]
    lines = [f"From `{_rel(B12X_BENCH)}` and `{_rel(B12X_P64_BENCH)}` ({p['gpu']}, driver {p['driver']}, "
             f"{p['date_utc'][:10]}; {_timing_words(data)}; ceilings in the same run: copy {c['copy_gbps']:.0f} "
             f"GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s). Chains of N causal rows; ours: the fastest sm_120 "
             "form forced on the H200 (e4m3 forms over fp8 on the timing library), and the H200's own pick; b12x "
             "1.5.1 over token pages (SGLang's pool) and 64-token pages; times in ms.", "",
             "| B, L, N, H | pool | ours, sm_120 form | ms | H200 pick (`cuda`) | b12x | b12x, 64-token pages | "
             "b12x / ours (sm_120) |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(by, key=lambda k: (k[2], k[3], k[0], k[1], k[4])):
        d = by[key]
        best = _best_sm120(d)
        p64 = f"{d['b12x_p64']['ms']:.4f}" if "b12x_p64" in d else "-"
        lines.append(f"| {', '.join(map(str, key[:4]))} | {key[4]} | `{best['impl']}` | {best['ms']:.4f} | "
                     f"{d['cuda']['ms']:.4f} | {d['b12x']['ms']:.4f} | {p64} | {d['b12x']['ms'] / best['ms']:.2f} |")
    return "\n".join(lines)
