"""The sm_120 kernels forced on the H200: what a card selects per shape, the issue grids of both generations, their
targets with what bounds each miss, and NVIDIA's XQA MLA kernel beside them."""

from __future__ import annotations

import json
from pathlib import Path

from kdtree_lab.checks.bench_results import streaming_fits
from kdtree_lab.speculate.kernel_times import ours_impl

from .common import _bench, _long_compute_bound, _long_memory_bound, _rel, _span, _target_lines, _timing_words
from .runs import HEADLINE, NCU_ROLES, SM120_BENCH, SM120_FIRST, SM120_ROLES, SM120_RUN, SM120_SHAPES, SPLIT_FLOOR, XQA_PEER


def sm120_table() -> str:
    """The sm_120 kernel forced on the H200 beside v1 (what sm_120 ran before), v3, v4 and SGLang, one run."""
    data, by_shape = _bench(SM120_BENCH)
    c = data["ceilings"]
    lines = [f"From `{_rel(SM120_BENCH)}`: {_timing_words(data)}; ceilings in the same run: copy "
             f"{c['copy_gbps']:.0f} GB/s, cuBLAS GEMM {c['gemm_tflops']:.0f} TFLOP/s, mma.sync m16n8k16 loop "
             f"{c['mma_sync_tflops']:.0f} TFLOP/s. Times in ms; H200 runs, not sm_120 runs.", "",
             "| B, L, N, H | v1 (`cuda_narrow`) | sm_120 kernel (`cuda_sm120`) | of mma.sync peak / of copy | v3 "
             "(`cuda_rows32`, 231 KB) | v4 (that run's `cuda`; `cuda_wgmma` since v5) | SGLang decode, 1 token | sm_120 kernel "
             "vs v1 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key in SM120_SHAPES:
        d = by_shape[key]
        s, v1 = d["cuda_sm120"], d["cuda_narrow"]
        share = (f"{s['TFLOP/s'] / c['mma_sync_tflops']:.0%} / {s['GB/s'] / c['copy_gbps']:.0%}")
        dec = f"{d['sglang_decode_1tok']['ms']:.3f}" if "sglang_decode_1tok" in d else "-"
        lines.append(f"| {', '.join(map(str, key))} | {v1['ms']:.3f} | {s['ms']:.3f} | {share} | "
                     f"{d['cuda_rows32']['ms']:.3f} | {d['cuda']['ms']:.3f} | {dec} | {v1['ms'] / s['ms']:.1f}x |")
    return "\n".join(lines)


def sm120_targets_table() -> str:
    """Issue 15's targets for the sm_120 kernel forced on the H200."""
    data, by_shape = _bench(SM120_BENCH)
    c = data["ceilings"]
    comp, mem, slower = [], [], []
    for (b, length, n, h), d in by_shape.items():
        s, v3 = d["cuda_sm120"], d["cuda_rows32"]
        if _long_compute_bound((b, length, n, h)):
            comp.append(s["TFLOP/s"] / c["mma_sync_tflops"])
        if _long_memory_bound((b, length, n, h), min_batch=8):
            mem.append(s["GB/s"] / c["copy_gbps"])
        slower.append(s["ms"] / v3["ms"])
    head = by_shape[HEADLINE]
    s, dec, v1 = head["cuda_sm120"], head["sglang_decode_1tok"], head["cuda_narrow"]
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    n_comp, n_mem = sum(x >= 0.5 for x in comp), sum(x >= 0.7 for x in mem)
    n_slow = sum(x > 1.03 for x in slower)
    rows = [
        ("B=1, L=200k, N=16, H=8 in <= 0.19 ms, faster than SGLang's one-token decode",
         f"{s['ms']:.3f} ms vs decode {dec['ms']:.3f} ms and v1 {v1['ms']:.3f} ms ({v1['ms'] / s['ms']:.1f}x v1)",
         met(s["ms"] <= 0.19 and s["ms"] <= dec["ms"])),
        ("compute-bound shapes (H x N >= 128, L >= 32k): >= 50% of the mma.sync peak",
         f"{_span(comp, '.0%')} over {len(comp)} shapes ({n_comp} at or above 50%)", met(n_comp == len(comp))),
        ("memory-bound shapes (H x N <= 64, L >= 32k, B >= 8): >= 70% of copy bandwidth",
         f"{_span(mem, '.0%')} over {len(mem)} shapes ({n_mem} at or above 70%)", met(n_mem == len(mem))),
        ("no shape of the grid slower than v3 (`cuda_rows32`)",
         f"time / v3's time {_span(slower, '.2f')} over {len(slower)} shapes ({n_slow} more than 3% slower)",
         met(n_slow == 0)),
    ]
    return _target_lines(f"From `{_rel(SM120_BENCH)}` (the sm_120 kernel, `cuda_sm120`, forced on the H200).", rows)


def sm120_impl(key: tuple, card) -> str:
    """The implementation an sm_120 card runs for shape ``key`` (B, L, N, H): the step model's rule
    (``kernel_times.ours_impl``: the configuration ``launch_plan.select`` chooses on the card for the shape's rows)."""
    b, _, n, h = key
    return ours_impl(card.name, b, n, h)


def _short_prefix_words() -> str:
    """What the profiles of SPLIT_FLOOR show at B = 1, L = 4096, 128 rows: split kernel and combine (us) of both
    configurations at the committed split floor, and the second generation's at the 64-token floor tried."""
    def at(name: str) -> dict:
        data = json.loads((SPLIT_FLOOR / f"{name}.json").read_text())
        kernels = {c["index"]: c["kernel"] for c in data["configs"]}
        out = {}
        for r in data["rows"]:
            if r["shape"] == "short":
                split = sum(us for k, us in r["kernels_us"].items() if "reduce" not in k)
                out[kernels[r["config"]]] = (split, r["total_us"] - split, r["nsplit"])
        return out

    now, tried = at("profile-floor128"), at("profile-floor64")
    first, roles = now["verify_sm120_kernel<32,2>"], now["verify_sm120_roles_kernel<64>"]
    floor = tried["verify_sm120_roles_kernel<64>"]
    return (f"profiled at B = 1, L = 4096, 128 rows (`{_rel(SPLIT_FLOOR)}`): the second generation's split kernel "
            f"takes {roles[0]:.1f} us against the first kernel's {first[0]:.1f} and its combine over {roles[2]} splits "
            f"{roles[1]:.1f} us against {first[1]:.1f} over {first[2]}; a 64-token split floor (twice its CTAs) "
            f"gives {floor[0]:.1f} + {floor[1]:.1f} us, {roles[0] + roles[1] - floor[0] - floor[1]:.1f} us less: "
            "the gap is its fixed cost per CTA and per split, not the floor")


def _sm120_cards(by_shape: dict, source: str) -> tuple[list, dict]:
    """The RTX presets (those the card model predicts for) and, per shape of ``by_shape`` ((B, L, N, H) -> impl -> row,
    read from ``source``), what they run: one answer for all of them, else ValueError; a shape without the row of
    the implementation it selects is refused."""
    from kdtree_lab.budget.presets import gpus
    from kdtree_lab.speculate.card_model import cards as card_models

    cards = [gpus()[name] for name in card_models()]
    runs = {key: sm120_impl(key, cards[0]) for key in by_shape}
    if any(sm120_impl(key, g) != runs[key] for g in cards for key in by_shape):
        raise ValueError("cards: the RTX cards select different configurations; the tables assume one per shape")
    missing = sorted({runs[k] for k, d in by_shape.items() if runs[k] not in d})  # each shape has its rows
    if missing:
        raise ValueError(f"{source}: no rows of {', '.join(missing)}, which sm_120 selects")
    return cards, runs


def sm120_per_shape_table() -> str:
    """What an sm_120 card runs per shape (the launcher's choice there), forced on the H200 beside the first sm_120
    kernel, its second generation, v5 and SGLang's one-token decode, one run."""
    data, by_shape = _bench(SM120_RUN)
    c, p = data["ceilings"], data["provenance"]
    _, runs = _sm120_cards(by_shape, _rel(SM120_RUN))
    lines = [f"From `{_rel(SM120_RUN)}`: {p['gpu']} (driver {p['driver']}, torch {p['torch']}), {p['date_utc'][:10]}; "
             f"{_timing_words(data)}, medians over inputs rotated past L2, combine included; ceilings in the same "
             f"run: copy {c['copy_gbps']:.0f} GB/s, mma.sync m16n8k16 loop {c['mma_sync_tflops']:.0f} TFLOP/s. "
             "Times in ms; H200 runs of both sm_120 kernels forced, not sm_120 runs. \"sm_120 runs\": the "
             "configuration the launcher selects on RTX PRO 6000 and RTX 5090 for the shape's rows "
             "(`launch_plan.select`).", "",
             f"| B, L, N, H | first sm_120 kernel (`{SM120_FIRST}`) | second generation (`{SM120_ROLES}`) | sm_120 runs "
             "| its share of mma.sync peak / copy | v5 (`cuda`, sm_90a) | SGLang decode, 1 token |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for key in SM120_SHAPES:
        d = by_shape[key]
        chosen = d[runs[key]]
        dec = f"{d['sglang_decode_1tok']['ms']:.3f}" if "sglang_decode_1tok" in d else "-"
        lines.append(f"| {', '.join(map(str, key))} | {d[SM120_FIRST]['ms']:.3f} | {d[SM120_ROLES]['ms']:.3f} | "
                     f"`{runs[key]}` | {chosen['TFLOP/s'] / c['mma_sync_tflops']:.0%} / "
                     f"{chosen['GB/s'] / c['copy_gbps']:.0%} | {d['cuda']['ms']:.3f} | {dec} |")
    return "\n".join(lines)


def _ncu_metric(path: Path, name: str) -> float:
    """One metric's value from an Nsight Compute text report (the first line that names it)."""
    for line in path.read_text().splitlines():
        if line.strip().startswith(name):
            return float(line.split()[-1])
    raise ValueError(f"{_rel(path)}: no line names {name!r}")


def _stream_words(data: dict, runs: dict, rows: int) -> str:
    """The streaming fit of what sm_120 runs on the memory-bound series (B >= 8) of N x H = ``rows``, in words."""
    impls = {runs[k] for k in runs if k[2] * k[3] == rows}
    if len(impls) != 1:
        raise ValueError(f"rows {rows}: sm_120 runs {sorted(impls)}; the sentence assumes one configuration")
    impl = impls.pop()
    fits = [f for f in streaming_fits(data["rows"], data["ceilings"], impl=impl) if f["N"] * f["H"] == rows
            and f["B"] >= 8]
    return (f"N x H = {rows} (`{impl}`) streams at {_span([f['of_copy'] for f in fits], '.0%')} of the copy rate "
            f"with {_span([f['fixed_us'] for f in fits], '.0f')} us fixed per call")


def sm120_gen2_targets_table() -> str:
    """Issue 28's targets for what sm_120 runs (the per-shape choice, forced on the H200), each with the measured
    gap, what bounds it and the peer's figure (XQA MLA, NVIDIA's 99 KB MLA kernel, on its one shape family)."""
    data, by_shape = _bench(SM120_RUN)
    c = data["ceilings"]
    _, runs = _sm120_cards(by_shape, _rel(SM120_RUN))
    peer = json.loads(XQA_PEER.read_text())
    xqa = {(r["B"], r["L"]): r for r in peer["rows"] if r["peer"] == "xqa_mla" and r.get("sub_seqs_rule")
           and r["kv"] == "bf16"}
    comp, mem, slower = [], [], []
    for key, d in by_shape.items():
        s = d[runs[key]]
        if _long_compute_bound(key):
            comp.append((s["TFLOP/s"] / c["mma_sync_tflops"], key))
        if _long_memory_bound(key, min_batch=8):
            mem.append((s["GB/s"] / c["copy_gbps"], key))
        slower.append((s["ms"] / d[SM120_FIRST]["ms"], key))
    head = by_shape[HEADLINE]
    s, v5 = head[runs[HEADLINE]], head["cuda"]
    issue, warp = _ncu_metric(NCU_ROLES, "Issue Slots Busy"), _ncu_metric(NCU_ROLES, "Issued Warp Per Scheduler")
    active = _ncu_metric(NCU_ROLES, "Active Warps Per Scheduler")
    bound = (f"instruction issue (Nsight Compute on the second generation, kernel-wide, `{_rel(NCU_ROLES)}`: "
             f"{warp:.2f} instructions issued per cycle per scheduler, issue slots {issue:.0f}% busy, {active:.1f} "
             "warps per scheduler), not bytes or the MMA rate: a 16-key tile takes the same time whether KV comes "
             "from DRAM or L2, and the QK warps' chain sets it (docs/performance.md, \"The sm_120 kernel, second "
             "generation\")")
    x_head = xqa[(1, 200_000)]
    x_comp = [r["of_mma_sync"] for (b, length), r in xqa.items() if length >= 32_768]
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    n_comp, n_mem = sum(x >= 0.55 for x, _ in comp), sum(x >= 0.80 for x, _ in mem)
    worse = sorted((x, k) for x, k in slower if x > 1.03)
    mem_short = [(x, k) for x, k in mem if x < 0.80]
    mem_rows = sorted({k[2] * k[3] for _, k in mem_short})
    rows = [
        ("B=1, L=200k, N=16, H=8 in <= 0.15 ms (v5's time)",
         f"{s['ms']:.3f} ms (`{runs[HEADLINE]}`; v5 {v5['ms']:.3f} ms in the same run): {s['ms'] / 0.15:.2f}x the "
         f"target. Bound: {bound}. Peer: XQA MLA {x_head['ms']:.3f} ms on its proxy of the same 128 rows (one token "
         f"x 128 heads, `{_rel(XQA_PEER)}`)", met(s["ms"] <= 0.15)),
        ("compute-bound shapes (H x N >= 128, L >= 32k): >= 55% of the mma.sync peak",
         f"{_span([x for x, _ in comp], '.0%')} over {len(comp)} shapes ({n_comp} at or above 55%); the gap is "
         f"{0.55 / max(x for x, _ in comp):.2f}-{0.55 / min(x for x, _ in comp):.2f}x. Bound: the same issue rate. "
         f"Peer: XQA MLA {_span(x_comp, '.0%')} of its own run's mma.sync peak on its rows at L >= 32k",
         met(n_comp == len(comp))),
        ("memory-bound shapes (H x N <= 64, L >= 32k, B >= 8): >= 80% of the copy bandwidth",
         f"{_span([x for x, _ in mem], '.1%')} over {len(mem)} shapes ({n_mem} at or above 80%); below it: "
         + ", ".join(f"N x H = {r} ({_span([x for x, k in mem_short if k[2] * k[3] == r], '.1%')})" for r in mem_rows)
         + f". Bound, from each series' streaming fit (t = fixed + KV bytes / rate over L = 4k, 32k, 200k): "
         + "; ".join(_stream_words(data, runs, r) for r in mem_rows)
         + ". Peer: none (XQA MLA serves 128 heads only)",
         met(n_mem == len(mem))),
        ("no shape of the issue grid slower than the first sm_120 kernel",
         f"time / first kernel's {_span([x for x, _ in slower], '.2f')} over {len(slower)} shapes ({len(worse)} more "
         "than 3% slower: " + ", ".join(f"{', '.join(map(str, k))} ({x:.2f})" for x, k in worse) + "). Bound: the "
         "choice is a function of (B, N, H, SMs), not of L (a captured graph serves every prefix length), so a "
         "(B, N, H) that wins at 200k keeps the second generation at 4k too; " + _short_prefix_words()
         + ". Peer: XQA MLA is "
         f"{xqa[(1, 4096)]['ms']:.3f} ms at B = 1, L = 4096", met(not worse)),
    ]
    return _target_lines(f"From `{_rel(SM120_RUN)}` (per shape, what sm_120 selects, forced on the H200) and "
                         f"`{_rel(XQA_PEER)}` (the peer); ceilings in the grid's run: mma.sync "
                         f"{c['mma_sync_tflops']:.0f} TFLOP/s, copy {c['copy_gbps']:.0f} GB/s.", rows)


def xqa_peer_table() -> str:
    """XQA MLA (NVIDIA's 99 KB MLA decode kernel) beside our configurations on its one shape family, one run; a
    "not yet measured" line until that run's JSON is committed."""
    if not XQA_PEER.exists():
        return (f"Not yet measured: this table is generated from `{_rel(XQA_PEER)}` (the JSON `scripts/xqa_peer.py` "
                "writes on the H200, with its provenance) once it is committed.")
    data = json.loads(XQA_PEER.read_text())
    c, p, x = data["ceilings"], data["provenance"], data["xqa"]
    peer = "xqa_mla"
    rows = [r for r in data["rows"] if r["peer"] != peer or r.get("sub_seqs_rule")]  # XQA at its own split rule
    ours = list(dict.fromkeys(r["peer"] for r in rows if r["peer"] != peer))
    kernels = {r["peer"]: r.get("kernel") for r in rows}
    by: dict = {}
    for r in rows:
        by.setdefault((r["kv"], r["B"], r["L"]), {})[r["peer"]] = r
    fp8 = x["builds"].get("fp8")
    fp8_words = ("not tried" if fp8 is None else "built" if fp8["ok"] else f"does not build ({fp8['error']})")
    cell = lambda r: (f"{r['ms']:.3f} ({r['of_mma_sync']:.0%} / {r['of_copy']:.0%})" if r else "-")  # noqa: E731
    eager = [f"{r['peer']} at B = {r['B']}, L = {r['L']:,}" for r in rows if r["timing"] != data["timing"]]
    lines = [f"From `{_rel(XQA_PEER)}`: {p['gpu']} (driver {p['driver']}, torch {p['torch']}), {p['date_utc'][:10]}"
             + ("" if data.get("complete") else f", **incomplete run** ({data.get('stopped')})")
             + f"; {_timing_words(data)}, medians over inputs rotated past L2; ceilings in the same run: copy "
             f"{c['copy_gbps']:.0f} GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s. XQA MLA: {x['package']} "
             f"{x['version']} built for {x['arch']}, {x['page_size']}-token pages, its own split rule; fp8: "
             f"{fp8_words}." + (f" Timed otherwise (the row's capture failed): {'; '.join(eager)}." if eager else "")
             + " Each cell: ms (of the mma.sync peak / of the copy bandwidth), on one query token x 128 "
             "heads per request (ours: N = 1, H = 128, causal).", "",
             "| pool, B, L | XQA MLA | its KV splits per request | "
             + " | ".join(f"`{i}` ({kernels[i]})" for i in ours) + " | XQA / fastest of ours |",
             "|---|---:|---:|" + "---:|" * len(ours) + "---:|"]
    for (kv, b, length), d in sorted(by.items()):
        xr, mine = d.get(peer), [d[i] for i in ours if i in d]
        ratio = f"{xr['ms'] / min(r['ms'] for r in mine):.1f}x" if xr and mine else "-"
        lines.append(f"| {kv}, {b}, {length:,} | {cell(xr)} | {xr['sub_seqs_used'] if xr else '-'} | "
                     + " | ".join(cell(d.get(i)) for i in ours) + f" | {ratio} |")
    return "\n".join(lines)
