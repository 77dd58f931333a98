"""Kernel lab (GPU): the e4m3 tensor-core configurations (cuda_sm120_e4m3, cuda_sm120_e4m3_32) beside the exact fp8
path and SGLang.

Accuracy: every case of the fp8 GPU grid (edge grid + ``--random`` draws, three (k_scale, v_scale) pairs) run by
each e4m3 configuration (``--impls``), the exact e4m3 -> bf16/f16 path, and SGLang 0.5.23's
``extend_attention_fwd`` (Q and P rounded to e4m3 without scales), each against the fp64 oracle of the dequantised
pool; per case the three rel_l2 and max_abs, and whether ours is within SGLang's. Timing (``--timing``): CUDA-graph
replay medians of the deployment's shapes over both pools, ceilings in the same run. Under KDT_E4M3_TIMING=1 (the
timing library, kdtree_lab.kernels.build.e4m3_timing_proxy) only the timing runs: its e4m3 MMAs are f16 MMAs of
the same cost, the instruction stream an sm_120a card issues.

    python3 scripts/e4m3_lab.py --out $OUT/e4m3-lab.json [--random 100] [--timing] [--impls cuda_sm120_e4m3_32]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

E4M3S = ("cuda_sm120_e4m3", "cuda_sm120_e4m3_32")  # the e4m3 tensor-core configurations (64- and 32-row CTAs)
EXACT = "cuda_sm120_fp8"  # the first sm_120 kernel's exact e4m3 variant
TIMING_SHAPES = [(1, 200_000, 16, 8), (8, 200_000, 16, 8), (8, 200_000, 4, 8), (1, 200_000, 4, 8),
                 (1, 32_768, 16, 8), (8, 32_768, 16, 8), (1, 4096, 16, 8), (1, 200_000, 16, 16),
                 (1, 200_000, 64, 128), (1, 4096, 4, 8), (1, 32_768, 4, 8), (8, 32_768, 4, 8), (8, 4096, 4, 8)]


def accuracy(random_count: int, seed: int, have_sglang: bool, e4m3s: tuple[str, ...]) -> list[dict]:
    import torch

    from kdtree_lab.checks import parity
    from kdtree_lab.checks.oracle import compare, reference
    from kdtree_lab.kernels.attention import runner

    rows = []
    for case in parity.fp8_cases(parity.gpu_grid(random_count, seed=seed)):
        batch = case.build("cuda")
        live = batch.live_bs * batch.max_extend_len
        ref = reference(batch)[:live]
        row = {"name": case.name, "k_scale": case.k_scale, "v_scale": case.v_scale, "mask": case.mask,
               "lens": list(case.prefix_lens), "N": case.num_draft, "H": case.num_heads}
        for impl in (*e4m3s, EXACT):
            batch.o.fill_(float("nan"))
            out, flags = runner(impl)(batch, case.nsplit)
            err = compare(out[:live].clone(), ref)
            row[impl] = {"rel_l2": err["rel_l2"], "max_abs": err["max_abs"], "nan": err["nan"], "flags": flags}
        if have_sglang:
            from kdtree_lab.checks.sglang_kernels import extend_attention

            theirs = extend_attention(batch, torch.full_like(batch.o, float("nan")))
            err = compare(theirs[:live], ref)
            row["sglang_extend"] = {"rel_l2": err["rel_l2"], "max_abs": err["max_abs"], "nan": err["nan"]}
        row["max_ref"] = float(ref.abs().max())
        rows.append(row)
        del batch
        torch.cuda.empty_cache()
    return rows


def timing(proxy: bool, e4m3s: tuple[str, ...]) -> dict:
    """The fp8 shapes on the e4m3 configurations (and, the exact path being the same code in either library, the exact
    fp8 path), the bf16 shapes on both sm_120 configurations; ceilings once."""
    from kdtree_lab.checks.bench import run_grid
    from kdtree_lab.checks.roofline import Shape
    from kdtree_lab.checks.timing import measure_ceilings

    ceilings = measure_ceilings()
    fp8 = run_grid([Shape(*s, kv="fp8") for s in TIMING_SHAPES], [*e4m3s, EXACT] if proxy else [*e4m3s, EXACT, "cuda"],
                   ceilings, progress=False)
    bf16 = run_grid([Shape(*s) for s in TIMING_SHAPES], ["cuda_sm120_roles", "cuda_sm120"], ceilings,
                    progress=False)
    return {**fp8, "rows": fp8["rows"] + bf16["rows"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--random", type=int, default=100, help="random draws after the edge grid (default 100)")
    ap.add_argument("--seed", type=int, default=36, help="seed of the random draws (default 36)")
    ap.add_argument("--timing", action="store_true", help="also time the deployment's shapes (graph replays)")
    ap.add_argument("--impls", default=",".join(E4M3S), help=f"e4m3 configurations, comma list (default {','.join(E4M3S)})")
    a = ap.parse_args(argv)
    e4m3s = tuple(x for x in a.impls.split(",") if x)
    if not e4m3s or any(x not in E4M3S for x in e4m3s):
        ap.error(f"--impls: expected a comma list of {', '.join(E4M3S)}, found {a.impls!r}")
    from kdtree_lab.checks.bench import sglang_available
    from kdtree_lab.kernels.build import e4m3_timing_proxy
    from kdtree_lab.lab.provenance import provenance

    result = {"provenance": provenance("python3 scripts/e4m3_lab.py " + " ".join(argv or sys.argv[1:])),
              "timing_library": e4m3_timing_proxy()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if not e4m3_timing_proxy():
        have = sglang_available()
        if not have:
            try:
                import sglang.kernels.ops.attention.extend_attention  # noqa: F401
            except Exception as exc:  # why SGLang's kernel is missing from the comparison, in one line
                print(f"SGLang's extend_attention_fwd does not import: {type(exc).__name__}: {exc}", flush=True)
        rows = accuracy(a.random, a.seed, have, e4m3s)
        result["accuracy"] = rows
        a.out.write_text(json.dumps(result, indent=1) + "\n")
        for e4m3 in e4m3s:
            worse = [r for r in rows if have and r[e4m3]["rel_l2"] > r["sglang_extend"]["rel_l2"]]
            worst = max(rows, key=lambda r: r[e4m3]["rel_l2"])
            print(f"accuracy: {len(rows)} cases in {time.perf_counter() - t0:.0f} s; {e4m3} rel_l2 "
                  f"{min(r[e4m3]['rel_l2'] for r in rows):.4f}-{worst[e4m3]['rel_l2']:.4f} (worst {worst['name']}), "
                  f"exact {max(r[EXACT]['rel_l2'] for r in rows):.4f} max"
                  + (f", SGLang {min(r['sglang_extend']['rel_l2'] for r in rows):.4f}-"
                     f"{max(r['sglang_extend']['rel_l2'] for r in rows):.4f}; ours worse than SGLang in {len(worse)}"
                     if have else ", SGLang not installed"), flush=True)
            bad = [r["name"] for r in rows if r[e4m3]["nan"] or r[e4m3]["flags"]]
            if bad:
                print(f"{e4m3}: NaN or flags in {len(bad)} cases: {bad[:5]}", flush=True)
    if a.timing or e4m3_timing_proxy():
        result["timing"] = timing(e4m3_timing_proxy(), e4m3s)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
        for r in result["timing"]["rows"]:
            print(f"{r['impl']:18s} kv={r.get('kv', 'bf16'):4s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} "
                  f"{r['ms']:.4f} ms", flush=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
