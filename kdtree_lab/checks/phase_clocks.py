"""Where a short call's time goes inside its CTAs (issue 52, the fixed cost): the phase clocks of a library built
with ``KDT_PHASE_CLOCKS=1`` (``kernels/common/phase.cuh``). Lane 0 of each warp of the sm_120 e4m3 forms, of the
bf16 role split (``cuda_sm120_roles``, whose code the 64-row e4m3 form's draft block runs) and of the combine stamps
its SM's cycle counter and the global nanosecond timer at named points (``MARKS``); this module reads the stamps of one call and splits the call: per role (QK warps, PV warps, the draft block's CTA) how long
after its CTA's entry each point is reached, how far apart the CTAs start, and when the combine starts and ends
against the split kernel. ``kdtree_lab.checks.call_anatomy`` splits a call between its kernels; this splits a
kernel. A phase library's times are its own (each stamp is a branch and two stores): read the split, and take the
call's time from the normal library. Each prefix CTA's own row (its SM, tiles, when it ends, its time a tile) is
kept too, and ``spread`` says how far the last CTA ends past the median one and whether the same SMs are slow each
call.

    KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab.checks.phase_clocks --impl cuda_sm120_e4m3_32 \\
        --shape 1,128,4,8 --shape 1,4096,4,8 --out phase.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# kernels/common/phase.cuh (tests/test_phase_clocks.py holds the two to the same values)
MARKS = ("entry", "work", "ready", "prologue", "first", "tile0", "loop", "done")
PHASE_CTAS, PHASE_WARPS, PHASE_KERNELS = 2048, 16, 3
QK_WARPS = 4  # both e4m3 forms: warps 0-3 are the QK group, the rest the PV group
SPLIT, COMBINE, QPASS = 0, 1, 2  # QPASS: the e4m3 forms' Q pass, which stamps entry and done only


STAMP_BYTES = PHASE_KERNELS * PHASE_CTAS * PHASE_WARPS * len(MARKS) * 16  # a (cycles, ns) pair of uint64 each


def buffer_bytes() -> int:
    """The size of ``PhaseBuffers``: a (cycles, ns) pair of uint64 per kernel, CTA, warp and mark, then 4 int32 a CTA."""
    return STAMP_BYTES + PHASE_CTAS * 4 * 4


@dataclass(frozen=True)
class Stamps:
    """One call's phase clocks. ``stamps`` [kernel, cta, warp, mark, 2] uint64: (SM cycles, global ns), 0 where the
    point was not reached; ``meta`` [cta, 4] int32 of the split kernel's CTAs: SM, tiles, draft block, written."""

    stamps: np.ndarray
    meta: np.ndarray


def decode(raw: np.ndarray) -> Stamps:
    """``raw`` (uint8, ``buffer_bytes()`` long, as ``kdtree_verify_phase_clocks`` copies it) as :class:`Stamps`."""
    if raw.dtype != np.uint8 or raw.size != buffer_bytes():
        raise ValueError(f"phase clocks: expected {buffer_bytes()} bytes of uint8, found {raw.size} of {raw.dtype}")
    stamps = raw[:STAMP_BYTES].view(np.uint64).reshape(PHASE_KERNELS, PHASE_CTAS, PHASE_WARPS, len(MARKS), 2)
    meta = raw[STAMP_BYTES:].view(np.int32).reshape(PHASE_CTAS, 4)
    return Stamps(stamps, meta)


def _call(lib, dst, size: int, clear: bool) -> int:
    got = lib.kdtree_verify_phase_clocks(dst, size, int(clear))
    if got == 0:
        raise RuntimeError("phase clocks: the library was not built with KDT_PHASE_CLOCKS=1 (set it in the "
                           "environment before the first kernel call: kdtree_lab.kernels.build.phase_clocks)")
    if got < 0:
        why = lib.kdtree_verify_strerror(-got)
        raise RuntimeError(f"phase clocks: kdtree_verify_phase_clocks failed: {why.decode() if why else -got}")
    if got != buffer_bytes():
        raise RuntimeError(f"phase clocks: the library's buffer is {got} B, this module reads {buffer_bytes()} B "
                           "(kernels/common/phase.cuh and MARKS here disagree)")
    return got


def clear(lib) -> None:
    """Zero the stamps (after the device's work so far)."""
    _call(lib, None, 0, True)


def read(lib, then_clear: bool = True) -> Stamps:
    """The stamps of everything launched since the last clear (waits for the device), then zeroed again."""
    raw = np.zeros(buffer_bytes(), np.uint8)
    _call(lib, raw.ctypes.data, raw.size, then_clear)
    return decode(raw)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def _live_ctas(s: Stamps, ncta: int) -> list[int]:
    """The split kernel's CTAs (of the first ``ncta``) that stamped their entry."""
    return [c for c in range(min(ncta, PHASE_CTAS)) if s.stamps[SPLIT, c, :, MARKS.index("entry"), 1].any()]


def _first_entry_ns(s: Stamps, c: int) -> int:
    """Split CTA ``c``'s first entry stamp on the global timer (ns)."""
    e = s.stamps[SPLIT, c, :, MARKS.index("entry"), 1]
    return int(e[e > 0].min())


def _since_entry_us(s: Stamps, c: int, warps: range, mark: str, ghz: float | None,
                    timer: bool = False) -> float | None:
    """The last of ``warps`` of split CTA ``c`` at ``mark``, from the CTA's first entry, in us (None: no warp reached
    it): in cycles at ``ghz``, or with ``timer`` on the global timer."""
    v = s.stamps[SPLIT, c, :, :, 1 if timer else 0]
    v0 = int(v[:, 0][v[:, 0] > 0].min())
    at = [int(v[w, MARKS.index(mark)]) for w in warps if w < PHASE_WARPS and v[w, MARKS.index(mark)] > 0]
    if not at or not (ghz or timer):
        return None
    return (max(at) - v0) / (1.0 if timer else ghz) / 1000.0


def _nearest_rank(xs: list[float], q: float) -> float | None:
    """The element of sorted ``xs`` at quantile ``q`` by nearest rank (None for an empty list)."""
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else None


def sm_clock(calls: list[Stamps], ncta: int, min_span_ns: int = 2000) -> dict[str, float | int | None]:
    """The SM clock the cycle stamps run at, pooled over every CTA of ``calls`` whose stamps span at least
    ``min_span_ns`` on the global timer: sum of cycle spans / sum of ns spans (GHz), how many CTAs gave it, and the
    global timer's smallest step seen (ns): PTX leaves its resolution open, and at a few microseconds a CTA a coarse
    timer would mislead a per-call estimate."""
    dc = dn = 0.0
    used, steps = 0, []
    for s in calls:
        for c in _live_ctas(s, ncta):
            live = s.stamps[SPLIT, c][s.stamps[SPLIT, c, :, :, 1] > 0]
            span_ns = float(live[:, 1].max() - live[:, 1].min())
            ns = np.unique(live[:, 1])
            if ns.size > 1:
                steps.append(int(np.diff(ns).min()))
            if span_ns >= min_span_ns:
                dc += float(live[:, 0].max() - live[:, 0].min())
                dn += span_ns
                used += 1
    return {"sm_clock_ghz": round(dc / dn, 4) if dn else None, "clock_ctas": used,
            "timer_step_ns": min(steps) if steps else None}


def summarize(s: Stamps, grid: tuple[int, int, int], ghz: float | None = None,
              qk_warps: int = QK_WARPS) -> dict[str, float | int | None]:
    """One call's split as a flat dict (times in us). ``grid`` the split kernel's (x, y, z) = (row tiles, nsplit + 1,
    bs); ``ghz`` the SM clock (``sm_clock`` over several calls; default: this call's own). Per prefix CTA and role
    (``qk``: warps < ``qk_warps``, ``pv``: the rest) the time from the CTA's first entry stamp to the role's last
    warp reaching each mark, in cycles at ``ghz``; their median and max over prefix CTAs
    (``prefix.<role>.<mark>.median_us`` / ``.max_us``; the same on the global timer: ``.median_timer_us``), the
    draft block's (``draft.<mark>_us`` over all its warps for work, ready and done; ``draft.<role>.<mark>_us`` for
    prologue .. loop; the latest over the draft CTAs), the CTAs' entry spread and the kernels' spans on the global timer (from the split kernel's first
    entry): ``split.end_us`` (last stamp), ``combine.entry_us``, ``combine.wait_done_us``, ``combine.end_us``, and
    for the e4m3 forms ``qpass.entry_us`` (its first CTA's entry, before the split kernel's: negative) and
    ``qpass.end_us`` (its last CTA's end; None where the call ran no Q pass), ``split.entered_after_qpass`` (how many
    split CTAs entered after that end) and ``split.entered_after_qpass_end_us`` (the latest end among them). Raises
    ValueError where no split-kernel CTA stamped its entry."""
    gx, gy, gz = grid
    st, meta = s.stamps, s.meta
    ncta = min(gx * gy * gz, PHASE_CTAS)
    ctas = _live_ctas(s, ncta)
    if not ctas:
        raise ValueError("phase clocks: no CTA of the split kernel stamped its entry (was the phase library run?)")
    clock = sm_clock([s], ncta) if ghz is None else {"sm_clock_ghz": ghz}
    ghz = clock["sm_clock_ghz"]
    out: dict[str, float | int | None] = {**clock, "ctas": len(ctas)}
    first_ns = [_first_entry_ns(s, c) for c in ctas]
    t0_ns = min(first_ns)

    def since_entry_us(c: int, warps: range, mark: str, timer: bool = False) -> float | None:
        return _since_entry_us(s, c, warps, mark, ghz, timer)

    prefix = [c for c in ctas if meta[c, 3] and not meta[c, 2]]
    draft = [c for c in ctas if meta[c, 3] and meta[c, 2]]
    out["prefix.ctas"], out["draft.ctas"] = len(prefix), len(draft)
    out["empty.ctas"] = len(ctas) - len(prefix) - len(draft)  # past the rows or an empty split: entry, then exit
    out["prefix.tiles.median"] = _median([float(meta[c, 1]) for c in prefix])
    roles = {"qk": range(qk_warps), "pv": range(qk_warps, PHASE_WARPS)}
    for role, warps in roles.items():
        for mark in MARKS[1:]:
            xs = [x for c in prefix if (x := since_entry_us(c, warps, mark)) is not None]
            out[f"prefix.{role}.{mark}.median_us"] = _median(xs)
            out[f"prefix.{role}.{mark}.max_us"] = round(max(xs), 3) if xs else None
            ts = [x for c in prefix if (x := since_entry_us(c, warps, mark, timer=True)) is not None]
            out[f"prefix.{role}.{mark}.median_timer_us"] = _median(ts)
    for mark in ("work", "ready", "done"):
        xs = [x for c in draft if (x := since_entry_us(c, range(PHASE_WARPS), mark)) is not None]
        out[f"draft.{mark}_us"] = round(max(xs), 3) if xs else None
    for role, warps in roles.items():  # the draft block by role (the 64-row form's: the bf16 role split's code)
        for mark in MARKS[3:-1]:
            xs = [x for c in draft if (x := since_entry_us(c, warps, mark)) is not None]
            out[f"draft.{role}.{mark}_us"] = round(max(xs), 3) if xs else None
    out["split.entry_spread_us"] = round((max(first_ns) - t0_ns) / 1000.0, 3)
    split_ns = st[SPLIT, :ncta, :, :, 1]
    out["split.end_us"] = round((int(split_ns.max()) - t0_ns) / 1000.0, 3)
    last = max(ctas, key=lambda c: int(split_ns[c].max()))
    # its blockIdx.y, not its split: y 0 is the draft block where the grid fits one wave (setup_work); last_cta_draft
    # says which
    out["split.last_cta"], out["split.last_cta_y"] = last, (last // gx) % gy
    out["split.last_cta_draft"] = int(meta[last, 2])
    for kernel, key, mark, pick in ((COMBINE, "combine.entry_us", "entry", min),
                                     (COMBINE, "combine.wait_done_us", "prologue", max),
                                     (COMBINE, "combine.end_us", "done", max),
                                     (QPASS, "qpass.entry_us", "entry", min), (QPASS, "qpass.end_us", "done", max)):
        v = st[kernel, :, :, MARKS.index(mark), 1]
        v = v[v > 0]
        out[key] = round((int(pick(v)) - t0_ns) / 1000.0, 3) if v.size else None
    # the split CTAs that entered only after the Q pass's last CTA ended (on the SMs it held, as a split CTA needs the
    # whole register file: the hypothesis these test) and the latest end among them
    qdone = st[QPASS, :, :, MARKS.index("done"), 1]
    qdone = qdone[qdone > 0]
    late = [c for c, f in zip(ctas, first_ns) if qdone.size and f >= int(qdone.max())]
    out["split.entered_after_qpass"] = len(late) if qdone.size else None
    out["split.entered_after_qpass_end_us"] = (round((max(int(split_ns[c].max()) for c in late) - t0_ns) / 1000.0, 3)
                                               if late else None)
    return out


def prefix_ctas(s: Stamps, grid: tuple[int, int, int], ghz: float, qk_warps: int = QK_WARPS) -> list[dict]:
    """One row per prefix CTA of one call: ``cta`` (its linear block index), ``sm``, ``x`` / ``y`` / ``z`` (row tile,
    blockIdx.y, request), ``tiles``; on the global timer from the call's first entry (us): ``entry_us`` and
    ``end_us`` (its last stamp); from its own entry in cycles at ``ghz`` (us): ``qk_loop_us``, ``pv_loop_us``,
    ``pv_done_us``, and ``tile_us``, the PV warps' time a tile after tile 0 ((loop - tile0) / (tiles - 1); None for
    a CTA of one tile). Which CTAs end a call, and whether they are slow every call (the same SMs) or by chance,
    is read from these rows (:func:`spread`)."""
    gx, gy, gz = grid
    meta = s.meta
    ncta = min(gx * gy * gz, PHASE_CTAS)
    ctas = _live_ctas(s, ncta)
    if not ctas:
        return []
    ns = s.stamps[SPLIT, :ncta, :, :, 1]
    first = {c: _first_entry_ns(s, c) for c in ctas}
    t0 = min(first.values())
    rows = []
    for c in ctas:
        if not meta[c, 3] or meta[c, 2]:
            continue

        def last(warps: range, mark: str) -> float | None:
            x = _since_entry_us(s, c, warps, mark, ghz)
            return None if x is None else round(x, 3)

        qk, pv = range(qk_warps), range(qk_warps, PHASE_WARPS)
        tiles = int(meta[c, 1])
        pv_tile0, pv_loop = last(pv, "tile0"), last(pv, "loop")
        tile = (round((pv_loop - pv_tile0) / (tiles - 1), 4) if tiles > 1 and None not in (pv_tile0, pv_loop)
                else None)
        rows.append({"cta": c, "sm": int(meta[c, 0]), "x": c % gx, "y": (c // gx) % gy, "z": c // (gx * gy),
                     "tiles": tiles, "entry_us": round((first[c] - t0) / 1000.0, 3),
                     "end_us": round((int(ns[c].max()) - t0) / 1000.0, 3), "qk_loop_us": last(qk, "loop"),
                     "pv_loop_us": pv_loop, "pv_done_us": last(pv, "done"), "tile_us": tile})
    return rows


def spread(calls: list[list[dict]]) -> dict[str, float | int | None]:
    """How far apart the prefix CTAs of repeated calls of one launch end, and whether the same SMs are slow each
    call. ``calls``: :func:`prefix_ctas` of each call. Over all rows: ``tile_us.{p10,median,p90,max}``; per call the
    latest ``end_us`` against the median (``end_us.median``, ``end_us.max``, ``end_over_median``: their ratio, the
    median over calls) and the CTAs of the modal tile count only (a short last split ends early by design);
    ``same_sm_r``: the mean over pairs of calls of the correlation, across SMs, of each SM's ``end_us`` (near 1: the
    same SMs are slow every call, a place; near 0: by chance); ``slowest_sms``: the SMs that ended a call last, most
    often first; ``pair_end_diff_us.{median,p90}``: how far apart the row tiles of one split (the CTAs that read the
    same keys) end, over every such pair of every call."""
    rows = [r for c in calls for r in c]
    if not rows:
        return {}
    tiles = statistics.mode(r["tiles"] for r in rows)
    out: dict = {"tiles": tiles}
    ts = sorted(r["tile_us"] for r in rows if r["tile_us"] is not None and r["tiles"] == tiles)
    for name, q in (("p10", 0.1), ("median", 0.5), ("p90", 0.9), ("max", 1.0)):
        out[f"tile_us.{name}"] = None if not ts else round(_nearest_rank(ts, q), 4)
    meds, maxs, ratios, slowest = [], [], [], []
    for c in calls:
        ends = [r["end_us"] for r in c if r["tiles"] == tiles]
        if not ends:
            continue
        m = statistics.median(ends)
        meds.append(m)
        maxs.append(max(ends))
        ratios.append(max(ends) / m if m else None)
        slowest.append(max((r for r in c if r["tiles"] == tiles), key=lambda r: r["end_us"])["sm"])
    out["end_us.median"] = round(statistics.median(meds), 3) if meds else None
    out["end_us.max"] = round(statistics.median(maxs), 3) if maxs else None
    rs = [x for x in ratios if x is not None]
    out["end_over_median"] = round(statistics.median(rs), 4) if rs else None
    by_sm = [{r["sm"]: r["end_us"] for r in c if r["tiles"] == tiles} for c in calls]
    common = sorted(set.intersection(*(set(d) for d in by_sm))) if by_sm else []
    corr = []
    for i in range(len(by_sm)):
        for j in range(i + 1, len(by_sm)):
            a = np.array([by_sm[i][k] for k in common], float)
            b = np.array([by_sm[j][k] for k in common], float)
            if len(common) > 2 and a.std() > 0 and b.std() > 0:
                corr.append(float(np.corrcoef(a, b)[0, 1]))
    out["same_sm_r"] = round(statistics.fmean(corr), 3) if corr else None
    out["slowest_sms"] = [sm for sm, _ in sorted(((sm, -slowest.count(sm)) for sm in set(slowest)),
                                                 key=lambda x: (x[1], x[0]))]
    diffs = []
    for c in calls:
        by_split: dict[tuple[int, int], list[float]] = {}
        for r in c:
            if r["tiles"] == tiles:
                by_split.setdefault((r["z"], r["y"]), []).append(r["end_us"])
        diffs += [abs(a - b) for ends in by_split.values() for i, a in enumerate(ends) for b in ends[i + 1:]]
    diffs.sort()
    for name, q in (("median", 0.5), ("p90", 0.9)):
        out[f"pair_end_diff_us.{name}"] = None if not diffs else round(_nearest_rank(diffs, q), 3)
    return out


def median_summary(runs: list[dict]) -> dict:
    """Each key's median over repeated calls' summaries (None where no call had it)."""
    keys = list(dict.fromkeys(k for r in runs for k in r))
    out = {}
    for k in keys:
        xs = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
        out[k] = round(statistics.median(xs), 3) if xs else None
    return out


def table(summary: dict) -> str:
    """The split as a few readable lines: per mark the prefix CTAs' QK and PV times (median / max us)."""
    lines = [f"{'mark':<9} {'QK median':>10} {'QK max':>8} {'PV median':>10} {'PV max':>8}"]
    for mark in MARKS[1:]:
        cells = [summary.get(f"prefix.{r}.{mark}.{s}_us") for r in ("qk", "pv") for s in ("median", "max")]
        lines.append(f"{mark:<9} " + " ".join(f"{'-' if v is None else f'{v:.2f}':>{w}}"
                                              for v, w in zip(cells, (10, 8, 10, 8))))
    draft = [f"{mark} {summary[k]:.2f}/{summary[v]:.2f}" for mark in MARKS[3:-1]
             if isinstance(summary.get(k := f"draft.qk.{mark}_us"), (int, float))
             and isinstance(summary.get(v := f"draft.pv.{mark}_us"), (int, float))]
    if draft:
        lines.append("draft block (QK/PV us): " + ", ".join(draft))
    lines.append(f"SM clock {summary.get('sm_clock_ghz')} GHz over {summary.get('clock_ctas')} CTAs, global timer "
                 f"step {summary.get('timer_step_ns')} ns")
    lines.append(f"draft block done {summary.get('draft.done_us')} us; CTAs start over "
                 f"{summary.get('split.entry_spread_us')} us; split kernel ends {summary.get('split.end_us')} us; "
                 f"combine {summary.get('combine.entry_us')} -> {summary.get('combine.wait_done_us')} -> "
                 f"{summary.get('combine.end_us')} us"
                 + (f"; Q pass {summary['qpass.entry_us']} -> {summary.get('qpass.end_us')} us, "
                    f"{summary.get('split.entered_after_qpass')} split CTAs entered after it (the last ending at "
                    f"{summary.get('split.entered_after_qpass_end_us')} us)"
                    if summary.get("qpass.entry_us") is not None else ""))
    return "\n".join(lines)


def measure(impl: str, shape, nsplit: int = 0, repeats: int = 5, warmup: int = 3) -> dict:
    """``repeats`` replays of one call of ``impl`` at ``shape`` (a ``roofline.Shape``) captured in a CUDA graph, as
    SGLang runs verify (after ``warmup`` eager calls), each read; the SM clock pooled over all of them; returns the
    shape, the grid, each replay's summary and their median."""
    import torch

    from ..kernels import loader
    from ..kernels.attention import VerifyAttention, batch_args
    from .bench import shape_batches

    batch = shape_batches(shape, 1)[0]
    attn = VerifyAttention(shape.batch, shape.draft, shape.heads, shape.kv, impl=impl, nsplit=nsplit)
    cfg, ns = attn.config(shape.batch), attn.nsplit(shape.batch)
    rows = shape.draft * shape.heads
    grid = (-(-rows // cfg.block_m) * cfg.cluster, ns + 1, shape.batch)
    lib = loader.library().lib
    args = batch_args(batch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            attn.run(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        attn.run(*args)
    clear(lib)
    calls = []
    for _ in range(repeats):
        graph.replay()
        calls.append(read(lib))
    clock = sm_clock(calls, grid[0] * grid[1] * grid[2])
    runs = [summarize(c, grid, clock["sm_clock_ghz"]) | {k: v for k, v in clock.items() if k != "sm_clock_ghz"}
            for c in calls]
    ctas = [prefix_ctas(c, grid, clock["sm_clock_ghz"]) for c in calls] if clock["sm_clock_ghz"] else []
    try:
        nvml_mhz = torch.cuda.clock_rate()  # the SM clock NVML reports now, beside the stamps' own
    except Exception:  # noqa: BLE001 (no NVML in this environment)
        nvml_mhz = None
    return {"impl": impl, "kernel": cfg.name, "shape": vars(shape), "nsplit": ns, "grid": list(grid),
            "launch": "graph replay", "nvml_sm_mhz": nvml_mhz, "runs": runs, "median": median_summary(runs),
            "spread": spread(ctas), "ctas": ctas}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="cuda_sm120_e4m3_32",
                    help="an IMPLS name: one of the two e4m3 forms, or cuda_sm120_roles (with --kv bf16)")
    ap.add_argument("--shape", action="append", default=[], help="B,L,N,H (tree mask); repeatable")
    ap.add_argument("--kv", choices=("fp8", "bf16"), default="fp8", help="the pool's dtype")
    ap.add_argument("--nsplit", type=int, default=0, help="0: the automatic split count")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if os.environ.get("KDT_PHASE_CLOCKS") != "1":
        print("phase_clocks: KDT_PHASE_CLOCKS: expected 1 in the environment (the phase library), found "
              f"{os.environ.get('KDT_PHASE_CLOCKS')!r}", file=sys.stderr)
        return 2
    from .roofline import Shape

    shapes = []
    for text in a.shape or ["1,128,4,8", "1,4096,4,8"]:
        try:
            b, length, n, h = (int(x) for x in text.split(","))
        except ValueError:
            print(f"phase_clocks: --shape: expected B,L,N,H (four integers), found {text!r}", file=sys.stderr)
            return 2
        shapes.append(Shape(b, length, n, h, kv=a.kv))
    results: list[dict] = []
    failed = 0
    for shape in shapes:
        try:
            r = measure(a.impl, shape, a.nsplit, a.repeats)
        except Exception as e:  # noqa: BLE001 (recorded with the shape; the other shapes still run)
            failed += 1
            results.append({"impl": a.impl, "shape": vars(shape), "error": f"{type(e).__name__}: {e}"})
            print(f"== {a.impl} B={shape.batch} L={shape.prefix} N={shape.draft} H={shape.heads}: {results[-1]['error']}",
                  flush=True)
        else:
            results.append(r)
            print(f"== {a.impl} ({r['kernel']}) B={shape.batch} L={shape.prefix} N={shape.draft} H={shape.heads} "
                  f"nsplit={r['nsplit']} grid={tuple(r['grid'])}, median of {a.repeats} graph replays", flush=True)
            print(table(r["median"]), flush=True)
            if r.get("spread"):
                print("prefix CTAs: " + ", ".join(f"{k} {v}" for k, v in r["spread"].items()), flush=True)
        # after each shape, whole (a call cut off later keeps these); the device call's provenance.json says where
        tmp = a.out.with_name(a.out.name + ".partial")
        tmp.write_text(json.dumps({"command": " ".join(sys.argv), "marks": MARKS, "results": results,
                                   "complete": len(results) == len(shapes)}, indent=1))
        tmp.replace(a.out)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
