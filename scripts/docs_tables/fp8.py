"""fp8 pools: our configurations over both pools, the mma.sync rate per instruction, the e4m3 configuration's
accuracy (on the committed grid and on fresh random cases), and the README's fp8 sentence."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from kdtree_lab.checks.bench_results import committed_grid, fp8_speedups
from kdtree_lab.checks.roofline import row_kv
from kdtree_lab.core.paths import RESULTS, ROOT

from .common import _bench, _rel, _timing_words
from .runs import (E4M3, E4M3_32, E4M3_ACCURACY, E4M3_ACCURACY_ONE_TERM, E4M3_CEILING, FP8_BENCH, FP8_EXACT, HEADLINE,
                   SM120_FIRST, SM120_ROLES, SM120_RUN)


def _fp8_rows() -> tuple[dict, dict]:
    """The fp8 preset's run: its data and (impl, B, L, N, H, kv) -> row."""
    data = json.loads(FP8_BENCH.read_text())
    return data, {(r["impl"], r["B"], r["L"], r["N"], r["H"], row_kv(r)): r for r in data["rows"]}


def fp8_table() -> str:
    """Our two CUDA configurations over a bf16 and an fp8 pool, same shapes, one run (issue 17's speed targets)."""
    data, rows = _fp8_rows()
    c = data["ceilings"]
    pairs = {(s["impl"], s["B"], s["L"], s["N"], s["H"]): s for s in fp8_speedups(data["rows"])}
    shapes = sorted({k[1:] for k in pairs}, key=lambda k: (k[2] * k[3], k[0], k[1]))
    lines = [f"From `{_rel(FP8_BENCH)}`: {_timing_words(data)}; each row credited with its own pool's bytes; "
             f"ceilings in the same run: copy {c['copy_gbps']:.0f} GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s. "
             "`cuda` is v4 here (the sm_90a default); the sm_120 kernel is forced. Issue 17 asks bf16 / fp8 >= 1.7 on "
             "memory-bound shapes and >= 1.0 on compute-bound ones.", "",
             "| B, L, N, H (bound over fp8) | v4 bf16 / fp8 (ms) | bf16 / fp8 | sm_120 kernel bf16 / fp8 (ms) | "
             "bf16 / fp8 | SGLang's verify over fp8 / sm_120 kernel over fp8 |", "|---|---|---:|---|---:|---:|"]
    for b, length, n, h in shapes:
        v4, s = pairs[("cuda", b, length, n, h)], pairs[("cuda_sm120", b, length, n, h)]
        sgl = rows[("sglang_extend", b, length, n, h, "fp8")]["ms"] / s["fp8 ms"]
        lines.append(f"| {b}, {length // 1000}k, {n}, {h} ({s['bound (fp8)']}) | {v4['bf16 ms']:.4g} / "
                     f"{v4['fp8 ms']:.4g} | {v4['bf16 / fp8']:.2f} | {s['bf16 ms']:.4g} / {s['fp8 ms']:.4g} | "
                     f"{s['bf16 / fp8']:.2f} | {sgl:.0f}x |")
    return "\n".join(lines)


def e4m3_ceiling_table() -> str:
    """The mma.sync rate per instruction measured on the H200, and the cards' e4m3 rate from the card model."""
    from kdtree_lab.speculate.card_model import cards as card_models

    data = json.loads(E4M3_CEILING.read_text())
    med, sass, p = data["median_tflops"], data["sass"], data["provenance"]
    ops = {k: ", ".join(f"{n} {op}" for op, n in sorted(v.items())) for k, v in sass.items()}
    lines = [f"From `{_rel(E4M3_CEILING)}` ({p['gpu']}, driver {p['driver']}, {p['date_utc'][:10]}; median of "
             f"{len(data['rows']) // len(med)} runs each): the ceiling loop of `kernels/ceilings/mma_peak.cuh` on 8 "
             "CTAs per SM, fp32 accumulation, each chain its own operands.", "",
             "| instruction | H200 (TFLOP/s, measured) | its SASS on sm_90a | on sm_120a |", "|---|---:|---|---|"]
    names = {"bf16": "bf16 m16n8k16", "f16": "f16 m16n8k16", "e4m3": "e4m3 m16n8k32"}
    for k, label in names.items():
        lines.append(f"| {label} | {med[k]:.0f} | {ops[f'sm_90a/{k}']} | {ops[f'sm_120a/{k}']} |")
    cards = card_models().values()
    lines += ["", f"The H200 has no e4m3 tensor-core MMA: ptxas emulates it (F2FP conversions, f16 HMMAs), at "
              f"{data['e4m3_over_bf16']:.2f}x the bf16 rate in e4m3 FLOPs. The cards' e4m3 rates are not the H200's "
              "(the card model's, sustained under tensor load): "
              + "; ".join(f"{c.label} {c.tensor_tflops('e4m3'):.0f} TFLOP/s against {c.tensor_tflops('bf16'):.0f} bf16 "
                          f"({c.flop_per_clock_sm['e4m3'] / c.flop_per_clock_sm['bf16']:.2f}x; "
                          f"{c.sources['e4m3_flop_per_clock_sm']})" for c in cards) + "."]
    return "\n".join(lines)


def _accuracy(path: Path) -> list[dict]:
    return json.loads(path.read_text())["accuracy"]


def e4m3_accuracy_table() -> str:
    """rel_l2 against the fp64 oracle of the dequantised pool: the e4m3 configuration, the exact path, SGLang."""
    rows, one = _accuracy(E4M3_ACCURACY), _accuracy(E4M3_ACCURACY_ONE_TERM)
    p = json.loads(E4M3_ACCURACY.read_text())["provenance"]

    def span(vals):
        return f"{min(vals):.4f}-{max(vals):.4f}"

    lines = [f"From `{_rel(E4M3_ACCURACY)}` ({p['gpu']}, {p['date_utc'][:10]}): the fp8 GPU grid (edge grid and 150 "
             "random draws, each over three (k_scale, v_scale)), every case against the fp64 oracle of the "
             "dequantised pool; rel_l2 over the live rows. SGLang 0.5.23's `extend_attention_fwd` rounds Q (unscaled) "
             "and P (in [0, 1]) to e4m3.", "",
             f"| k_scale, v_scale | cases | `{E4M3}` | exact (`{FP8_EXACT}`) | SGLang's own fp8 kernel | worst "
             "ours / SGLang | ours above SGLang |", "|---|---:|---|---|---|---:|---:|"]
    groups = sorted({(r["k_scale"], r["v_scale"]) for r in rows})
    for g in groups + [None]:
        sel = [r for r in rows if g is None or (r["k_scale"], r["v_scale"]) == g]
        ratio = [r[E4M3]["rel_l2"] / r["sglang_extend"]["rel_l2"] for r in sel]
        worse = sum(x > 1 for x in ratio)
        lines.append(f"| {'all' if g is None else f'{g[0]:g}, {g[1]:g}'} | {len(sel)} | "
                     f"{span([r[E4M3]['rel_l2'] for r in sel])} | {span([r[FP8_EXACT]['rel_l2'] for r in sel])} | "
                     f"{span([r['sglang_extend']['rel_l2'] for r in sel])} | {max(ratio):.2f} | {worse} |")
    one_ratio = [r[E4M3]["rel_l2"] / r["sglang_extend"]["rel_l2"] for r in one]
    lines += ["", f"Q as one e4m3 term (the first form, `{_rel(E4M3_ACCURACY_ONE_TERM)}`): rel_l2 "
              f"{span([r[E4M3]['rel_l2'] for r in one])}, above SGLang's in {sum(x > 1 for x in one_ratio)} of "
              f"{len(one)} cases (median ours / SGLang {sorted(one_ratio)[len(one_ratio) // 2]:.2f}): both round Q "
              "to 3 mantissa bits, and that is almost all of either error. Two terms hold Q to about 2^-8."]
    return "\n".join(lines)


@functools.cache
def _e4m3_grid_path() -> Path:
    """The newest committed issue-fp8 grid holding the e4m3 configuration's rows; the table compares it with the exact
    path in the same run, so that grid must hold the exact path's rows too (LookupError naming it otherwise)."""
    path = ROOT / committed_grid(E4M3, "fp8").source
    if not any(r["impl"] == FP8_EXACT for r in json.loads(path.read_text())["rows"]):
        raise LookupError(f"{_rel(path)}: holds no {FP8_EXACT} rows beside {E4M3}'s (the sm_120 fp8 table compares "
                          "the two in one run: bench --preset issue-fp8 runs both)")
    return path


def _e4m3_grid() -> tuple[dict, dict]:
    data = json.loads(_e4m3_grid_path().read_text())
    return data, {(r["impl"], r["B"], r["L"], r["N"], r["H"]): r for r in data["rows"]}


CHAIN_4 = (1, 200_000, 4, 8)  # an EAGLE-3 / MTP chain of 4 at 8 local heads: 32 rows


def _headline_run() -> tuple[str, dict, dict] | None:
    """(path, fp8 ms, bf16 ms), each by (impl, B, L, N, H), of the newest committed card-floor grid holding the e4m3
    configuration's rows, where it holds the headline over both pools, ran on the timing library under the driver's
    carveout and was not resumed, so the README's fp8 sentence compares the pools in one run; None otherwise."""
    try:
        path = ROOT / committed_grid(E4M3, "fp8", ("card-floor",)).source
    except LookupError:
        return None
    data = json.loads(path.read_text())
    ms = {kv: {(r["impl"], r["B"], r["L"], r["N"], r["H"]): r["ms"] for r in data["rows"] if row_kv(r) == kv}
          for kv in ("fp8", "bf16")}
    whole = data.get("timing_library") and data.get("carveout") is None and "resumed_from" not in data
    if not whole or (SM120_ROLES, *HEADLINE) not in ms["bf16"] or (E4M3, *HEADLINE) not in ms["fp8"]:
        return None
    return _rel(path), ms["fp8"], ms["bf16"]


def fp8_headline_sentence() -> str:
    """The README's fp8 sentence: the headline over an fp8 pool (what sm_120 runs, timing library) and a bf16 one,
    from one card-floor run where one is committed (else the newest issue-fp8 grid and the sm_120 issue grid)."""
    if (run := _headline_run()) is not None:
        source, fp8, bf16 = run
        where = f"both from `{source}`"
    else:
        _, rows = _e4m3_grid()
        _, by_shape = _bench(SM120_RUN)
        where = f"`{_rel(_e4m3_grid_path())}`, the bf16 ones `{_rel(SM120_RUN)}`"
        fp8 = {k: r["ms"] for k, r in rows.items()}
        bf16 = {(i, *k): r["ms"] for k, by in by_shape.items() for i, r in by.items()}
    f, b = fp8[(E4M3, *HEADLINE)], bf16[(SM120_ROLES, *HEADLINE)]
    small = ""
    if (E4M3_32, *CHAIN_4) in fp8 and (SM120_FIRST, *CHAIN_4) in bf16:
        f32, b32 = fp8[(E4M3_32, *CHAIN_4)], bf16[(SM120_FIRST, *CHAIN_4)]
        small = (f", and its 32-row form at 32 rows and fewer: a chain of 4 at 8 heads over 200k tokens {f32:.4f} ms "
                 f"where the bf16 pool takes {b32:.4f} ms")
    return (f"Over an fp8 pool (`--kv-cache-dtype fp8_e4m3`) an sm_120 card runs the role split on e4m3 tensor cores "
            f"above 32 rows: on the headline shape {f:.3f} ms where the bf16 pool takes {b:.3f} ms{small} (H200 under "
            f"sm_120's limits, forced, not an sm_120 run; the e4m3 times on the timing library, which issues "
            f"sm_120a's instruction stream: {where}), "
            f"{_fresh_clause()}; "
            "`KDTREE_FP8_MATH=exact` (or `VerifyAttention(fp8_math=\"exact\")`) keeps the exact conversion path "
            "instead (`docs/kernels.md`, \"fp8 pools\").")


def _fresh_clause() -> str:
    """The README's words on e4m3's error: the newest fresh draw's worst case against the oracle and SGLang's."""
    path, data, e4m3, _, _ = _fresh()
    gpu = data["provenance"]["gpu"].replace("NVIDIA ", "").split()[0]
    return (f"its error within rel. L2 {e4m3['rel_l2_max']:.3f} of the fp64 oracle and at most "
            f"{e4m3['ratio_max']:.2f}x SGLang's own fp8 kernel's on {data['draw']['count']} fresh random cases ({gpu}, "
            f"`{_rel(path)}`; every GPU test run draws new ones and bounds them, `docs/kernels.md`, \"fp8 pools\")")


def _fresh(path: Path | None = None) -> tuple[Path, dict, dict, dict | None, int]:
    """The newest committed fresh draw (or ``path``): (path, its JSON, the summary of its e4m3 rows, of its exact
    rows (None without any), the number of cases on which some e4m3 row is above SGLang's error)."""
    from kdtree_lab.checks.fp8_fresh import judged, summary

    path = path or _fresh_path()
    data = json.loads(path.read_text())
    rows = [judged(r) for r in data["rows"]]
    e4m3, exact = [r for r in rows if r["e4m3"]], [r for r in rows if not r["e4m3"]]
    if not e4m3:
        raise LookupError(f"{_rel(path)}: holds no row run with e4m3 math")
    above = len({r["name"] for r in e4m3 if r["ratio"] > 1})
    return path, data, summary(e4m3), summary(exact) if exact else None, above


def _fresh_path(results: Path = RESULTS) -> Path:
    """The newest committed fresh-draw run (``data/results/{h200,h100}/<run>/.../fp8-fresh.json``, by its provenance
    date: both GPUs run the same sm_90a build, so the same outputs; a draw after a kernel change that moves the error
    is what keeps the sentence true); LookupError where none is committed."""
    found = sorted((json.loads(p.read_text())["provenance"].get("date_utc", ""), str(p), p)
                   for gpu in ("h200", "h100") for p in (results / gpu).rglob("fp8-fresh.json"))
    if not found:
        raise LookupError("no fp8-fresh.json committed under data/results/h200/ or h100/ (python3 "
                          "scripts/fp8_accuracy.py --fresh 60 --out $OUT/fp8-fresh.json writes one)")
    return found[-1][2]


def fp8_fresh_sentence(path: Path | None = None) -> str:
    """The fp8 accuracy sentence on cases no one chose (issue 51), from the newest committed fresh-draw run (or
    ``path``): the e4m3 configurations' worst rel_l2 against the fp64 oracle and their error over SGLang's own fp8
    kernel's on the same cases, the exact configurations' worst rel_l2, and the bounds the GPU test asserts."""
    from kdtree_lab.checks.fp8_fresh import RATIO_MEDIAN_MAX, RATIO_P90_MAX

    path, data, s, x, above = _fresh(path)
    d, p, b = data["draw"], data["provenance"], data["bound"]
    configs = ", ".join(f"`{c}`" for c in dict.fromkeys(r["impl"] for r in data["rows"] if r["e4m3"]))
    tail = f"; the exact configurations within rel_l2 {x['rel_l2_max']:.4f}" if x else ""
    return (f"On {d['count']} fresh random fp8 cases (`{_rel(path)}`, {p['gpu']}, {p['date_utc'][:10]}, seed "
            f"{data['seed']}: batch {d['batch'][0]}-{d['batch'][1]}, {d['T'][0]}-{d['T'][1]} draft tokens, "
            f"{d['H'][0]}-{d['H'][1]} heads, ragged prefixes up to {(d['prefix'][1] + 1) // 1024}k tokens, tree / "
            f"chain / causal masks, k_scale and v_scale in {d['scales'][0]:g}-{d['scales'][1]:g}) the configurations "
            f"that ran e4m3 math ({configs}; over fp8 the first two run the e4m3 forms) stay within rel_l2 "
            f"{s['rel_l2_max']:.3f} of the fp64 reference and within {s['ratio_max']:.2f}x SGLang's own fp8 error "
            f"(median {s['ratio_median']:.2f}x; above SGLang's on {above} of the {d['count']} cases){tail}. The GPU "
            f"test asserts on every run, on cases it draws itself: per case, within the math's tolerance of the "
            f"oracle and within {b['sglang_error_factor']:g}x SGLang's error + {b['sglang_error_floor']:g} (one bf16 "
            f"ULP); per configuration, a median of ours / SGLang's error of at most {RATIO_MEDIAN_MAX:g} and a 90th "
            f"percentile of at most {RATIO_P90_MAX:g} (a form that rounds Q as SGLang does fails this).")
