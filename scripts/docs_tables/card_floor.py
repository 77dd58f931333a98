"""Issue 52's targets (the sm_120 forms toward the card's floor): each measured figure against the target and the
bytes and MMA floors of the run it comes from."""

from __future__ import annotations

import json
from pathlib import Path

from kdtree_lab.checks.bench_presets import CARD_FLOOR_FIRST, CARD_FLOOR_ROWS
from kdtree_lab.checks.bench_results import ISSUE_PRESETS
from kdtree_lab.core.paths import RESULTS, ROOT
from kdtree_lab.speculate.card_model import e4m3_two_term_steps, verify_work

from .common import _long_compute_bound, _rel, _span, _target_lines, grid_rows
from .h200 import _fixed
from .rtx import _card_runs, _predict
from .runs import FIXED_CARD, FIXED_CARD_TIMING_LIBRARY

HEADLINE = CARD_FLOOR_FIRST[0]  # B = 1, L = 200k, N = 16, H = 8
CHAINS_32 = [k for k in CARD_FLOOR_FIRST if k[2] * k[3] == 32]  # 32 rows at B = 1 and 8, L >= 32k
COMPUTE_BOUND = [k for k in CARD_FLOOR_ROWS if _long_compute_bound(k)]  # the card-floor preset's, in any grid
SHORT = [(1, 4096, n, 8) for n in (4, 16)]  # the fixed cost's shapes
FP8_HEADLINE_MS, BF16_HEADLINE_MS, FP8_OVER_BF16, MMA_SHARE, FIXED_US = 0.12, 0.17, 0.6, 0.5, 12.0  # the targets


class _Sources:
    """The grids the table's rows come from (so that it says whether they are one run), each fp8 grid checked to
    issue what sm_120a issues."""

    def __init__(self) -> None:
        self.used: dict[str, dict] = {}

    def row(self, impl: str, kv: str, key: tuple) -> tuple[dict, dict]:
        """(row of ``impl`` at ``key`` over a ``kv`` pool, its run's ceilings) from the newest card-floor grid holding
        ``impl``'s rows where it has this one (the issue asks for its figures from one run, and that preset is the
        run), else from the newest issue grid holding ``impl``'s rows; LookupError naming what is missing."""
        try:
            grid, rows = grid_rows(impl, kv, ("card-floor",))
        except LookupError:
            rows = {}
        if key not in rows:
            grid, rows = grid_rows(impl, kv, ISSUE_PRESETS)
        if key not in rows:
            raise LookupError(f"{grid.source}: no {impl} row over {kv} at B, L, N, H = {key} (the newest grid holding "
                              f"{impl} must hold every shape the issue-52 table reads)")
        if grid.source not in self.used:
            data = json.loads((ROOT / grid.source).read_text())
            if kv == "fp8" and not (data.get("timing_library") or _cc(data).startswith("12")):
                raise LookupError(f"{grid.source}: its e4m3 rows are the H200's emulation (not run with "
                                  "KDT_E4M3_TIMING=1), not what sm_120a issues")
            self.used[grid.source] = data
        return rows[key], grid.ceilings

    def words(self) -> str:
        resumed = [s for s, d in self.used.items() if "resumed_from" in d]
        one = len(self.used) == 1 and not resumed
        runs = [f"`{s}` ({d['provenance']['date_utc'][:10]}{', timing library' if d.get('timing_library') else ''}"
                f"{f', KDT_CARVEOUT={c}' if (c := d.get('carveout')) is not None else ''}{_kernels_then(s)})"
                for s, d in sorted(self.used.items())]
        return ", ".join(runs) + (": one run" if one else ": not one run, as the issue asks (`bench --preset "
                                  "card-floor`, in one call" + (f"; resumed: {', '.join(resumed)}" if resumed else "")
                                  + ")")


def _kernels_then(source: str) -> str:
    """Where the run beside ``source`` built other kernels than the tree's (its ``build.json`` library against
    ``library_name`` of the tree with that run's nvcc and archs: the kernel sources' hash), the words that say so;
    else nothing. A run of record read after a kernel change describes the kernels it ran until it is redone."""
    from kdtree_lab.kernels.build import library_name

    build = (ROOT / source).parent / "build.json"
    if not build.exists():
        return ""
    b = json.loads(build.read_text())["build"]
    then = Path(b["library"]).name
    now = library_name(b["archs"], b["nvcc_version"])
    return "" if then == now else (f"; its kernels are not the tree's, library {then[:-3]} then, {now[:-3]} now: its "
                                   "times are of the kernels it ran, the floors and predictions beside them of the "
                                   "tree's, until the run is redone")


def _cc(data: dict) -> str:
    """A run's compute capability ("9.0"; "12.0" on an sm_120 card, whose e4m3 rows are its own)."""
    return str(data.get("provenance", {}).get("compute_capability", ""))


def _floors(impl: str, key: tuple, kv: str, ceilings: dict) -> tuple[float, float]:
    """(bytes floor, MMA floor) in ms of one call of ``impl`` at ``key`` (B, L, N, H) in a run with ``ceilings``: the
    pool's KV bytes at the copy rate, the configuration's padded MMA FLOPs at the run's mma.sync rate for their kind
    (e4m3 on the timing library: one f16 MMA's cost per e4m3 MMA)."""
    work = verify_work(impl, *key, kv)
    rate = ceilings["mma_e4m3_tflops"] if work.kind == "e4m3" else ceilings["mma_sync_tflops"]
    return work.kv_bytes / (ceilings["copy_gbps"] * 1e6), work.flops / (rate * 1e9)


def _mma_share(row: dict, ceilings: dict) -> float:
    """A bf16 row's tensor rate as a share of its run's mma.sync peak (the bf16 target's measure)."""
    return row["TFLOP/s"] / ceilings["mma_sync_tflops"]


def _fixed_us(by: dict, impl: str, key: tuple) -> float:
    """The marginal cost (us) of one call of ``impl`` at ``key`` (B, L, N, H) in a fixed-cost run's rows (``_fixed``)."""
    return 1e3 * by[(impl, key[2], key[1])]["marginal_ms"]


def _shape(key: tuple) -> str:
    b, length, n, h = key
    return f"B = {b}, L = {length // 1000}k, N = {n}, H = {h}"


def _one(picks: set, what: str) -> str:
    if len(picks) != 1:
        raise ValueError(f"{what}: the RTX cards run {sorted(picks)} across the shapes; the row names one")
    return picks.pop()


def _picks() -> dict[tuple, tuple[str, str]]:
    """(bf16, fp8) configuration an RTX card runs at each shape the targets read; ValueError where the cards differ."""
    from kdtree_lab.budget.presets import gpus
    from kdtree_lab.speculate.card_model import cards

    presets = [gpus()[name] for name in cards()]
    runs = {k: _card_runs(presets[0], k) for k in (HEADLINE, *CHAINS_32, *COMPUTE_BOUND, *SHORT)}
    if any(_card_runs(g, k) != runs[k] for g in presets for k in runs):
        raise ValueError("cards: the RTX cards select different configurations; the table assumes one per shape")
    return runs


def _card_words(impl: str, kv: str, key: tuple, h200_ms: float) -> str:
    """The card model's prediction of one H200 row on each RTX card (a prediction, labelled so), with its terms."""
    from kdtree_lab.speculate.card_model import cards

    out = []
    for c in cards().values():
        p = _predict(impl, key, kv, h200_ms, c)
        out.append(f"{c.label} {p.ms:.3f} ms ({p.bound}-bound: bytes {p.bytes_ms:.3f}, MMAs {p.tensor_ms:.3f}, "
                   f"issue {p.issue_ms:.3f}, + {p.floor_ms:.3f} floor)")
    return "predicted by the card model: " + "; ".join(out)


def _card_ratios(pairs: list[tuple[tuple, str, float, str, float]]) -> str:
    """The card model's fp8 / bf16 ratio per RTX card at each (key, fp8 impl, its H200 ms, bf16 impl, its H200 ms)
    of ``pairs`` (a prediction, labelled so)."""
    from kdtree_lab.speculate.card_model import cards

    out = []
    for c in cards().values():
        cells = []
        for key, fi, f_ms, bi, b_ms in pairs:
            fp, bp = _predict(fi, key, "fp8", f_ms, c), _predict(bi, key, "bf16", b_ms, c)
            cells.append(f"{fp.ms / bp.ms:.2f}x (fp8 {fp.bound}-bound)")
        out.append(f"{c.label} " + " / ".join(cells))
    return "predicted by the card model, in that order: " + "; ".join(out)


def _q_terms(impl: str) -> str:
    """How an e4m3 configuration multiplies Q's two e4m3 terms (the MMA floor's words)."""
    steps = e4m3_two_term_steps(impl)
    return "Q's two e4m3 terms" if steps == 18 else f"Q's second e4m3 term on {steps} of its 18 steps"


def issue52_targets_table() -> str:
    """Issue 52's speed targets on the H200 under sm_120's limits: what an sm_120 card runs per shape and pool
    (forced), each figure beside its run's floors, from the newest committed grids and the fixed cost's run of
    record."""
    runs = _picks()
    src = _Sources()
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    rows = []

    bf16_impl, fp8_impl = runs[HEADLINE]
    r, c = src.row(fp8_impl, "fp8", HEADLINE)
    fb, fm = _floors(fp8_impl, HEADLINE, "fp8", c)
    rows.append((f"fp8 headline ({_shape(HEADLINE)}) <= {FP8_HEADLINE_MS} ms (moonshot 0.10)",
                 f"{r['ms']:.4f} ms (`{fp8_impl}`), {r['ms'] / FP8_HEADLINE_MS:.2f}x the target; floors {fb:.4f} ms "
                 f"bytes, {fm:.4f} ms MMA ({_q_terms(fp8_impl)}); {_card_words(fp8_impl, 'fp8', HEADLINE, r['ms'])}",
                 met(r["ms"] <= FP8_HEADLINE_MS)))

    ratios, cells, pairs = [], [], []
    for key in CHAINS_32:
        bi, fi = runs[key]
        (fr, c), (br, _) = src.row(fi, "fp8", key), src.row(bi, "bf16", key)
        ratios.append(fr["ms"] / br["ms"])
        pairs.append((key, fi, fr["ms"], bi, br["ms"]))
        fb, fm = _floors(fi, key, "fp8", c)
        cells.append(f"B = {key[0]}, L = {key[1] // 1000}k: {fr['ms']:.4f} / {br['ms']:.4f} ms = {ratios[-1]:.2f}x "
                     f"(fp8 floors {fb:.4f} bytes, {fm:.4f} MMA)")
    fi = _one({runs[k][1] for k in CHAINS_32}, "32 rows over fp8")
    bi = _one({runs[k][0] for k in CHAINS_32}, "32 rows over bf16")
    rows.append((f"32 rows over fp8 (N = 4, H = 8, `{fi}`) <= {FP8_OVER_BF16}x the bf16 pick (`{bi}`) at B = 1 and 8, "
                 "L >= 32k (the bytes alone: 0.5x)", "; ".join(cells) + f"; {_card_ratios(pairs)}",
                 met(max(ratios) <= FP8_OVER_BF16)))

    r, c = src.row(bf16_impl, "bf16", HEADLINE)
    bb, bm = _floors(bf16_impl, HEADLINE, "bf16", c)
    rows.append((f"bf16 headline ({_shape(HEADLINE)}) <= {BF16_HEADLINE_MS} ms",
                 f"{r['ms']:.4f} ms (`{bf16_impl}`), {r['ms'] / BF16_HEADLINE_MS:.2f}x the target; floors {bb:.4f} ms "
                 f"bytes, {bm:.4f} ms MMA; {_card_words(bf16_impl, 'bf16', HEADLINE, r['ms'])}",
                 met(r["ms"] <= BF16_HEADLINE_MS)))

    shares = []
    for key in COMPUTE_BOUND:
        r, c = src.row(runs[key][0], "bf16", key)
        shares.append(_mma_share(r, c))
    rows.append((f"bf16, compute-bound shapes (H x N >= 128, L >= 32k; H = 8, 16, B = 1, 8): >= {MMA_SHARE:.0%} of "
                 "the mma.sync peak", f"{_span(shares, '.0%')} over {len(shares)} shapes "
                 f"({sum(x >= MMA_SHARE for x in shares)} at or above {MMA_SHARE:.0%})",
                 met(min(shares) >= MMA_SHARE)))

    data, fixed = _fixed(FIXED_CARD)
    if not data.get("timing_library", FIXED_CARD_TIMING_LIBRARY):
        raise LookupError(f"{_rel(FIXED_CARD)}: not run with KDT_E4M3_TIMING=1")
    cells, worst = [], 0.0
    for key in SHORT:
        impl = runs[key][1]
        us = _fixed_us(fixed, impl, key)
        worst = max(worst, us)
        cells.append(f"N = {key[2]}: {us:.1f} us (`{impl}`)")
    floor = 1e3 * data["marginal_floor_ms"]["2"]
    rows.append((f"fixed cost <= {FIXED_US:.0f} us per call inside a graph (B = 1, L = 4k, H = 8, fp8)",
                 "; ".join(cells) + f" (the marginal cost of one call, split kernel and combine, in a graph of ten); "
                 f"two one-element kernels add {floor:.1f} us the same way", met(worst <= FIXED_US)))

    return _target_lines(f"H200 under sm_120's limits, what an RTX PRO 6000 / RTX 5090 runs per shape and pool "
                         f"(forced), from {src.words()}; the fixed cost from `{_rel(FIXED_CARD)}`. Floors: the pool's "
                         "KV bytes at the run's copy rate, the configuration's padded MMAs at its mma.sync rate for "
                         "their kind. \"met\" reads the H200's figure (the issue's measure); beside it the card "
                         "model's prediction for each RTX card (`kdtree_lab/speculate/card_model.py`: the floor plus "
                         "the largest of the KV bytes, the MMAs at the card's sustained rate and the H200's time "
                         "beyond the floor scaled by SMs x clock; a prediction, no sm_120 card has run these).", rows)


H100_RUNS = "h100"  # data/results/h100/: the H100 calls' card-floor grids, each with its fixed cost in its folder
_FIXED_H100 = (("fixed-cost-driver.json", None), ("fixed-cost-100.json", 100))  # (file, KDT_CARVEOUT it ran under)


def _h100_runs() -> list[tuple[Path, dict]]:
    """(folder, grid) of every committed H100 card-floor grid, oldest first (by its provenance date)."""
    found = []
    for path in sorted((RESULTS / H100_RUNS).rglob("bench-card-floor.json")):
        data = json.loads(path.read_text())
        if data.get("preset") == "card-floor":
            found.append((path.parent, data))
    return sorted(found, key=lambda t: t[1].get("provenance", {}).get("date_utc", ""))


def _h100_problem(data: dict, carveout: int | None) -> str | None:
    """What keeps an H100 result (a grid or a fixed-cost run) out of the table: another GPU, the emulated e4m3 rows,
    another carveout than its name says, a resumed grid; None when none does."""
    gpu = data.get("gpu") or data.get("provenance", {}).get("gpu", "")
    if "H100" not in gpu:
        return f"expected an H100 run, found {gpu or 'no GPU named'}"
    if not data.get("timing_library"):
        return "its e4m3 rows are the H100's emulation (not run with KDT_E4M3_TIMING=1), not what sm_120a issues"
    if data.get("carveout") != carveout:
        return f"expected KDT_CARVEOUT={carveout}, found {data.get('carveout')}"
    if "resumed_from" in data:
        return "a resumed grid, not one call"
    return None


def issue52_h100_table() -> str:
    """Issue 52's figures from every committed H100 card-floor grid, one row each with the fixed cost run beside it
    (`landing-run.sh grid`): what an RTX card runs per shape, forced, timed on the H100 (its own ceilings)."""
    runs = _picks()
    chains = ", ".join(f"B {k[0]} {k[1] // 1000}k" for k in CHAINS_32)
    short = ", ".join(str(k[2]) for k in SHORT)
    b, length, _, h = SHORT[0]
    lines = ["Every H100 call of `docs/experiments/landing-run.sh grid` (the card-floor grid on the timing library and "
             "the fixed cost in one call), oldest first; the configurations an RTX PRO 6000 / RTX 5090 runs per shape "
             "and pool, forced. A row compares with another H100 row only (single medians, which stray between "
             "calls most at B = 1, 32k), never with the H200 table above; a commit marked + ran on a tree that differed "
             "from it (patches applied, or the run script's STACK edited: its folder's README says which).", "",
             "| run (folder; UTC date, commit, source digest: the kernels it ran) | fp8 headline <= "
             f"{FP8_HEADLINE_MS} ms | bf16 headline <= {BF16_HEADLINE_MS} ms | 32 rows over fp8 <= {FP8_OVER_BF16}x "
             f"({chains}) | bf16 >= {MMA_SHARE:.0%} of mma.sync ({len(COMPUTE_BOUND)} shapes) | fixed cost <= "
             f"{FIXED_US:.0f} us (B = {b}, L = {length // 1024}k, H = {h}, fp8; N = {short}; under "
             "`KDT_CARVEOUT=100`) |", "|---|---|---|---|---|---|"]
    for folder, data in _h100_runs():
        where = f"data/results/h100/{folder.relative_to(RESULTS / H100_RUNS)}"
        if problem := _h100_problem(data, None):
            raise LookupError(f"{where}/bench-card-floor.json: {problem}")
        rows = {(r["impl"], r.get("kv", "bf16"), r["B"], r["L"], r["N"], r["H"]): r for r in data["rows"]}

        def ms(impl: str, kv: str, key: tuple) -> float:
            if (impl, kv, *key) not in rows:
                raise LookupError(f"{where}: no {impl} row over {kv} at B, L, N, H = {key}")
            return rows[(impl, kv, *key)]["ms"]

        bf16, fp8 = runs[HEADLINE]
        ratios = [ms(runs[k][1], "fp8", k) / ms(runs[k][0], "bf16", k) for k in CHAINS_32]
        for k in COMPUTE_BOUND:
            ms(runs[k][0], "bf16", k)  # LookupError naming a missing row
        shares = [_mma_share(rows[(runs[k][0], "bf16", *k)], data["ceilings"]) for k in COMPUTE_BOUND]
        fixed = []
        for name, carveout in _FIXED_H100:
            if not (folder / name).exists():
                fixed.append("no run" if carveout is None else f"no KDT_CARVEOUT={carveout} run")
                continue
            fdata, by = _fixed(folder / name)
            if problem := _h100_problem(fdata, carveout):
                raise LookupError(f"{where}/{name}: {problem}")
            missing = [k for k in SHORT if (runs[k][1], k[2], k[1]) not in by]
            if missing:
                raise LookupError(f"{where}/{name}: no {runs[missing[0]][1]} row at the automatic split count at "
                                  f"B, L, N, H = {missing[0]}")
            fixed.append(" / ".join(f"{_fixed_us(by, runs[k][1], k):.1f}" for k in SHORT))
        prov = data["provenance"]
        commit = prov["git_commit"][:7] + ("+" if prov.get("git_dirty") else "")
        lines.append(f"| `{folder.relative_to(RESULTS / H100_RUNS)}` ({prov['date_utc'][:16].replace('T', ' ')}; "
                     f"{commit}, sources {prov['source_sha256'][:12]}) | {ms(fp8, 'fp8', HEADLINE):.4f} | "
                     f"{ms(bf16, 'bf16', HEADLINE):.4f} | " + " / ".join(f"{x:.2f}" for x in ratios)
                     + f" | {_span(shares, '.0%')} | {fixed[0]} ({fixed[1]}) |")
    return "\n".join(lines)
