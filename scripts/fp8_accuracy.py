"""Kernel lab (GPU): how far each way of reading SGLang's fp8_e4m3 pool lands from the fp64 oracle of the
dequantised pool (issue 17: "convert to bf16, or the e4m3 MMA where the accuracy allows it: decide by measurement").

Per shape and (k_scale, v_scale): our CUDA kernel (the configuration this GPU selects and the sm_120 kernel forced;
both convert e4m3 -> bf16 exactly and run bf16 MMAs), SGLang 0.5.23's ``extend_attention_fwd`` (Q and P downcast
to e4m3 for the prefix dot products: what an e4m3 MMA path computes), and our kernel fed Q rounded to e4m3 (the
Q half of that choice alone). Writes JSON to --out; a development tool, the gates are the GPU tests.

``--fresh N`` instead draws N fresh random fp8 cases (kdtree_lab/checks/fp8_fresh.py: issue 51's distribution, the
seed from os.urandom unless ``--seed`` or KDT_FRESH_SEED names it) and runs every fp8 configuration this GPU runs and
SGLang's kernel on each: per-case rows, the summary per configuration, the seed and the provenance, what the README's
fresh-case sentence is generated from once committed as data/results/h200/<run>/fp8-fresh.json.

    python3 scripts/fp8_accuracy.py --out $OUT/fp8-accuracy.json
    python3 scripts/fp8_accuracy.py --fresh 60 --out $OUT/fp8-fresh.json [--seed S] [--impls A,B]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kdtree_lab.kernels import attention
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.checks.parity import within_tolerance
from kdtree_lab.checks.sglang_kernels import extend_attention

SHAPES = [([4096], 16, 8), ([32_768], 16, 8), ([4096] * 4, 16, 16), ([32_768], 4, 128), ([200_000], 16, 8)]
SCALES = [(1.0, 1.0), (0.75, 1.5), (2.0, 0.5)]


def _ours(batch, impl: str) -> torch.Tensor:
    batch.o.fill_(float("nan"))
    out, _ = attention.runner(impl)(batch, 8)
    torch.cuda.synchronize()
    return out.clone()


def _sglang(batch) -> torch.Tensor:
    o = extend_attention(batch, torch.full_like(batch.o, float("nan")))
    torch.cuda.synchronize()
    return o


def fresh(count: int, seed: int | None, out: Path, argv: list[str], impls: tuple[str, ...] | None = None) -> int:
    """``--fresh``: the draw, every fp8 configuration (or ``impls``) and SGLang on each case, JSON with the
    provenance; 1 where a case or a configuration is outside the stated bounds (the JSON is written either way)."""
    from kdtree_lab.checks import fp8_fresh
    from kdtree_lab.checks.bench import sglang_available
    from kdtree_lab.lab.provenance import provenance

    sglang = sglang_available()
    if sglang is None:
        print("--fresh needs SGLang's extend_attention_fwd (sglang 0.5.23), which does not import here")
        return 2
    seed = fp8_fresh.fresh_seed() if seed is None else seed
    print(f"fresh fp8 draw: {count} cases, {fp8_fresh.SEED_ENV}={seed}", flush=True)
    t0 = time.perf_counter()
    run = fp8_fresh.run_fresh(count, seed, impls)
    secs = time.perf_counter() - t0
    draw, bound = fp8_fresh.draw_words(count), fp8_fresh.bound_words()
    result = {"provenance": {**provenance("python3 scripts/fp8_accuracy.py " + " ".join(argv)), "sglang": sglang},
              "seed": seed, "seconds": round(secs, 1), "draw": draw, "bound": bound, "summary": run.summary,
              "rows": list(run.rows)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    for impl, s in run.summary.items():
        print(fp8_fresh.summary_words(impl, s))
    bad = [r for r in run.rows if not r["ok"]]
    for r in bad[:10]:
        print("FAIL " + fp8_fresh.failure_words(r, seed))
    loose = [impl for impl, s in run.summary.items() if not fp8_fresh.aggregate_ok(s)]
    for impl in loose:
        print("FAIL " + fp8_fresh.aggregate_words(impl, run.summary[impl], seed))
    print(f"{len(run.rows)} rows in {secs:.0f} s, {len(bad)} outside the bound, {len(loose)} configurations outside "
          f"the aggregate bound -> {out}")
    return 1 if bad or loose else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--fresh", type=int, metavar="N", help="draw N fresh random fp8 cases instead of the fixed shapes")
    ap.add_argument("--seed", type=int, help="the --fresh draw's seed (default: KDT_FRESH_SEED, else os.urandom)")
    ap.add_argument("--impls", help="the --fresh draw's configurations, comma-separated (default: every fp8 one this "
                                    "GPU runs; a kernel experiment names the forms it changes)")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    if args.fresh is not None:
        if args.fresh < 1:
            ap.error(f"--fresh: expected a case count >= 1, found {args.fresh}")
        impls = None
        if args.impls is not None:
            from kdtree_lab.checks.fp8_fresh import fp8_impls

            impls = tuple(i for i in args.impls.split(",") if i)
            fp8 = sorted(fp8_impls())
            if not impls or any(i not in fp8 for i in impls):
                ap.error(f"--impls: expected configurations that read fp8 pools ({', '.join(fp8)}), found "
                         f"'{args.impls}'")
        return fresh(args.fresh, args.seed, args.out, argv, impls)
    if args.seed is not None or args.impls is not None:
        ap.error("--seed / --impls: apply to --fresh only")
    rows = []
    for i, (lens, n, h) in enumerate(SHAPES):
        for ks, vs in SCALES:
            b = build_verify_batch(lens, n, h, seed=100 + i, device="cuda", kv_dtype="fp8", k_scale=ks, v_scale=vs)
            ref = reference(b)
            got = {"cuda": _ours(b, "cuda"), "cuda_sm120": _ours(b, "cuda_sm120"), "sglang_extend": _sglang(b)}
            q = b.q.clone()
            b.q.copy_(q.to(torch.float8_e4m3fn).to(torch.bfloat16))  # the oracle keeps the bf16 Q
            got["cuda, Q rounded to e4m3"] = _ours(b, "cuda")
            b.q.copy_(q)
            for name, out in got.items():
                err = compare(out, ref)
                rows.append({"L": lens[0], "B": len(lens), "N": n, "H": h, "k_scale": ks, "v_scale": vs, "impl": name,
                             "rel_l2": err["rel_l2"], "max_abs": err["max_abs"], "max_ref": err["max_ref"],
                             "within_tolerance": within_tolerance(err)})
                print(f"L={lens[0]:>6} B={len(lens)} N={n:>2} H={h:>3} scales=({ks},{vs}) {name:26s} "
                      f"rel_l2={err['rel_l2']:.2e} max_abs={err['max_abs']:.2e} ok={within_tolerance(err)}")
    with open(args.out, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
