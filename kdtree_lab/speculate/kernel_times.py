"""Attention time per layer call for the step model: tree verify (ours, SGLang's) and one-token decode (SGLang's).

Times come from the benchmark grid (``checks.bench_presets.preset("issue")``: B {1, 8, 48} x L {4k, 32k, 200k} x N {4, 16, 64} x
H {8, 16, 64, 128}), as CUDA-graph replays of one call:

- committed results: for each implementation, the newest committed ``issue`` grid under ``data/results/h200/``
  that holds its rows (``committed_grid``), so a newly committed run of a default kernel is picked up without a
  code change. Our kernel on a GPU is, per shape, the configuration the launcher selects there (``ours_impl``); every
  committed grid ran on the H200, where what sm_120 runs is forced to time it.
- sm_120 cards: predicted from the H200 rows by the card model (``card_model.predict``), as the RTX tables of
  docs/results.md are, and labelled predictions; ``card_checks.error_band`` is the spread those predictions carry.
- this GPU: measured first (``measure``), through ``checks.bench.run_grid``.
- ours over an fp8 pool (``ours-fp8``): per shape the configuration the launcher runs for an fp8 pool there, from
  the newest committed issue grid holding fp8-pool rows of it; while none does, its bf16 sibling's issue rows times
  the fp8 / bf16 time ratio the newest committed run of a both-pools preset measured for that kernel on the H200 (said so
  in the table's label). Carried to sm_120 cards with the fp8 pool's bytes (half the bf16 pool's) and the fp8
  configuration's MMA work.

Between grid points a time is interpolated linearly in L, then N, then B; below the shortest prefix it is held
(a call over fewer tokens costs no more, to first order); beyond the longest it is extrapolated along the last
segment, and SGLang's verify, which the grid leaves out where one call takes seconds, is extrapolated from its
shorter prefixes (one program walks the whole prefix, so its time is linear in L). ``KernelTable.extrapolated``
says where.
"""

from __future__ import annotations

import json
import statistics
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..checks import bench_results
from ..checks.bench_results import MEASURED_ON, Grid
from ..core.paths import ROOT
from . import card_model

SGLANG_VERIFY = "sglang_extend"  # extend_attention_fwd, SGLang 0.5.23's Triton verify path for MLA
SGLANG_DECODE = "sglang_decode_1tok"  # decode_attention_fwd, one token per request (no speculation)
KERNELS = ("ours", "ours-fp8", "sglang", "decode")  # verify with ours over a bf16 and an fp8 pool, SGLang's, decode
POOLS = {"ours": "bf16", "ours-fp8": "fp8", "sglang": "bf16", "decode": "bf16"}  # the KV pool each table reads


class KernelTimeError(ValueError):
    """A shape or GPU the kernel times cannot answer; the message names it."""


def ours_impl(gpu: str, batch: int = 1, nodes: int = 16, heads: int = 8, kv: str = "bf16") -> str:
    """The implementation whose committed rows stand for our kernel on GPU preset ``gpu`` for calls of ``batch``
    requests of ``nodes`` x ``heads`` rows (default: the headline shape): ``cuda`` on the GPU the grids ran on, else
    the forced implementation of the configuration the launcher selects there for that shape over a ``kv`` pool
    (``launch_plan.select``; the rows pick it): on RTX PRO 6000 and RTX 5090 what sm_120 runs, timed on the H200
    forced."""
    from ..budget.presets import gpus
    from ..kernels.impls import IMPLS
    from ..kernels.launch_plan import NoConfiguration, select

    if gpu == MEASURED_ON:
        return "cuda"
    try:
        config = select(batch, nodes, heads, kv, gpus()[gpu].device)
    except NoConfiguration as exc:
        raise KernelTimeError(f"gpu {gpu}: {exc}") from None
    forced = [i.name for i in IMPLS.values() if i.kernel == config.name]
    if not forced:
        raise KernelTimeError(f"gpu {gpu}: its configuration {config.name} has no forced implementation to time")
    return forced[0]


def committed_grid(impl: str) -> Grid:
    """The newest committed issue grid holding bf16 rows of ``impl`` (``checks.bench_results.committed_grid``)."""
    try:
        return bench_results.committed_grid(impl)
    except LookupError as exc:
        raise KernelTimeError(str(exc)) from None


@dataclass(frozen=True)
class KernelTable:
    """Per-layer call times (ms) of one kernel on one GPU: ``series[(B, H, N)]`` = ((L, ms), ...) sorted by L;
    one-token decode has N = 1."""

    kernel: str  # "ours", "sglang" (verify) or "decode"
    impl: str
    gpu: str
    predicted: bool
    source: str
    ceilings: dict  # the run's measured ceilings (copy_gbps, gemm_tflops, mma_sync_tflops)
    series: dict[tuple[int, int, int], tuple[tuple[int, float], ...]] = field(repr=False)

    @property
    def label(self) -> str:
        how = f"predicted for {self.gpu} from H200 rows by the card model" if self.predicted else \
            f"measured on {self.gpu}"
        return f"{self.impl}, {how} ({self.source})"

    def scaled(self, factor: float) -> "KernelTable":
        """This table with every time multiplied by ``factor`` (a prediction's error band, ``card_checks``)."""
        return replace(self, series={k: tuple((n, ms * factor) for n, ms in v) for k, v in self.series.items()})

    def _axis(self, values: list[int], x: float, name: str, clamp_low: bool) -> tuple[int, int, float]:
        """Neighbours (lo, hi) of x among ``values`` and the weight of hi."""
        if x in values:
            return int(x), int(x), 0.0
        if x < values[0]:
            if clamp_low:
                return values[0], values[0], 0.0
            raise KernelTimeError(f"{name}: expected {values[0]} to {values[-1]} (the grid of {self.kernel} times), "
                                  f"found {x:g}")
        if x > values[-1]:
            raise KernelTimeError(f"{name}: expected {values[0]} to {values[-1]} (the grid of {self.kernel} times), "
                                  f"found {x:g}")
        i = bisect_left(values, x)
        lo, hi = values[i - 1], values[i]
        return lo, hi, (x - lo) / (hi - lo)

    def _along_l(self, key: tuple[int, int, int], prefix: float) -> tuple[float, bool]:
        """(ms, extrapolated) along one series' prefix lengths."""
        pts = self.series.get(key, ())
        if not pts or (len(pts) < 2 and prefix > pts[0][0]):
            raise KernelTimeError(f"B, H, N = {key}: {self.kernel} was timed at {len(pts)} prefix lengths, too few "
                                  f"to reach {prefix:g}")
        if prefix <= pts[0][0]:
            return pts[0][1], False
        for (l0, t0), (l1, t1) in zip(pts, pts[1:]):
            if prefix <= l1:
                return t0 + (t1 - t0) * (prefix - l0) / (l1 - l0), False
        (l0, t0), (l1, t1) = pts[-2], pts[-1]
        return t1 + (t1 - t0) * (prefix - l1) / (l1 - l0), True

    def lookup(self, batch: float, prefix: float, nodes: float, heads: int) -> tuple[float, bool]:
        """(ms of one call, whether a series was extrapolated past its longest timed prefix) for ``batch``
        requests, ``prefix`` tokens each, ``nodes`` query rows per request (1 for decode) and ``heads`` query heads
        on this GPU."""
        heads_known = sorted({h for _, h, _ in self.series})
        if heads not in heads_known:
            raise KernelTimeError(f"heads: {self.kernel} times exist for {heads_known} heads per GPU, not {heads}")
        b_lo, b_hi, wb = self._axis(sorted({b for b, h, _ in self.series if h == heads}), batch, "batch", False)
        out, extra = [], False
        for b in (b_lo, b_hi):
            ns = sorted({n for bb, h, n in self.series if bb == b and h == heads})
            n_lo, n_hi, wn = self._axis(ns, nodes, "nodes", True)
            (t_lo, e_lo), (t_hi, e_hi) = self._along_l((b, heads, n_lo), prefix), self._along_l((b, heads, n_hi), prefix)
            out.append(t_lo + (t_hi - t_lo) * wn)
            extra = extra or e_lo or e_hi
        return out[0] + (out[1] - out[0]) * wb, extra

    def ms(self, batch: float, prefix: float, nodes: float, heads: int) -> float:
        """Time of one call (ms); see ``lookup``."""
        return self.lookup(batch, prefix, nodes, heads)[0]


def _series(rows: list[dict], ms_of, one_token: bool) -> dict[tuple[int, int, int], tuple[tuple[int, float], ...]]:
    """Rows -> (B, H, N) -> sorted (L, ms); one-token decode rows (timed once per grid N) collapse to N = 1 with
    the median over their N."""
    acc: dict[tuple[int, int, int], dict[int, list[float]]] = {}
    for r in rows:
        key = (r["B"], r["H"], 1 if one_token else r["N"])
        acc.setdefault(key, {}).setdefault(r["L"], []).append(ms_of(r))
    return {k: tuple(sorted((length, statistics.median(v)) for length, v in d.items())) for k, d in acc.items()}


def table(kernel: str, gpu: str, measured: dict | None = None) -> KernelTable:
    """The ``kernel`` ("ours", "sglang" or "decode") times for GPU preset ``gpu``: from ``measured`` (a
    ``bench.run_grid`` result of this GPU) when given, else from the committed grids (predicted off the H200)."""
    from ..budget.presets import gpus

    if kernel not in KERNELS:
        raise KernelTimeError(f"kernel: expected one of {KERNELS}, found {kernel!r}")
    cards = gpus()
    if gpu not in cards:
        raise KernelTimeError(f"gpu: expected one of {', '.join(sorted(cards))}, found {gpu!r}")
    if measured is None and gpu != MEASURED_ON and gpu not in card_model.cards():
        raise KernelTimeError(f"gpu {gpu}: predicting its times from the H200's needs its card-model inputs "
                              "(gpus.yaml card_model); run notebook 07 on that GPU to measure them instead")
    if kernel == "ours-fp8":
        if measured is not None:
            rows = [r for r in measured["rows"] if r["impl"] == "cuda" and r.get("kv", "bf16") == "fp8"]
            if rows:
                return KernelTable(kernel, "cuda (fp8 pool)", gpu, False, "measured in this run",
                                   measured["ceilings"], _series(rows, lambda r: r["ms"], False))
        return _ours_fp8(gpu)
    impl = {"ours": "cuda" if measured else ours_impl(gpu), "sglang": SGLANG_VERIFY, "decode": SGLANG_DECODE}[kernel]
    one = kernel == "decode"
    if measured is not None:
        rows = [r for r in measured["rows"] if r["impl"] == impl and r.get("kv", "bf16") == "bf16"]
        if rows:
            return KernelTable(kernel, impl, gpu, False, "measured in this run", measured["ceilings"],
                               _series(rows, lambda r: r["ms"], one))
        impl = ours_impl(gpu) if kernel == "ours" else impl  # not timed here (SGLang absent): the committed rows
    grid = committed_grid(impl)
    if gpu == MEASURED_ON:
        return KernelTable(kernel, impl, gpu, False, grid.source, grid.ceilings,
                           _series(list(grid.rows), lambda r: r["ms"], one))
    card = card_model.card(gpu)
    if kernel != "ours":
        return KernelTable(kernel, impl, gpu, True, grid.source, grid.ceilings,
                           _series(list(grid.rows), lambda r: _predicted(r, card, impl), one))
    # ours: each shape from the committed rows of the configuration the card selects for it (by its rows N x H)
    runs: dict[str, tuple[Grid, dict]] = {}

    def run_of(name: str) -> tuple[Grid, dict]:
        if name not in runs:
            g = grid if name == impl else committed_grid(name)
            runs[name] = (g, {(x["B"], x["L"], x["N"], x["H"]): x for x in g.rows})
        return runs[name]

    picked = []
    for r in grid.rows:
        mine, key = ours_impl(gpu, r["B"], r["N"], r["H"]), (r["B"], r["L"], r["N"], r["H"])
        g, at = run_of(mine)
        if key not in at:
            raise KernelTimeError(f"impl {mine}: {g.source} has no row at B, L, N, H = {', '.join(map(str, key))}, "
                                  f"which {gpu} runs it for")
        picked.append((mine, at[key]))
    used = sorted({name for name, _ in picked})
    rows = [dict(x, ms=_predicted(x, card, name)) for name, x in picked]
    return KernelTable(kernel, " + ".join(used), gpu, True, "; ".join(dict.fromkeys(runs[n][0].source for n in used)),
                       grid.ceilings,
                       _series(rows, lambda r: r["ms"], one))


def _predicted(r: dict, card: card_model.Card, impl: str, kv: str = "bf16") -> float:
    """Row ``r`` (an H200 time of ``impl`` over a ``kv`` pool) carried to ``card`` by the card model (a prediction,
    ms)."""
    work = card_model.verify_work(impl, r["B"], r["L"], r["N"], r["H"], kv)
    return card_model.predict(r["ms"], work, card).ms


def fp8_kernel(impl: str) -> str | None:
    """The configuration an fp8 pool runs under implementation ``impl`` (a forced one: its kernel or the e4m3
    variant the launcher maps it to, ``launch_plan.AUTO_CONFIGS``), None where it reads no fp8 pool or selects per
    device."""
    from ..kernels.impls import IMPLS
    from ..kernels.launch_plan import AUTO_CONFIGS

    i = IMPLS.get(impl)
    if i is None or i.kernel is None or "fp8" not in i.kv_dtypes:
        return None
    if "bf16" not in i.kv_dtypes:  # an fp8 configuration forced: itself
        return i.kernel
    for a in AUTO_CONFIGS:  # automatic fp8 math: the e4m3 tensor-core configuration where it is the default
        if a.config.name == i.kernel and a.fp8 is not None:
            return (a.fp8_e4m3 if a.e4m3_default and a.fp8_e4m3 is not None else a.fp8).name
    return None


def _fp8_sources(gpu: str, config_name: str) -> tuple[list[str], str | None]:
    """(the implementations whose fp8-pool rows time ``config_name`` on GPU preset ``gpu``, the bf16 sibling whose
    rows stand in scaled while none has fp8 rows: the forced configuration of the same row tile that maps an fp8
    pool to it)."""
    from ..kernels.impls import IMPLS
    from ..kernels.launch_plan import AUTO_CONFIGS

    names = sorted(i for i in IMPLS if fp8_kernel(i) == config_name)
    if gpu == MEASURED_ON:
        names = ["cuda", *names]  # cuda on the H200 runs what the H200 selects
    sibling = None
    for a in AUTO_CONFIGS:
        for fp8 in (a.fp8, a.fp8_e4m3):
            if fp8 is not None and fp8.name == config_name and a.config.block_m == fp8.block_m:
                sibling = next((i for i in IMPLS if IMPLS[i].kernel == a.config.name), None)
    if gpu == MEASURED_ON:
        sibling = "cuda"
    return names, sibling


def _grid_ratio(fp8: Grid, bf16: Grid) -> tuple[float, int]:
    """(the median time ratio of ``fp8``'s rows over ``bf16``'s at the shapes both hold, how many)."""
    at = {(x["B"], x["L"], x["N"], x["H"]): x["ms"] for x in bf16.rows}
    ratios = [x["ms"] / at[k] for x in fp8.rows if (k := (x["B"], x["L"], x["N"], x["H"])) in at]
    if not ratios:
        raise KernelTimeError(f"{fp8.source} and {bf16.source} share no shape")
    return statistics.median(ratios), len(ratios)


POOL_PRESETS = ("fp8", "hopper-fp8", "issue-fp8")  # the bench presets made to time shapes over both pools (a peer's
# preset, b12x's for one, times its own narrower shapes over both pools too: not the ratio a step model should read)


def pool_ratio(impl: str) -> tuple[float, str, int]:
    """(the median fp8 / bf16 time ratio of ``impl`` over the shapes a committed run timed over both pools, that
    run's path, the shapes): the newest such run of a POOL_PRESETS preset under data/results/h200/."""
    from ..checks.bench_results import RESULTS

    found = []
    for path in (RESULTS / MEASURED_ON).rglob("bench-*.json"):
        if path.name.endswith(".partial.json"):
            continue
        data = json.loads(path.read_text())
        if data.get("preset") not in POOL_PRESETS:
            continue
        by = {(r["B"], r["L"], r["N"], r["H"], r.get("kv", "bf16")): r["ms"] for r in data.get("rows", [])
              if r["impl"] == impl}
        ratios = [ms / by[k[:4] + ("bf16",)] for k, ms in by.items() if k[4] == "fp8" and k[:4] + ("bf16",) in by]
        if ratios:
            found.append((data.get("provenance", {}).get("date_utc", ""), str(path.relative_to(ROOT)), ratios))
    if not found:
        raise KernelTimeError(f"impl {impl}: no committed run timed it over both a bf16 and an fp8 pool")
    date, src, ratios = max(found)
    return statistics.median(ratios), src, len(ratios)


def _ours_fp8(gpu: str) -> KernelTable:
    """Our kernel over an fp8 pool on GPU preset ``gpu``: per shape of the issue grid, the configuration the
    launcher runs for an fp8 pool there, from committed fp8-pool rows of it, else from its bf16 sibling's rows times
    the H200 pool ratio (``pool_ratio``); carried to an sm_120 card with the fp8 pool's bytes."""
    from ..budget.presets import gpus
    from ..kernels.launch_plan import NoConfiguration, select

    card = gpus()[gpu]
    target = card_model.card(gpu) if gpu != MEASURED_ON else None
    shapes = committed_grid(ours_impl(gpu)).rows
    grids: dict[tuple[str, str], Grid | None] = {}

    def grid_of(impl: str, kv: str) -> Grid | None:
        if (impl, kv) not in grids:
            try:
                grids[(impl, kv)] = committed_grid(impl) if kv == "bf16" else bench_results.committed_grid(impl, "fp8")
            except (KernelTimeError, LookupError):
                grids[(impl, kv)] = None
        return grids[(impl, kv)]

    picked, how = [], {}
    for r in shapes:
        key = (r["B"], r["L"], r["N"], r["H"])
        try:
            name = select(r["B"], r["N"], r["H"], "fp8", card.device).name
        except NoConfiguration as exc:
            raise KernelTimeError(f"gpu {gpu}: {exc}") from None
        names, sibling = _fp8_sources(gpu, name)
        row = None
        for impl in names:
            g = grid_of(impl, "fp8")
            at = {(x["B"], x["L"], x["N"], x["H"]): x for x in g.rows} if g else {}
            if key in at:
                row, grid, scale = at[key], g, 1.0
                how[f"{impl} over fp8 ({g.source})"] = None
                break
        if row is None:
            g = grid_of(sibling, "bf16") if sibling else None
            at = {(x["B"], x["L"], x["N"], x["H"]): x for x in g.rows} if g else {}
            if key not in at:
                raise KernelTimeError(f"gpu {gpu}: no committed rows time {name} over an fp8 pool at B, L, N, H = "
                                      f"{', '.join(map(str, key))}, nor its bf16 sibling's")
            fp8_grids = [(i, f) for i in names if (f := grid_of(i, "fp8")) is not None]
            if fp8_grids:  # the configuration's fp8 rows elsewhere in the grid over its sibling's bf16 rows
                impl, f = fp8_grids[0]
                scale, n = _grid_ratio(f, g)
                row, grid = at[key], g
                how[f"{sibling} bf16 rows ({g.source}) x {scale:.3f}, {impl}'s fp8 / {sibling}'s bf16 time (median "
                    f"of the {n} shapes {f.source} holds)"] = None
            else:
                scale, src, n = pool_ratio(sibling)
                row, grid = at[key], g
                how[f"{sibling} bf16 rows ({g.source}) x {scale:.3f}, its fp8 / bf16 time on the H200 (median of {n} "
                    f"shapes, {src})"] = None
        ms = row["ms"] * scale
        if target is not None:  # the fp8 configuration's work (its MMA kind and row tile) over the fp8 pool's bytes
            ms = _predicted(dict(row, ms=ms), target, _forced(name), kv="fp8")
        picked.append(dict(row, ms=ms))
    predicted = gpu != MEASURED_ON
    label_src = "; ".join(how)
    impl = " + ".join(sorted({k.split(" ")[0] for k in how})) + " (fp8 pool)"
    ceilings = next(g for g in grids.values() if g is not None).ceilings
    return KernelTable("ours-fp8", impl, gpu, predicted, label_src, ceilings, _series(picked, lambda r: r["ms"], False))


def _forced(config_name: str) -> str:
    """The forced implementation of configuration ``config_name``."""
    from ..kernels.impls import IMPLS

    found = [i.name for i in IMPLS.values() if i.kernel == config_name]
    if not found:
        raise KernelTimeError(f"configuration {config_name}: no forced implementation to carry its work")
    return found[0]


def card_predictions(rows: list[dict]) -> list[dict]:
    """For each H200 row (a ``bench`` result's) of a configuration an sm_120 card runs for its shape and pool (the
    launcher's choice there), the card model's time on every card (a prediction) and its bound; JSON-ready."""
    from ..budget.presets import gpus
    from ..kernels.impls import IMPLS
    from ..kernels.launch_plan import NoConfiguration, select

    cards = card_model.cards()
    out = []
    for r in rows:
        kv, impl = r.get("kv", "bf16"), r["impl"]
        i = IMPLS.get(impl)
        if i is None or i.kernel is None:
            continue
        try:
            chosen = {select(r["B"], r["N"], r["H"], kv, gpus()[name].device).name for name in cards}
        except NoConfiguration:
            continue
        if chosen != {i.kernel}:
            continue
        row = {"B": r["B"], "L": r["L"], "N": r["N"], "H": r["H"], "pool": kv, "impl": impl, "H200 ms": r["ms"]}
        for name, c in cards.items():
            pred = card_model.predict(r["ms"], card_model.verify_work(impl, r["B"], r["L"], r["N"], r["H"], kv), c)
            row[f"{name} ms (predicted)"] = round(pred.ms, 4)
            row[f"{name} bound"] = pred.bound
        out.append(row)
    return out


def tables(gpu: str, measured: dict | None = None) -> dict[str, KernelTable]:
    """Every table a step needs, keyed by ``KERNELS``."""
    return {k: table(k, gpu, measured) for k in KERNELS}


def device_mismatch(gpu: str) -> str | None:
    """None when the CUDA device present is GPU preset ``gpu`` (every part of the preset's name appears in the
    device's), else why not."""
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU, found none"
    name = torch.cuda.get_device_name(0)
    if not all(part in name.lower() for part in gpu.split("-")):
        return f"the GPU present is {name!r}, not the preset {gpu!r}"
    return None


def measure_here(gpu: str, heads: int, batch: int, progress: bool = True) -> tuple[dict | None, str | None]:
    """(this GPU's kernel times for a sweep at ``batch`` with ``heads`` heads per GPU, None) when the device is
    preset ``gpu``; (None, why not) otherwise, without touching the GPU."""
    why = device_mismatch(gpu)
    if why:
        return None, why
    return measure(batches_for(batch), heads, progress), None


def batches_for(batch: int) -> tuple[int, ...]:
    """The grid's batch sizes a sweep at ``batch`` interpolates between (the batch itself when the grid has it)."""
    from ..checks.bench_presets import preset

    grid = sorted({s.batch for s, _ in preset("issue")})
    if batch in grid:
        return (batch,)
    above = [b for b in grid if b > batch]
    below = [b for b in grid if b < batch]
    return tuple(x for x in (below[-1] if below else None, above[0] if above else None) if x is not None) or \
        tuple(grid[-2:])


def measure(batches: tuple[int, ...], heads: int, progress: bool = True, method: str = "graph") -> dict:
    """Time the issue grid's shapes for these batch sizes and heads on this GPU, with our kernel (the configuration
    it selects), SGLang's verify and SGLang's decode, ceilings first; the grid's own rule leaves SGLang out where one
    call would take seconds. Returns a ``checks.bench.run_grid`` result. Needs a CUDA GPU (and SGLang for its rows)."""
    from dataclasses import asdict

    from ..checks import bench
    from ..checks.bench_presets import preset
    from ..checks.timing import measure_ceilings
    from ..core.display import progress as bar

    items = [(s, [i for i in impls if i in ("cuda", "sglang_extend", "sglang_decode")])
             for s, impls in preset("issue") if s.batch in batches and s.heads == heads]
    if not items:
        raise KernelTimeError(f"batches {batches}, heads {heads}: the issue grid has no such shapes")
    ceilings = measure_ceilings()
    rows: list[dict] = []
    it = bar(items, desc="kernel times", unit="shape") if progress else items
    for shape, impls in it:
        rows += bench.run_grid([shape], impls, ceilings, progress=False, method=method)["rows"]
    return {"preset": "issue (subset)", "ceilings": asdict(ceilings), "sglang": bench.sglang_available(),
            "timing": method, "rows": rows}
