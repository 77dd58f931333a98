"""Kernel lab (GPU): per-configuration correctness smoke and a split/reduce time breakdown.

For every kernel configuration in the built library (forced one at a time): a short parity run against the fp64
oracle, then, per shape and split count, the CUDA time of each kernel (the split kernel and the reduce) from the
PyTorch profiler, averaged over rotated inputs. Writes JSON to --out. A development tool for kernel work; the
benchmark of record is ``kdtree-lab bench``.

    python3 scripts/kernel_profile.py --out $OUT/profile.json [--configs cuda_sm120_roles,cuda_sm120_e4m3]
        [--nsplit 66,132,264]

Configurations are named by their implementation names (``kdtree_lab.kernels.impls``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import numpy as np
import torch

from kdtree_lab.kernels import dispatch, loader
from kdtree_lab.checks import parity
from kdtree_lab.kernels.launch_plan import E4M3_CONFIGS, default_nsplit
from kdtree_lab.checks.bench import shape_batches
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings
from kdtree_lab.checks.oracle import compare, reference

SHAPES = {"headline": Shape(1, 200_000, 16, 8), "deploy": Shape(8, 200_000, 16, 8),
          "mem": Shape(1, 200_000, 4, 8), "b48": Shape(48, 32_768, 16, 8), "big": Shape(1, 200_000, 64, 128),
          # short prefixes, where a 64-row tile's split floor and fixed cost show (issue 28's per-shape choice)
          "short": Shape(1, 4096, 16, 8), "short64": Shape(1, 4096, 4, 16), "mid": Shape(1, 32_768, 16, 8),
          # issue 52's 32-row ratio shapes at B = 8 (with "mem", B = 1 at 200k): what the 32-row e4m3 form runs
          "chain8": Shape(8, 200_000, 4, 8), "chain8mid": Shape(8, 32_768, 4, 8)}


def smoke(index: int, count: int, kv_dtype: str = "bf16") -> dict:
    cases = parity.edge_cases(max_prefix=4096, max_batch=48, heads=(8, 16, 128), big_n=64)
    cases += parity.random_cases(count, np.random.default_rng(index + 1), max_prefix=70_000, max_batch=8,
                                 max_draft=64, heads=(8, 16, 64, 128), budget_tokens=20_000_000)
    if kv_dtype == "fp8":
        cases = parity.fp8_cases(cases)
    # the tolerance of the math the pool runs: e4m3's where this configuration maps the pool to an e4m3 form
    runs = loader.library().config_for_pool(index, kv_dtype)["kernel"]
    e4m3 = runs in E4M3_CONFIGS
    bad = []
    for case in cases:
        batch = case.build("cuda")
        loader.force_config(index)
        try:
            out, flags = _run(batch, case)
        finally:
            loader.force_config(None)
        rows = batch.live_bs * batch.max_extend_len
        err = compare(out[:rows], reference(batch)[:rows])
        if not (parity.within_tolerance(err, e4m3) and flags == 0):
            bad.append({"case": parity.case_dict(case), "err": err, "flags": flags})
    return {"cases": len(cases), "failed": len(bad), "runs": runs, "e4m3_tolerance": e4m3, "first_failures": bad[:5]}


def _run(batch, case):
    ws = dispatch.workspace(batch.bs, batch.max_extend_len, batch.num_heads, case.nsplit, batch.q.device)
    out = loader.verify(batch, ws, case.nsplit)
    torch.cuda.synchronize()
    return out, dispatch.read_status(ws)


def breakdown(index: int, shape: Shape, nsplit: int, iters: int = 10, kv_dtype: str = "bf16") -> dict:
    shape = replace(shape, kv=kv_dtype)  # an fp8 shape builds its batches over an e4m3 pool with bench.FP8_SCALES
    batches = shape_batches(shape)
    copies = len(batches)
    ws = dispatch.workspace(shape.batch, shape.draft, shape.heads, nsplit)
    loader.force_config(index)
    try:
        for i in range(3):
            loader.verify(batches[i % copies], ws, nsplit)
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for i in range(iters):
                loader.verify(batches[i % copies], ws, nsplit)
            torch.cuda.synchronize()
    finally:
        loader.force_config(None)
    times = {}
    for evt in prof.key_averages():
        if "verify" in evt.key:
            us = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
            times[evt.key.split("(")[0][:60]] = round(us / max(1, evt.count), 2)
    total = sum(times.values())
    return {"config": index, "B": shape.batch, "L": shape.prefix, "N": shape.draft, "H": shape.heads,
            "nsplit": nsplit, "kv_dtype": kv_dtype, "kernels_us": times, "total_us": round(total, 2)}


def config_indices(spec: str, lib) -> list[int]:
    """The library's indices of the configurations in ``spec``: "all", or a comma list of implementation names
    (``kdtree_lab.kernels.impls``: each names one configuration; kernel names hold commas). Raises SystemExit naming
    an unknown one."""
    from kdtree_lab.kernels.impls import CUDA_IMPLS

    if spec == "all":
        return [c["index"] for c in lib.configs()]
    forced = {n: k for n, k in CUDA_IMPLS.items() if k}
    bad = [n for n in spec.split(",") if n not in forced]
    if bad:
        raise SystemExit(f"--configs: expected implementation names ({', '.join(forced)}), found {', '.join(bad)}")
    return [lib.config_index(forced[n]) for n in spec.split(",")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default="all", help="implementation names (comma list), or all")
    ap.add_argument("--shapes", default="headline,deploy,mem,b48,big")
    ap.add_argument("--nsplit", default="auto", help="comma list, or auto (the loader's default)")
    ap.add_argument("--waves", default="", help="instead of --nsplit: CTA waves per shape, e.g. 0.5,1,2")
    ap.add_argument("--smoke", type=int, default=40, help="random parity cases per config (0: none)")
    ap.add_argument("--smoke-configs", default="all", help="configs to smoke-test (names as --configs, or all)")
    ap.add_argument("--plain", type=int, default=0, help="just call the kernel this many times (for ncu)")
    ap.add_argument("--kv-dtype", default="bf16", help="bf16, fp8 or bf16,fp8: the pools smoked and timed")
    a = ap.parse_args(argv)
    if a.plain:
        s = replace(SHAPES[a.shapes.split(",")[0]], kv=a.kv_dtype.split(",")[0])  # fp8: an e4m3 pool
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        nsplit = (default_nsplit(s.batch, s.draft, s.heads, sms) if a.nsplit == "auto"
                  else int(a.nsplit.split(",")[0]))
        b = shape_batches(s, 1)[0]
        ws = dispatch.workspace(s.batch, s.draft, s.heads, nsplit)
        loader.force_config(config_indices(a.configs, loader.library())[0])
        for _ in range(a.plain):
            loader.verify(b, ws, nsplit)
        torch.cuda.synchronize()
        return 0
    lib = loader.library()
    configs = lib.configs()
    idx = config_indices(a.configs, lib)
    smoked = set(config_indices(a.smoke_configs, lib))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    result = {"gpu": torch.cuda.get_device_name(0), "configs": configs, "ceilings": measure_ceilings().__dict__,
              "smoke": {}, "rows": []}
    for i in idx:
        if configs[i]["dynamic_smem"] > optin:
            continue
        if a.smoke and i in smoked:
            for kv in a.kv_dtype.split(","):
                result["smoke"][f"{i}-{kv}"] = smoke(i, a.smoke, kv)
                print("smoke", configs[i]["kernel"], kv, result["smoke"][f"{i}-{kv}"]["failed"], "failed of",
                      result["smoke"][f"{i}-{kv}"]["cases"], flush=True)
        for name in a.shapes.split(","):
            s = SHAPES[name]
            tiles = s.batch * -(-s.draft * s.heads // configs[i]["block_m"]) * configs[i]["cluster"]
            if a.waves:
                nsplits = sorted({max(1, round(float(x) * sms / tiles)) for x in a.waves.split(",")})
            elif a.nsplit == "auto":
                nsplits = [default_nsplit(s.batch, s.draft, s.heads, sms, configs[i]["block_m"],
                                          cluster=configs[i]["cluster"])]
            else:
                nsplits = [int(x) for x in a.nsplit.split(",")]
            for nsplit in nsplits:
                for kv in a.kv_dtype.split(","):
                    row = breakdown(i, s, nsplit, kv_dtype=kv)
                    row["shape"] = name
                    result["rows"].append(row)
                    print(json.dumps(row), flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
