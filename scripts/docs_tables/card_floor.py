"""Issue 52's targets (the sm_120 forms toward the card's floor): each measured figure against the target and the
bytes and MMA floors of the run it comes from."""

from __future__ import annotations

import json

from kdtree_lab.checks.bench_results import committed_grid
from kdtree_lab.core.paths import ROOT
from kdtree_lab.speculate.card_model import verify_work

from .common import _long_compute_bound, _rel, _span, _target_lines
from .rtx import _card_runs
from .runs import FIXED_CARD, HEADLINE

CARD_FLOOR = ("card-floor",)  # the preset that times both pools in one run (kdtree_lab/checks/bench_presets.py)
CHAINS_32 = [(b, length, 4, 8) for b in (1, 8) for length in (32_768, 200_000)]  # 32 rows, L >= 32k
SHORT = [(1, 4096, n, 8) for n in (4, 16)]  # the fixed cost's shapes (B = 1, L = 4k)


def _rows(impl: str, kv: str):
    """(grid, (B, L, N, H) -> row) of ``impl`` over a ``kv`` pool: the newest committed card-floor run holding it,
    else the newest issue grid (issue-fp8 for fp8)."""
    try:
        grid = committed_grid(impl, kv, CARD_FLOOR)
    except LookupError:
        grid = committed_grid(impl, kv)
    return grid, {(r["B"], r["L"], r["N"], r["H"]): r for r in grid.rows}


def _floors(impl: str, key: tuple, kv: str, ceilings: dict) -> tuple[float, float]:
    """(bytes floor, MMA floor) in ms of one call of ``impl`` at ``key`` in a run with ``ceilings``: the pool's KV
    bytes at the copy rate, the configuration's padded MMA FLOPs at the run's mma.sync rate for its kind (e4m3 on
    the timing library: one f16 MMA's cost per e4m3 MMA)."""
    work = verify_work(impl, *key, kv)
    rate = ceilings["mma_e4m3_tflops"] if work.kind == "e4m3" else ceilings["mma_sync_tflops"]
    return work.kv_bytes / (ceilings["copy_gbps"] * 1e6), work.flops / (rate * 1e9)


def _shape(key: tuple) -> str:
    b, length, n, h = key
    return f"B = {b}, L = {length // 1000}k, N = {n}, H = {h}"


def issue52_targets_table() -> str:
    """Issue 52's speed targets on the H200 under sm_120's limits: what an sm_120 card runs per shape and pool
    (forced), each figure beside its run's floors, from the committed runs of record."""
    from kdtree_lab.budget.presets import gpus
    from kdtree_lab.speculate.card_model import cards

    presets = [gpus()[name] for name in cards()]
    card = presets[0]
    keys = [HEADLINE, *CHAINS_32, *SHORT]
    if any(_card_runs(g, k) != _card_runs(card, k) for g in presets for k in keys):
        raise ValueError("cards: the RTX cards select different configurations; the table assumes one per shape")
    bf16_impl, fp8_impl = _card_runs(card, HEADLINE)
    fg, fp8 = _rows(fp8_impl, "fp8")
    bg, bf16 = _rows(bf16_impl, "bf16")
    timing = json.loads((ROOT / fg.source).read_text()).get("timing_library")
    if not timing:
        raise LookupError(f"{fg.source}: not timed on the timing library (KDT_E4M3_TIMING=1); its e4m3 rows are the "
                          "H200's emulation, not what sm_120a issues")
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    rows = []

    ms = fp8[HEADLINE]["ms"]
    fb, fm = _floors(fp8_impl, HEADLINE, "fp8", fg.ceilings)
    rows.append((f"fp8 headline ({_shape(HEADLINE)}) <= 0.12 ms (moonshot 0.10)",
                 f"{ms:.4f} ms (`{fp8_impl}`), {ms / 0.12:.2f}x the target; floors {fb:.4f} ms bytes, {fm:.4f} ms "
                 f"MMA (Q's two e4m3 terms)", met(ms <= 0.12)))

    ratios, cells = [], []
    for key in CHAINS_32:
        bi, fi = _card_runs(card, key)
        _, b_rows = _rows(bi, "bf16")
        g32, f_rows = _rows(fi, "fp8")
        r = f_rows[key]["ms"] / b_rows[key]["ms"]
        ratios.append(r)
        fb, fm = _floors(fi, key, "fp8", g32.ceilings)
        cells.append(f"B = {key[0]}, L = {key[1] // 1000}k: {f_rows[key]['ms']:.4f} / {b_rows[key]['ms']:.4f} ms "
                     f"= {r:.2f}x (fp8 floors {fb:.4f} bytes, {fm:.4f} MMA)")
    rows.append((f"32 rows over fp8 (N = 4, H = 8, `{fi}`) <= 0.6x the bf16 pick (`{bi}`) at B = 1 and 8, L >= 32k "
                 "(the bytes alone: 0.5x)", "; ".join(cells), met(max(ratios) <= 0.6)))

    ms = bf16[HEADLINE]["ms"]
    bb, bm = _floors(bf16_impl, HEADLINE, "bf16", bg.ceilings)
    rows.append((f"bf16 headline ({_shape(HEADLINE)}) <= 0.17 ms",
                 f"{ms:.4f} ms (`{bf16_impl}`), {ms / 0.17:.2f}x the target; floors {bb:.4f} ms bytes, {bm:.4f} ms "
                 "MMA", met(ms <= 0.17)))

    comp = []
    for key in {k for k in bf16 if _long_compute_bound(k)}:
        impl = _card_runs(card, key)[0]
        grid, by = _rows(impl, "bf16")
        if key in by:
            comp.append(by[key]["TFLOP/s"] / grid.ceilings["mma_sync_tflops"])
    rows.append(("bf16, compute-bound shapes (H x N >= 128, L >= 32k): >= 50% of the mma.sync peak",
                 f"{_span(comp, '.0%')} over {len(comp)} shapes ({sum(x >= 0.5 for x in comp)} at or above 50%)",
                 met(min(comp) >= 0.5)))

    data = json.loads(FIXED_CARD.read_text())
    fixed = {(r["impl"], r["B"], r["L"], r["N"], r["H"]): r for r in data["rows"] if "marginal_ms" in r}
    cells, worst = [], 0.0
    for key in SHORT:
        impl = _card_runs(card, key)[1]
        us = 1e3 * fixed[(impl, *key)]["marginal_ms"]
        worst = max(worst, us)
        cells.append(f"N = {key[2]}: {us:.1f} us (`{impl}`)")
    floor = 1e3 * data["marginal_floor_ms"]["2"]
    rows.append(("fixed cost <= 12 us per call inside a graph (B = 1, L = 4k, H = 8, fp8, one launch)",
                 "; ".join(cells) + f" (each the marginal cost of one call in a graph of ten); two one-element kernels "
                 f"add {floor:.1f} us the same way", met(worst <= 12)))

    runs = [f"fp8 rows from `{fg.source}` ({fg.date[:10]}, timing library)", f"bf16 rows from `{bg.source}` "
            f"({bg.date[:10]})"]
    one = "one run" if fg.source == bg.source else "two runs (the issue asks one: `bench --preset card-floor`)"
    return _target_lines(f"H200 under sm_120's limits, what an RTX PRO 6000 / RTX 5090 runs per shape and pool "
                         f"(forced): {'; '.join(runs)}: {one}; the fixed cost from `{_rel(FIXED_CARD)}`. Floors: the "
                         "pool's KV bytes at the run's copy rate, the configuration's padded MMAs at its mma.sync "
                         "rate for their kind.", rows)
