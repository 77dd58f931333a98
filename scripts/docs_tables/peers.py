"""b12x's dense MLA, the closest sm_120 peer, beside ours: the README's sentence and docs/sglang.md's table."""

from __future__ import annotations

import json

from kdtree_lab.checks.roofline import row_kv
from kdtree_lab.speculate.kernel_times import ours_impl

from .common import _rel, _timing_words
from .runs import B12X_BENCH, B12X_P64_BENCH

CARD = "rtx-pro-6000"  # whose selection stands for "what the card runs" (the RTX 5090 selects the same: 99 KB)


def _b12x_shapes() -> tuple[dict, dict]:
    """(the run, {(B, L, N, H, kv): {impl: row}}) with the 64-token-page rows of the second run merged in."""
    data = json.loads(B12X_BENCH.read_text())
    by: dict = {}
    for r in data["rows"] + json.loads(B12X_P64_BENCH.read_text())["rows"]:
        by.setdefault((r["B"], r["L"], r["N"], r["H"], row_kv(r)), {})[r["impl"]] = r
    return data, by


def _card_pick(key: tuple) -> str:
    """The implementation that stands for what an sm_120 card runs on the shape (``kernel_times.ours_impl``)."""
    b, _, n, h, kv = key
    return ours_impl(CARD, b, n, h, kv)


def _ratios(by: dict, kv: str, batch: int | None = None) -> list[float]:
    return [d["b12x"]["ms"] / d[_card_pick(k)]["ms"] for k, d in by.items()
            if k[4] == kv and (batch is None or k[0] == batch)]


def _set(values) -> str:
    def word(v: int) -> str:
        return f"{v // 1000}k" if v >= 1000 and v % 1000 == 0 else f"{v // 1024}k" if v >= 1024 and v % 1024 == 0 \
            else str(v)
    return " / ".join(word(v) for v in sorted(set(values)))


def b12x_sentence() -> str:
    """The README's line on b12x: its time over that of what an sm_120 card runs (forced on the H200), bf16 pools
    (fp8: b12x's e4m3 MMAs emulated there, ours on the timing library; the table in docs/sglang.md)."""
    _, by = _b12x_shapes()
    keys = [k for k in by if k[4] == "bf16"]
    r, one = _ratios(by, "bf16"), _ratios(by, "bf16", 1)
    return (f"b12x's dense MLA (SM120, CuTe DSL; causal rows, no tree), the closest peer on these cards, ran beside "
            f"ours on the H200 over {len(keys)} bf16 shapes (B {_set(k[0] for k in keys)}, L "
            f"{_set(k[1] for k in keys)}, N {_set(k[2] for k in keys)} causal rows, H {_set(k[3] for k in keys)}): "
            f"it took {min(r):.2f}-{max(r):.1f}x the time of what an sm_120 card runs ({min(one):.2f}-{max(one):.1f}x "
            f"at B = 1; fp8 and the reasons in `docs/sglang.md`, \"b12x\").")


def b12x_table() -> str:
    """Per shape and pool: what an sm_120 card runs (forced on the H200), the H200's pick, b12x over token pages and
    over 64-token pages (where timed), the ratio."""
    data, by = _b12x_shapes()
    p, c = data["provenance"], data["ceilings"]
    p64 = sum("b12x_p64" in d for d in by.values())
    fp8 = _ratios(by, "fp8")
    lines = [f"From `{_rel(B12X_BENCH)}` and `{_rel(B12X_P64_BENCH)}` ({p['gpu']}, driver {p['driver']}, "
             f"{p['date_utc'][:10]}; {_timing_words(data)}; ceilings in the same run: copy {c['copy_gbps']:.0f} "
             f"GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s). N causal rows per request (chains; N = 1 a single "
             "row); ours: the configuration an RTX PRO 6000 selects for the shape (`launch_plan.select`), forced on "
             "the H200, and the H200's own pick; b12x 1.5.1 over token pages (SGLang's pool) and 64-token pages "
             f"({p64} of the {len(by)} shapes timed so: the run was cut by its call's limit); times in ms. Over fp8 "
             "the two sides are not timed alike: the H200 has no e4m3 mma.sync in its tensor cores, so b12x's e4m3 MMAs "
             "run as ptxas lowers them (not inspected), while ours run on the timing library (one f16 MMA per e4m3 MMA, sm_120a's instruction "
             f"stream); b12x / ours there is {min(fp8):.2f}-{max(fp8):.1f}x, tilted toward ours by that difference.", "",
             "| B, L, N, H | pool | ours (card's pick) | ms | H200 pick (`cuda`) | b12x | b12x, 64-token pages | "
             "b12x / ours |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(by, key=lambda k: (k[2], k[3], k[0], k[1], k[4])):
        d = by[key]
        pick = d[_card_pick(key)]
        pages = f"{d['b12x_p64']['ms']:.4f}" if "b12x_p64" in d else "-"
        lines.append(f"| {', '.join(map(str, key[:4]))} | {key[4]} | `{pick['impl']}` | {pick['ms']:.4f} | "
                     f"{d['cuda']['ms']:.4f} | {d['b12x']['ms']:.4f} | {pages} | {d['b12x']['ms'] / pick['ms']:.2f} |")
    return "\n".join(lines)
