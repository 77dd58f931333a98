"""What an RTX card should take: predictions from the H200 rows (labelled so)."""

from __future__ import annotations

from kdtree_lab.checks.bench_results import Grid
from kdtree_lab.checks.roofline import Shape, row_kv
from kdtree_lab.speculate.kernel_times import bandwidth_share, predict_ms

from .common import _bench, _rel, _timing_words
from .fp8 import _e4m3_grid, _e4m3_grid_path, _fp8_rows
from .runs import E4M3, FP8_BENCH, FP8_EXACT, SM120_FIRST, SM120_ROLES, SM120_RUN, SM120_SHAPES
from .sm120 import _sm120_cards, sm120_impl


def rtx_prediction_table() -> str:
    """Predicted times of what sm_120 runs on RTX cards (per shape, the configuration the launcher selects there)
    from its H200 measurement (labelled as predictions)."""
    data, by_shape = _bench(SM120_RUN)
    c = data["ceilings"]
    cards, runs = _sm120_cards(by_shape, _rel(SM120_RUN))
    p = data["provenance"]
    share = {i: bandwidth_share(Grid(i, _rel(SM120_RUN), p["date_utc"], p["gpu"], c,
                                     tuple(r for r in data["rows"] if r["impl"] == i and row_kv(r) == "bf16")))
             for i in set(runs.values())}  # the step model's rule, per configuration
    lines = ["**Predictions, not measurements** (no sm_120 card has been lent). Per shape: the larger of the H200 "
             f"time scaled by the mma.sync rate ratio (H200 {c['mma_sync_tflops']:.0f} TFLOP/s measured in "
             f"`{_rel(SM120_RUN)}`, the card's from `data/presets/gpus.yaml` with its source) and the KV bytes at "
             "the best share of the memory bandwidth the configuration reached on the H200's long memory-bound "
             "shapes in the same run, those it is not selected for included (" + ", ".join(
                 f"`{i}` {u:.1%}" for i, u in sorted(share.items())) + "; the step model of docs/speculation.md uses "
             "the same rule). SM count and clock enter through the mma.sync "
             "rate. Each row is the configuration the launcher selects on these cards for that shape, forced on the "
             "H200. To check one on a card: `kdtree-lab run --profile sm120` and `kdtree-lab bench --preset issue "
             "--impl cuda,sglang_extend,sglang_decode`.", "",
             "| B, L, N, H | sm_120 runs | H200, measured (ms) | " +
             " | ".join(f"{g.label}, predicted (ms)" for g in cards) + " |",
             "|---|---|---:|" + "---:|" * len(cards)]
    for key in SM120_SHAPES:
        s = by_shape[key][runs[key]]
        kv_bytes = Shape(*key).kv_bytes
        preds = [predict_ms(s["ms"], kv_bytes, c, g, share[runs[key]]) for g in cards]
        lines.append(f"| {', '.join(map(str, key))} | `{runs[key]}` | {s['ms']:.3f} | " +
                     " | ".join(f"{p:.3f}" for p in preds) + " |")
    return "\n".join(lines)


def rtx_fp8_prediction_table() -> str:
    """The sm_120 kernel on RTX cards over a bf16 and an fp8 pool, predicted from the fp8 run (labelled)."""
    from kdtree_lab.budget.presets import gpus

    data, rows = _fp8_rows()
    c = data["ceilings"]
    cards = [g for g in gpus().values() if g.mma_sync_tflops]
    mine = {k: r for k, r in rows.items() if k[0] == "cuda_sm120"}
    u = max(r["GB/s"] / c["copy_gbps"] for k, r in mine.items() if k[5] == "bf16" and r["bound"] == "memory")
    per_flop = ", ".join(f"{g.label.split(' (')[0]} {(g.bandwidth_gbps / g.mma_sync_tflops) / (c['copy_gbps'] / c['mma_sync_tflops']):.2f}x"
                         for g in cards)
    lines = ["**Predictions, not measurements** (no sm_120 card has been lent), by the model of the RTX "
             f"prediction table of docs/results.md applied to `{_rel(FP8_BENCH)}`: per shape and pool, the larger of the H200 time scaled by the "
             f"mma.sync rate ratio (H200 {c['mma_sync_tflops']:.0f} TFLOP/s in that run) and the pool's bytes at "
             f"{u:.0%} of the card's bandwidth (the best share the kernel reached over a bf16 pool in that run). "
             f"Bytes per mma.sync FLOP against the H200's: {per_flop}. With less bandwidth per FLOP a card's "
             "bf16 pool is slower on the memory-bound shapes, which is where an fp8 pool gains on it.", "",
             "| B, L, N, H | " + " | ".join(f"{g.label}: bf16 / fp8 (ms, predicted)" for g in cards) + " |",
             "|---|" + "---|" * len(cards)]
    for key in sorted({k[1:5] for k in mine}, key=lambda k: (k[2] * k[3], k[0], k[1])):
        cells = []
        for g in cards:
            pred = {}
            for kv in ("bf16", "fp8"):
                r = mine[("cuda_sm120", *key, kv)]
                pred[kv] = predict_ms(r["ms"], Shape(*key, kv=kv).kv_bytes, c, g, u)
            cells.append(f"{pred['bf16']:.3f} / {pred['fp8']:.3f} ({pred['bf16'] / pred['fp8']:.2f}x)")
        b, length, n, h = key
        lines.append(f"| {b}, {length // 1000}k, {n}, {h} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sm120_fp8_table() -> str:
    """What an sm_120 card runs over an fp8 pool per shape (automatic fp8 math) beside the bf16 pool's choice, both
    on the H200 under sm_120's limits; the cards' predictions."""
    from kdtree_lab.budget.presets import gpus
    from kdtree_lab.kernels.launch_plan import E4M3_SM120, select

    data, rows = _e4m3_grid()
    bf, by_shape = _bench(SM120_RUN)
    c, p = data["ceilings"], data["provenance"]
    card = gpus()["rtx-pro-6000"]
    cards = [g for g in gpus().values() if g.mma_sync_tflops]

    def grid_of(impl, src, d, kv):
        return Grid(impl, src, d["provenance"]["date_utc"], d["provenance"]["gpu"], d["ceilings"],
                    tuple(r for r in d["rows"] if r["impl"] == impl and row_kv(r) == kv))

    share = {i: bandwidth_share(grid_of(i, _rel(_e4m3_grid_path()), data, "fp8")) for i in (E4M3, FP8_EXACT)}
    share |= {i: bandwidth_share(grid_of(i, _rel(SM120_RUN), bf, "bf16")) for i in (SM120_FIRST, SM120_ROLES)}
    lines = [f"From `{_rel(_e4m3_grid_path())}` ({p['gpu']}, driver {p['driver']}, {p['date_utc'][:10]}; {_timing_words(data)}) "
             "on the **timing library** (`KDT_E4M3_TIMING=1`: each e4m3 MMA issued as one f16 MMA, the instruction "
             "stream sm_120a issues, its values not checked; the exact path is the same code either way), and, for "
             f"the bf16 pool, `{_rel(SM120_RUN)}`. H200 times in ms under sm_120's limits, not sm_120 runs. \"fp8 "
             "runs\": what the launcher takes for an fp8 pool on RTX PRO 6000 / RTX 5090 under automatic fp8 math. "
             "Predictions (labelled) by the rule of the RTX table (mma.sync rate ratio, or the KV bytes at the "
             "configuration's best bandwidth share in its run: " + ", ".join(f"`{i}` {u:.1%}"
                                                                             for i, u in sorted(share.items())) + ").",
             "", "| B, L, N, H | bf16 runs (ms) | fp8, e4m3 (ms) | fp8, exact (ms) | fp8 runs | bf16 / fp8 | "
             + " | ".join(f"{g.label.split(' (')[0]}: bf16 / fp8 (ms, predicted)" for g in cards) + " |",
             "|---|---:|---:|---:|---|---:|" + "---:|" * len(cards)]
    slower = []
    for h in (8, 16):
        for n in (4, 16, 64):
            for b in (1, 8):
                for length in (4096, 32_768, 200_000):
                    key = (b, length, n, h)
                    bimpl = sm120_impl(key, card)
                    fimpl = E4M3 if select(b, n, h, "fp8", card.device) == E4M3_SM120 else FP8_EXACT
                    bms, fms = by_shape[key][bimpl]["ms"], rows[(fimpl, *key)]["ms"]
                    if fms > bms * 1.03:
                        slower.append(f"{b}, {length // 1000}k, {n}, {h}")
                    preds = []
                    for g in cards:
                        pb = predict_ms(bms, Shape(*key).kv_bytes, bf["ceilings"], g, share[bimpl])
                        pf = predict_ms(fms, Shape(*key, kv="fp8").kv_bytes, c, g, share[fimpl])
                        preds.append(f"{pb:.3f} / {pf:.3f} ({pb / pf:.2f}x)")
                    lines.append(f"| {b}, {length // 1000}k, {n}, {h} | {bms:.4f} | {rows[(E4M3, *key)]['ms']:.4f} | "
                                 f"{rows[(FP8_EXACT, *key)]['ms']:.4f} | `{fimpl}` | {bms / fms:.2f} | "
                                 + " | ".join(preds) + " |")
    lines += ["", f"fp8 more than 3% slower than bf16 (H200, what each pool runs): {len(slower)} of 36 shapes"
              + (f" ({'; '.join(slower)})" if slower else "") + "."]
    return "\n".join(lines)
