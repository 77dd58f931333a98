"""Post-processing of benchmark results: per-implementation summaries, fp8-vs-bf16 speed-ups, streaming rates
separated from the fixed cost per call, and re-crediting old rows with their implementation's own work."""

from __future__ import annotations

import statistics

from .roofline import ONE_TOKEN, Shape, derived, row_kv


def summary(rows: list[dict]) -> list[dict]:
    """One line per implementation: shapes timed, roofline fraction (worst / median / best), median speed-up over
    SGLang's verify."""
    out = []
    for impl, kv in sorted({(r["impl"], row_kv(r)) for r in rows}):
        mine = [r for r in rows if r["impl"] == impl and row_kv(r) == kv]
        roof = sorted(r["of_roofline"] for r in mine)
        up = [r["speedup_vs_sglang_verify"] for r in mine if "speedup_vs_sglang_verify" in r]
        out.append({"impl": impl if kv == "bf16" else f"{impl} ({kv} KV)", "shapes": len(mine), "of roofline: worst": roof[0],
                    "median": statistics.median(roof), "best": roof[-1],
                    "median speed-up vs SGLang verify": statistics.median(up) if up else None})
    return out


def fp8_speedups(rows: list[dict]) -> list[dict]:
    """Per implementation and shape timed over both pools: the time over a bf16 pool / the time over an fp8 pool
    (issue 17's targets: >= 1.7 on memory-bound shapes, >= 1 on compute-bound ones) and the fp8 row's bound."""
    by = {(r["impl"], r["B"], r["L"], r["N"], r["H"], row_kv(r)): r for r in rows}
    out = []
    for (impl, b, length, n, h, kv), r in sorted(by.items()):
        base = by.get((impl, b, length, n, h, "bf16"))
        if kv == "fp8" and base:
            out.append({"impl": impl, "B": b, "L": length, "N": n, "H": h, "bf16 ms": base["ms"], "fp8 ms": r["ms"],
                        "bf16 / fp8": round(base["ms"] / r["ms"], 3), "bound (fp8)": r["bound"]})
    return out


def streaming_fits(rows: list[dict], ceilings: dict, impl: str = "cuda", short: int = 32_768,
                   long: int = 200_000) -> list[dict]:
    """Per (B, N, H) series of ``impl`` timed at prefix lengths ``short`` and ``long`` (tokens): the streaming rates
    (KV bytes and FLOPs added over the time added: GB/s, TFLOP/s, and as fractions of the ceilings) and the
    intercept (ms), the part of a call's time the prefix length does not explain; a straight line through the two
    points. Separates a kernel's per-token speed from its fixed cost per call."""
    ms = {(r["B"], r["L"], r["N"], r["H"]): r["ms"] for r in rows if r["impl"] == impl and row_kv(r) == "bf16"}
    out = []
    for (b, length, n, h), t2 in sorted(ms.items()):
        t1 = ms.get((b, short, n, h))
        if length != long or t1 is None or t2 <= t1:
            continue
        s1, s2 = Shape(b, short, n, h), Shape(b, long, n, h)
        dt = (t2 - t1) * 1e-3
        gbps, tflops = (s2.kv_bytes - s1.kv_bytes) / dt / 1e9, (s2.flops - s1.flops) / dt / 1e12
        out.append({"B": b, "N": n, "H": h, "GB/s": round(gbps, 1), "of_copy": round(gbps / ceilings["copy_gbps"], 3),
                    "TFLOP/s": round(tflops, 2), "of_gemm": round(tflops / ceilings["gemm_tflops"], 3),
                    "intercept_ms": round(t1 - s1.kv_bytes / (gbps * 1e9) * 1e3, 4)})
    return out


def recredit(result: dict) -> int:
    """Recompute every row's rates and roofline fraction from its time and its implementation's own work (results
    written before one-token decode rows were credited with one token). Returns how many rows changed."""
    changed = 0
    for r in result["rows"]:
        if r["impl"] not in ONE_TOKEN:
            continue  # credited with their own work already (recomputing from the rounded ms would only jitter)
        new = derived(r["impl"], Shape(r["B"], r["L"], r["N"], r["H"], r.get("mask", "tree")), r["ms"],
                      result["ceilings"])
        if any(r.get(k) != v for k, v in new.items()):
            r.update(new)
            changed += 1
    return changed
