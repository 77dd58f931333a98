"""Kernel lab (GPU): how far each way of reading SGLang's fp8_e4m3 pool lands from the fp64 oracle of the
dequantised pool (issue 17: "convert to bf16, or the e4m3 MMA where the accuracy allows it: decide by measurement").

Per shape and (k_scale, v_scale): our CUDA kernel (the configuration this GPU selects and the sm_120 kernel forced;
both convert e4m3 -> bf16 exactly and run bf16 MMAs), SGLang 0.5.23's ``extend_attention_fwd`` (Q and P downcast
to e4m3 for the prefix dot products: what an e4m3 MMA path computes), and our kernel fed Q rounded to e4m3 (the
Q half of that choice alone). Writes JSON to --out; a development tool, the gates are the GPU tests.

    python3 scripts/fp8_accuracy.py --out $OUT/fp8-accuracy.json
"""

from __future__ import annotations

import argparse
import json

import torch

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
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
