"""The H200 kernels' tables (v1 to v5): the issue grid, the versions tried, the floors, the fixed cost per call,
and the targets of issues 4, 18 and v5's."""

from __future__ import annotations

import json
from pathlib import Path

from kdtree_lab.checks.bench_results import streaming_fits
from kdtree_lab.checks.roofline import Shape

from .common import _bench, _long_compute_bound, _long_memory_bound, _rel, _span, _target_lines, _timing_words
from .runs import FIXED_MAIN, FIXED_NOW, H200_BENCH, H200_V3, H200_V4, HEADLINE, ISSUE18_BENCH, PROFILE_SHAPES, PROFILE_V3, PROFILE_V3B, PROFILE_V4, PROFILE_V4A, PROFILE_V4_SPLITS, PROFILE_V5, PROFILE_VERSIONS, V3, V4, V5, V5_BENCH, V5_FIXED


def bench_table() -> str:
    data, by_shape = _bench()
    c, p = data["ceilings"], data["provenance"]
    kernel = data.get("cuda_kernel", "the automatic choice")
    lines = [f"Measured on {p['gpu']} (driver {p['driver']}, torch {p['torch']}, Triton {p['triton']}) on "
             f"{p['date_utc'][:10]}; ceilings in the same run: copy {c['copy_gbps']:.0f} GB/s, bf16 GEMM "
             f"{c['gemm_tflops']:.0f} TFLOP/s. Ours: `{kernel}`. Every implementation: "
             f"{_timing_words(data)}, medians over inputs rotated past L2, reduce included. "
             f"Source: `{_rel(H200_BENCH)}` (108 shapes; a selection here).", "",
             "| B | L | N | H | ours ms | of roofline | Triton twin ms | SGLang verify ms | ours vs SGLang verify "
             "| SGLang decode, 1 token, ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(by_shape, key=lambda k: (k[3] * k[2], k[2], k[0], k[1])):
        b, length, n, h = key
        if length < 32_768 or (n, h) not in {(4, 8), (16, 8), (4, 16), (16, 64), (64, 128)}:
            continue
        d = by_shape[key]
        ours, tri, ext, dec = d["cuda"], d.get("triton"), d.get("sglang_extend"), d.get("sglang_decode_1tok")
        lines.append(f"| {b} | {length} | {n} | {h} | {ours['ms']} | {ours['of_roofline']:.1%} | "
                     f"{tri['ms'] if tri else '-'} | {ext['ms'] if ext else '-'} | "
                     f"{ours.get('speedup_vs_sglang_verify', '-')} | {dec['ms'] if dec else '-'} |")
    return "\n".join(lines)


def _best_kernel_us(path: Path) -> dict[tuple[str, str], tuple[float, int]]:
    """(config kernel, shape name) -> (smallest split + reduce time over the split counts tried, its nsplit)."""
    data = json.loads(path.read_text())
    names = {c["index"]: c["kernel"] for c in data["configs"]}
    best: dict = {}
    for r in data["rows"]:
        key = (names[r["config"]], r["shape"])
        if key not in best or r["total_us"] < best[key][0]:
            best[key] = (r["total_us"], r["nsplit"])
    return best


def versions_table() -> str:
    old, v3b, v3, v4a, v4s, v4, v5 = (_best_kernel_us(p) for p in (PROFILE_VERSIONS, PROFILE_V3B, PROFILE_V3,
                                                                    PROFILE_V4A, PROFILE_V4_SPLITS, PROFILE_V4,
                                                                    PROFILE_V5))
    cols = [("v1, 64 rows", old, "verify_split_kernel<64,3>"),
            ("v1, 32 rows (sm_120's configuration until the sm_120 kernel)", old, "verify_split_kernel<32,2>"),
            ("v2 wide", old, "verify_wide_kernel<64,2>"), ("v3a", old, V3), ("v3b", v3b, V3), ("v3", v3, V3),
            ("v3, wave-aware splits (`cuda_rows32`)", v4s, V3), ("v4a, wgmma", v4a, V4),
            ("v4", v4, V4), ("v4, again beside v5", v5, V4), ("v5 (default on sm_90a)", v5, V5)]
    lines = [f"GPU time of the split and reduce kernels (CUPTI durations via torch.profiler, mean of 10 calls on "
             f"inputs rotated past L2), the best of the split counts tried. Sources: `{_rel(PROFILE_VERSIONS)}`, "
             f"`{_rel(PROFILE_V3B)}`, `{_rel(PROFILE_V3)}` (provenance: `{_rel(H200_V3)}/provenance-profiles.json`); "
             f"`{_rel(PROFILE_V4A)}`, `{_rel(PROFILE_V4_SPLITS)}`, `{_rel(PROFILE_V4)}` (provenance: "
             f"`{_rel(H200_V4)}/provenance-session-*.json`); `{_rel(PROFILE_V5)}` (with its provenance).",
             "", "| B, L, N, H | " + " | ".join(c[0] for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for shape, label in PROFILE_SHAPES.items():
        cells = []
        for _, src, kernel in cols:
            hit = src.get((kernel, shape))
            cells.append(f"{hit[0]:.0f} us" if hit else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets_table() -> str:
    data, by_shape = _bench()
    c = data["ceilings"]
    fits = {(f["B"], f["N"], f["H"]): f for f in streaming_fits(data["rows"], c)}
    mem, comp, b48, b48_miss_bound = [], [], [], []
    for (b, length, n, h), d in by_shape.items():
        r = d["cuda"]
        if _long_memory_bound((b, length, n, h)):
            mem.append(r["GB/s"] / c["copy_gbps"])
        if _long_compute_bound((b, length, n, h)):
            comp.append(r["TFLOP/s"] / c["gemm_tflops"])
        if b == 48 and length >= 32_768 and "speedup_vs_sglang_verify" in r:
            b48.append(r["speedup_vs_sglang_verify"])
            if r["speedup_vs_sglang_verify"] < 15:  # the most any kernel could reach: SGLang's time / our floor
                b48_miss_bound.append(d["sglang_extend"]["ms"] / r["floor_ms"])
    mem_fit = [f["of_copy"] for (b, n, h), f in fits.items() if n * h <= 64]
    mem_icpt = [f["fixed_us"] for (b, n, h), f in fits.items() if n * h <= 64]
    comp_fit = [f["of_gemm"] for (b, n, h), f in fits.items() if n * h >= 128]
    head = by_shape[HEADLINE]
    ours, dec, ext = head["cuda"], head["sglang_decode_1tok"], head["sglang_extend"]
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    n_mem, n_comp, n_b48 = (sum(x >= t for x in v) for v, t in ((mem, 0.85), (comp, 0.60), (b48, 15)))
    rows = [
        ("memory-bound shapes (H x N <= 64, L >= 32k): >= 85% of copy bandwidth",
         f"{_span(mem, '.0%')} over {len(mem)} shapes ({n_mem} at or above 85%); streaming rate (t = fixed + bytes / "
         f"rate over L = 4k, 32k, 200k) {_span(mem_fit, '.0%')} over the {len(mem_fit)} (B, N, H) series, plus a "
         f"fixed {_span(mem_icpt, '.0f')} us per call", met(n_mem == len(mem))),
        ("compute-bound shapes (H x N >= 128, L >= 32k): >= 60% of the bf16 GEMM rate",
         f"{_span(comp, '.0%')} over {len(comp)} shapes ({n_comp} at or above 60%); streaming rate "
         f"{_span(comp_fit, '.0%')} over the {len(comp_fit)} series", met(n_comp == len(comp))),
        ("B=1, L=200k, H=8, N=16 in no more time than SGLang's one-token decode",
         f"{ours['ms']} ms vs {dec['ms']} ms, same run, same timing", met(ours["ms"] <= dec["ms"])),
        ("the same shape >= 160x SGLang's verify",
         f"{ours['speedup_vs_sglang_verify']}x ({ext['ms']} ms vs {ours['ms']} ms)",
         met(ours["speedup_vs_sglang_verify"] >= 160)),
        (">= 15x SGLang's verify at B=48, L >= 32k",
         f"{_span(b48, '')}x over the {len(b48)} shapes SGLang was timed on ({n_b48} at or above 15x)"
         + (f"; on the others SGLang's time is only {_span(b48_miss_bound, '.1f')}x our roofline floor, so no "
            f"kernel reaches 15x there" if b48_miss_bound else ""),
         met(n_b48 == len(b48)) + (" (the misses are above the roofline)" if b48_miss_bound and
                                    max(b48_miss_bound) < 15 else "")),
    ]
    return _target_lines(f"From `{_rel(H200_BENCH)}`: {_timing_words(data)}; ceilings copy {c['copy_gbps']:.0f} "
                         f"GB/s, GEMM {c['gemm_tflops']:.0f} TFLOP/s.", rows)


def floors_table() -> str:
    data, by_shape = _bench()
    c = data["ceilings"]
    lines = [f"Ceilings from `{_rel(H200_BENCH)}`: copy {c['copy_gbps']:.0f} GB/s (read + write), bf16 GEMM "
             f"{c['gemm_tflops']:.0f} TFLOP/s; ours timed as {_timing_words(data)}.", "",
             "| B, L, N, H | KV bytes | bytes floor | FLOP floor | floor | bound | ours | of roofline |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    for key in [(1, 200_000, 16, 8), (8, 200_000, 16, 8), (1, 200_000, 4, 8), (48, 32_768, 16, 8),
                (1, 200_000, 64, 128), (48, 200_000, 64, 128)]:
        b, length, n, h = key
        r, shape = by_shape[key]["cuda"], Shape(b, length, n, h)
        t_mem = shape.kv_bytes / (c["copy_gbps"] * 1e9) * 1e6
        t_cmp = shape.flops / (c["gemm_tflops"] * 1e12) * 1e6
        lines.append(f"| {b}, {length}, {n}, {h} | {shape.kv_bytes / 1e6:.0f} MB | {t_mem:.0f} us | {t_cmp:.0f} us | "
                     f"{max(t_mem, t_cmp):.0f} us | {r['bound']} | {r['ms']} ms | {r['of_roofline']:.1%} |")
    return "\n".join(lines)


def _fixed(path: Path) -> tuple[dict, dict]:
    """A scripts/fixed_cost.py run: its data and (impl, N, L) -> row at the automatic split count."""
    data = json.loads(path.read_text())
    return data, {(r["impl"], r["N"], r["L"]): r for r in data["rows"] if r["auto"]}


def fixed_cost_table() -> str:
    """Time of a B = 1 call at the automatic split count, the combine before and after it read used splits only."""
    before, old = _fixed(FIXED_MAIN)
    after, new = _fixed(FIXED_NOW)
    lengths = sorted({k[2] for k in new})
    names = {"cuda": "v4", "cuda_sm120": "sm_120 kernel"}
    lines = [f"From `{_rel(FIXED_MAIN)}` (before) and `{_rel(FIXED_NOW)}` (after), one device call, B = 1, H = 8, "
             "the automatic split count (fixed at capture for any prefix length), CUDA-graph replay medians in us. "
             f"A graph of two one-element kernels, timed the same way in each run: {before['two_kernel_floor_ms'] * 1e3:.1f}"
             f" and {after['two_kernel_floor_ms'] * 1e3:.1f} us.", "",
             "| kernel, N (splits) | " + " | ".join(f"L = {n:,}: before / after" for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for impl, n in sorted({k[:2] for k in new}):
        cells = [f"{old[(impl, n, n_l)]['ms'] * 1e3:.1f} / {new[(impl, n, n_l)]['ms'] * 1e3:.1f}" for n_l in lengths]
        lines.append(f"| {names.get(impl, impl)}, {n} ({new[(impl, n, lengths[0])]['nsplit']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def issue18_targets_table() -> str:
    """Issue 18's targets against the issue grid of the landed kernels and the fixed-cost run."""
    data, by_shape = _bench(V5_BENCH)  # v5 (cuda) and v4 (cuda_wgmma)
    _, sm120 = _bench(ISSUE18_BENCH)  # the sm_120 kernel forced, as landed in the run before v5
    c = data["ceilings"]
    fixed_data, fixed = _fixed(V5_FIXED)
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    shortest = min(k[2] for k in fixed)
    impls = ("cuda", "cuda_wgmma", "cuda_sm120")
    at_shortest = lambda field: {i: [r[field] * 1e3 for (j, n, n_l), r in fixed.items()  # noqa: E731
                                     if j == i and n_l == shortest] for i in impls}
    short, marginal = at_shortest("ms"), at_shortest("marginal_ms")
    floor_us = fixed_data["two_kernel_floor_ms"] * 1e3
    above = [x - floor_us for i in impls for x in short[i]]
    comp = {i: [d[i]["TFLOP/s"] for k, d in by_shape.items() if _long_compute_bound(k)] for i in ("cuda", "cuda_wgmma")}
    mem_of = lambda shapes, i: [d[i]["GB/s"] / c["copy_gbps"] for k, d in shapes.items()  # noqa: E731
                                if _long_memory_bound(k, min_batch=8)]
    mem = {"cuda": mem_of(by_shape, "cuda"), "cuda_wgmma": mem_of(by_shape, "cuda_wgmma"),
           "cuda_sm120": mem_of(sm120, "cuda_sm120")}
    head = by_shape[HEADLINE]
    n_mem = sum(x >= 0.85 for x in mem["cuda"])
    rows = [
        ("fixed cost per call <= 10 us at B = 1 (here: a call over a 128-token prefix at the automatic split count)",
         f"v5 {_span(short['cuda'], '.1f')} us, v4 {_span(short['cuda_wgmma'], '.1f')}, sm_120 kernel "
         f"{_span(short['cuda_sm120'], '.1f')} (N = 4 and 16); a graph of one-element kernels takes {floor_us:.1f} us "
         f"the same way, so our share is {_span(above, '.1f')} us. Inside a graph of 10 calls each adds "
         f"{_span(marginal['cuda'], '.1f')} us (v5), {_span(marginal['cuda_wgmma'], '.1f')} (v4), "
         f"{_span(marginal['cuda_sm120'], '.1f')} (sm_120 kernel)",
         met(max(short["cuda"]) <= 10) + (" end to end; met above the timing floor" if max(above) <= 10 else
                                          " end to end, above the floor or inside a larger graph")),
        ("v5 (sm_90a) on compute-bound shapes (H x N >= 128, L >= 32k): >= 600 TFLOP/s",
         f"{_span(comp['cuda'], '.0f')} TFLOP/s over {len(comp['cuda'])} shapes (v4 in the same run: "
         f"{_span(comp['cuda_wgmma'], '.0f')}; GEMM ceiling {c['gemm_tflops']:.0f})", met(min(comp["cuda"]) >= 600)),
        ("memory-bound shapes (H x N <= 64, L >= 32k, B >= 8): >= 85% of the copy bandwidth",
         f"v5 {_span(mem['cuda'], '.0%')} over {len(mem['cuda'])} shapes ({n_mem} at or above 85%); v4 "
         f"{_span(mem['cuda_wgmma'], '.0%')}; sm_120 kernel {_span(mem['cuda_sm120'], '.0%')} "
         f"(`{_rel(ISSUE18_BENCH)}`)",
         met(n_mem == len(mem["cuda"]))),
        ("B = 1, L = 200k, N = 16, H = 8 in <= 0.10 ms",
         f"v5 {head['cuda']['ms']:.3f} ms, v4 {head['cuda_wgmma']['ms']:.3f} ms, sm_120 kernel "
         f"{sm120[HEADLINE]['cuda_sm120']['ms']:.3f} ms", met(head["cuda"]["ms"] <= 0.10)),
    ]
    best = max(comp["cuda"])
    lines = [_target_lines(f"From `{_rel(V5_BENCH)}` ({_timing_words(data)}; copy {c['copy_gbps']:.0f} GB/s) and "
                           f"`{_rel(V5_FIXED)}`.", rows), "",
             f"The memory-bound shapes below 85% (v5), with the time the target allows and, beside it, the shape's "
             f"FLOPs at v5's best rate on the grid ({best:.0f} TFLOP/s):", "",
             "| B, L, N, H | measured | at 85% of copy | gap | its FLOPs at v5's best rate |",
             "|---|---:|---:|---:|---:|"]
    for (b, n_l, n, h), d in sorted(by_shape.items()):
        r = d["cuda"]
        if _long_memory_bound((b, n_l, n, h), min_batch=8) and r["GB/s"] / c["copy_gbps"] < 0.85:
            allowed = r["ms"] * r["GB/s"] / (0.85 * c["copy_gbps"])
            lines.append(f"| {b}, {n_l:,}, {n}, {h} | {r['ms'] * 1e3:.0f} us | {allowed * 1e3:.0f} us | "
                         f"{(r['ms'] - allowed) * 1e3:.0f} us | {r['TFLOP/s'] * r['ms'] / best * 1e3:.0f} us |")
    return "\n".join(lines)


def v5_table() -> str:
    """v4 against v5 over the issue grid, one run, per prefix length."""
    data, by_shape = _bench(V5_BENCH)
    c = data["ceilings"]
    lines = [f"From `{_rel(V5_BENCH)}` ({_timing_words(data)}; the same run for both; GEMM ceiling "
             f"{c['gemm_tflops']:.0f} TFLOP/s). v5 is `cuda` (the default on sm_90a), v4 `cuda_wgmma` (forced).", "",
             "| prefix length | shapes | v4 time / v5 time: min, median, max | v5 TFLOP/s, H x N >= 128 | v4 TFLOP/s, "
             "H x N >= 128 |", "|---:|---:|---|---|---|"]
    for length in sorted({k[1] for k in by_shape}):
        d = [v for k, v in by_shape.items() if k[1] == length]
        ratio = sorted(v["cuda_wgmma"]["ms"] / v["cuda"]["ms"] for v in d)
        comp = [(v["cuda"]["TFLOP/s"], v["cuda_wgmma"]["TFLOP/s"]) for k, v in by_shape.items()
                if k[1] == length and k[2] * k[3] >= 128]
        lines.append(f"| {length:,} | {len(d)} | {ratio[0]:.2f}, {ratio[len(ratio) // 2]:.2f}, {ratio[-1]:.2f} | "
                     f"{_span([x[0] for x in comp], '.0f')} | {_span([x[1] for x in comp], '.0f')} |")
    return "\n".join(lines)
