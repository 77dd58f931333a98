"""The current defaults: the README's headline sentence, the table of each implementation's newest grid, the
implementation registry, and the chain grid beside SGLang's and FlashMLA's kernels."""

from __future__ import annotations

import json

from .common import _bench, _rel, _timing_words
from .runs import BUILD_OF_RECORD, CHAIN_BENCH, CURRENT_SHAPES, HEADLINE, SM120_FIRST, SM120_ROLES
from .sm120 import _sm120_cards


def configs_table() -> str:
    """Every implementation the CLI, parity and bench accept: its kernel, its dynamic shared memory (the committed
    build of the newest GPU suite) and when the launcher selects it (``launch_plan.AUTO_CONFIGS``, held equal to
    the C library's choice by tests/test_c_abi.py)."""
    from kdtree_lab.kernels.impls import IMPLS
    from kdtree_lab.kernels.launch_plan import AUTO_CONFIGS

    smem = {c["kernel"]: c["dynamic_smem"] for c in json.loads(BUILD_OF_RECORD.read_text())["check"]["configs"]}
    auto = {a.config.name: (n, a) for n, a in enumerate(AUTO_CONFIGS)}
    fp8_of: dict[str, list[str]] = {}
    for a in AUTO_CONFIGS:
        if a.fp8:
            fp8_of.setdefault(a.fp8.name, []).append(f"an fp8 pool under `{a.config.name}`"
                                                     + (" with exact fp8 math" if a.e4m3_default else ""))
        if a.fp8_e4m3:
            fp8_of.setdefault(a.fp8_e4m3.name, []).append(f"an fp8 pool under `{a.config.name}`" + (
                "" if a.e4m3_default else " with e4m3 fp8 math"))

    def where(kernel: str) -> str:
        if kernel in auto:
            n, a = auto[kernel]
            cc = (f"compute capability {a.cc[0] // 10}.x" if a.cc[1] - a.cc[0] == 10 else "any compute capability")
            rule = [cc + (" with sm_90a code" if a.sm90a else ""), f"{a.smem:,} B of shared memory or more"]
            if a.rows != (1, 1 << 30):
                rule.append(f"N x H >= {a.rows[0]}" if a.rows[1] == 1 << 30 else f"N x H in [{a.rows[0]}, {a.rows[1]})")
            return f"**automatic**, tried {('first', 'second', 'third', 'fourth')[n]}: " + ", ".join(rule)
        if kernel in fp8_of:
            return "; ".join(fp8_of[kernel])
        return "forced only"

    lines = [f"Generated from `kdtree_lab/kernels/impls.py`, `launch_plan.AUTO_CONFIGS` and the build of record "
             f"(`{_rel(BUILD_OF_RECORD)}`). `cuda` takes the first automatic configuration that fits the GPU, "
             "then the one that reads the call's pool.", "",
             "| impl | kernel | dynamic shared memory | pools | selected |", "|---|---|---:|---|---|"]
    for i in IMPLS.values():
        if i.kernel is None:
            continue
        size = f"{smem[i.kernel]:,} B" if i.kernel in smem else "(not in the build of record)"
        lines.append(f"| `{i.name}` | `{i.kernel}` | {size} | {'/'.join(i.kv_dtypes)} | {where(i.kernel)} |")
    return "\n".join(lines)


def current_table() -> str:
    """Our current defaults (v5 on sm_90a; what sm_120 selects per shape, forced on the H200) beside SGLang's verify
    and one-token decode, each from its newest committed issue grid (``bench_results.committed_current``)."""
    from kdtree_lab.checks.bench_results import committed_current

    res = committed_current()
    by: dict = {}
    for r in res["rows"]:
        by.setdefault((r["B"], r["L"], r["N"], r["H"]), {})[r["impl"]] = r
    src = res["sources"]
    files = sorted(set(src.values()))
    named = "; ".join(f"`{f}` ({', '.join(i for i, g in src.items() if g == f)})" for f in files)
    lines = [f"Each implementation from its newest committed run of the issue grid on the H200: {named}. "
             f"{_timing_words(res)[0].upper() + _timing_words(res)[1:]}; medians over inputs rotated past L2, combine included. `cuda` is v5 "
             "(the sm_90a default), `cuda_wgmma` v4, and \"sm_120 runs\" what RTX PRO 6000 and RTX 5090 select for "
             "the shape (the first sm_120 kernel, `s1`, or its second generation, `s2`), forced on the H200 (not an "
             "sm_120 measurement). Speed-ups over SGLang's verify divide times of two runs on the same GPU. Times "
             "in ms.", "",
             "| B, L, N, H | v5 (`cuda`) | of roofline | v4 (`cuda_wgmma`) | sm_120 runs | SGLang verify "
             "| v5 vs SGLang verify | SGLang decode, 1 token |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    _, runs = _sm120_cards(by, ", ".join(files))
    short = {SM120_FIRST: "s1", SM120_ROLES: "s2"}
    for key in CURRENT_SHAPES:
        d = by[key]
        v5, ext, dec = d["cuda"], d.get("sglang_extend"), d.get("sglang_decode_1tok")
        ext_ms = f"{ext['ms']:.2f}" if ext else "-"
        speedup = f"{v5['speedup_vs_sglang_verify']:,.0f}x" if ext else "-"
        dec_ms = f"{dec['ms']:.3f}" if dec else "-"
        shape = ", ".join(f"{x:,}" for x in key)
        lines.append(f"| {shape} | {v5['ms']:.3f} | {v5['of_roofline']:.0%} | {d['cuda_wgmma']['ms']:.3f} | "
                     f"{d[runs[key]]['ms']:.3f} ({short[runs[key]]}) | {ext_ms} | {speedup} | {dec_ms} |")
    return "\n".join(lines)


def headline_sentence() -> str:
    """The README's one-sentence claim, from the current defaults' committed rows."""
    from kdtree_lab.checks.bench_results import committed_current

    res = committed_current(("cuda", "sglang_extend", "sglang_decode_1tok"))
    head = {r["impl"]: r for r in res["rows"] if (r["B"], r["L"], r["N"], r["H"]) == HEADLINE}
    ours, dec, ext = head["cuda"], head["sglang_decode_1tok"], head["sglang_extend"]
    return (f"On the H200 the default kernel (`{ours['kernel']}`) verifies a 16-node tree of one request at 200k "
            f"context in {ours['ms']:.3f} ms, {'less' if ours['ms'] < dec['ms'] else 'more'} than SGLang's one-token "
            f"decode ({dec['ms']:.3f} ms) and {ext['ms'] / ours['ms']:,.0f}x faster than SGLang's verify "
            f"({ext['ms']:.1f} ms); sources and the other shapes in `docs/results.md`.")


def chain_peers_table() -> str:
    """The chain grid: ours beside SGLang's two verify kernels and FlashMLA, one run."""
    data, by_shape = _bench(CHAIN_BENCH)
    c, p = data["ceilings"], data["provenance"]
    lines = [f"From `{_rel(CHAIN_BENCH)}` ({p['gpu']}, driver {p['driver']}, {p['date_utc'][:10]}; {_timing_words(data)}; "
             f"ceilings in the same run: copy {c['copy_gbps']:.0f} GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s). "
             "Chains (each draft token sees the ones before it), bf16 pool, times in ms; `cuda` is v5 here.", "",
             "| B, L, N, H | ours (`cuda`) | FlashMLA (`sgl-flash-mla`, SM90, page 64) | SGLang `verify_shared_kv_fwd` | "
             "SGLang `extend_attention_fwd` | FlashMLA / ours | `verify_shared_kv_fwd` / ours |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(by_shape, key=lambda k: (k[0], k[1], k[2], k[3])):
        d = by_shape[key]
        ours, fm, vm, ex = (d[i]["ms"] for i in ("cuda", "flashmla", "sglang_verify_mla", "sglang_extend"))
        lines.append(f"| {', '.join(map(str, key))} | {ours:.4f} | {fm:.4f} | {vm:.3f} | {ex:.2f} | {fm / ours:.2f} | "
                     f"{vm / ours:.1f} |")
    return "\n".join(lines)
