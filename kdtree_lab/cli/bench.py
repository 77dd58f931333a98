"""``kdtree-lab bench``: the benchmark presets on a GPU, or sharded over a fleet."""

from __future__ import annotations

import argparse
import sys

from ..checks.bench_presets import PEER_IMPLS, PRESETS
from ..kernels.impls import IMPLS
from ..lab.record import emit
from .args import fleet_flags, fleet_labels, fleet_report


def cmd_bench(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import torch

    if not torch.cuda.is_available():
        print("kdtree-lab bench: needs a CUDA GPU (timings on a CPU would not mean anything)", file=sys.stderr)
        return 2
    from ..checks.bench import run_preset
    from ..core.display import markdown_table
    from ..lab.provenance import provenance
    from ..lab.record import jsonable

    impls = args.impl.split(",") if args.impl else None
    out = Path(args.out) if args.out else None
    if args.gpus:
        from ..checks.bench import sglang_available
        from ..checks.bench_presets import preset_items
        from ..lab import fleet

        labels = fleet_labels(args, "bench")
        if labels is None:
            return 2
        rep = fleet.bench(preset_items(args.preset, impls), labels, args.timing, args.scheduler)
        result = {"preset": args.preset, "ceilings": {o.gpu: o.value["ceilings"] for o in rep.outcomes
                                                      if o.error is None},
                  "sglang": sglang_available(), "timing": args.timing, "provenance": provenance()}
        if out:
            out.write_text(json.dumps(jsonable(result | {"gpus": rep.summary(), "complete": rep.complete,
                                                         "rows": rep.rows}), indent=2) + "\n")
        return fleet_report(args, "bench", rep, result, markdown_table(rep.rows))
    resume = json.loads(Path(args.resume).read_text()) if args.resume else None
    result = run_preset(args.preset, impls, progress=not args.json, method=args.timing,
                        checkpoint=out.with_suffix(".partial.json") if out else None, resume=resume)
    result["provenance"] = provenance()
    if out:
        out.write_text(json.dumps(jsonable(result), indent=2) + "\n")
    c = result["ceilings"]
    text = (f"ceilings: copy {c['copy_gbps']:.0f} GB/s, bf16 GEMM {c['gemm_tflops']:.0f} TFLOP/s; "
            f"SGLang: {result['sglang'] or 'not importable'}\n" + markdown_table(result["rows"]))
    emit(args, result, text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("bench", help="time the CUDA kernel, the Triton twin and SGLang's kernels (GPU only)")
    p.add_argument("--preset", choices=PRESETS, default="quick",
                   help="shape grid (issue-fp8: the issue grid's H = 8, 16 rows over an fp8 pool on the sm_120 e4m3 "
                        "and exact configurations; hopper-fp8: the same rows over both pools on sm_90a, v5 over "
                        "bf16 beside v4's e4m3 variant, which v5 maps an fp8 pool to; fp8: memory- and compute-bound "
                        "shapes over a bf16 and an fp8 pool; chain: chains beside SGLang's verify_shared_kv_fwd and "
                        "FlashMLA)")
    p.add_argument("--impl", help=f"comma-separated subset of {', '.join((*IMPLS, *PEER_IMPLS))} "
                                  "(default: the implementations the preset names for each shape)")
    p.add_argument("--timing", choices=["graph", "eager"], default="graph",
                   help="graph: replays of a captured call (GPU time, as SGLang runs verify); eager: CUDA events "
                        "around each call, host launch overhead included")
    p.add_argument("--out", help="write the JSON result (with provenance) to this file; FILE.partial.json is "
                                 "rewritten after every shape")
    p.add_argument("--resume", metavar="PARTIAL_JSON",
                   help="keep the rows of an interrupted run of the same preset and time only the missing shapes")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    fleet_flags(p)
    p.set_defaults(func=cmd_bench)
