"""``kdtree-lab bench``: the benchmark presets on a GPU, or sharded over a fleet."""

from __future__ import annotations

import argparse

from ..checks.bench_presets import PEER_IMPLS, PRESETS
from ..kernels.impls import IMPLS
from ..lab.record import emit
from .args import OK, AnswerNo, BadArgument, check_fleet_flags, fleet_flags, fleet_labels, fleet_report, \
    readable_file


def cmd_bench(args: argparse.Namespace) -> int:
    """Every argument checked first (exit 2), then the GPU (exit 3 without one: timings on a CPU would mean
    nothing)."""
    import json

    import torch

    check_fleet_flags(args)
    impls = _impls(args.impl)
    out = _out_file(args.out) if args.out is not None else None
    if args.shape:
        name, items = "shapes", _shape_items(args, impls)
        resume = None
    else:
        name = args.preset or "quick"
        resume = _resume(args.resume, name) if args.resume else None
        from ..checks.bench_presets import preset_items

        items = preset_items(name, impls)
        if impls and not any(chosen for _, chosen in items):
            raise BadArgument(f"argument --impl: expected an implementation preset {name} times, found "
                              f"{','.join(impls)}, which it times at no shape")
    if args.gpus and resume is not None:
        raise BadArgument("argument --resume: applies to a run on this machine's GPU, found it with --gpus")
    if args.gpus and name == "card-floor":
        raise BadArgument("argument --gpus: the card-floor preset is one run on one GPU (issue 52's figures, read "
                          "against that run's ceilings), found it with --gpus")
    if not args.gpus and not torch.cuda.is_available():
        raise AnswerNo("needs a CUDA GPU, found none here (timings on a CPU would not mean anything); the committed "
                       "H200 results are in notebook 06 and data/results/")
    if name == "card-floor" and not args.gpus:
        from ..kernels.build import e4m3_timing_proxy

        problem = card_floor_problem(torch.cuda.get_device_capability(0)[0], e4m3_timing_proxy())
        if problem:
            raise BadArgument(problem)
    from ..checks.bench import run_items
    from ..core.display import aligned_table
    from ..lab.provenance import provenance
    from ..lab.record import jsonable

    if args.gpus:
        from ..checks.bench import sglang_available
        from ..lab import fleet

        labels = fleet_labels(args)
        rep = fleet.bench(items, labels, args.timing, args.scheduler)
        from ..kernels.build import timing_conditions

        result = {"preset": name, "ceilings": {o.gpu: o.value["ceilings"] for o in rep.outcomes
                                                      if o.error is None},
                  "sglang": sglang_available(), "timing": args.timing, "provenance": provenance(),
                  **timing_conditions()}  # as a one-GPU run records
        if out:
            out.write_text(json.dumps(jsonable(result | {"gpus": rep.summary(), "complete": rep.complete,
                                                         "rows": rep.rows}), indent=2) + "\n")
        return fleet_report(args, "bench", rep, result, aligned_table(rep.rows))
    result = run_items(name, items, progress=not args.json, method=args.timing,
                       checkpoint=out.with_suffix(".partial.json") if out else None, resume=resume)
    result["provenance"] = provenance()
    if out:
        out.write_text(json.dumps(jsonable(result), indent=2) + "\n")
    c = result["ceilings"]
    text = (f"ceilings: copy {c['copy_gbps']:.0f} GB/s, bf16 GEMM {c['gemm_tflops']:.0f} TFLOP/s; "
            f"SGLang: {result['sglang'] or 'not importable'}\n" + aligned_table(result["rows"]))
    emit(args, result, text)
    return OK


def card_floor_problem(cc_major: int, timing_library: bool) -> str | None:
    """Why the card-floor preset cannot run here, or None: on a GPU without e4m3 mma.sync (compute capability 9.x:
    ptxas emulates it) its e4m3 forms must be the timing library's, which issue what sm_120a issues."""
    if cc_major == 9 and not timing_library:
        return ("argument --preset card-floor: expected KDT_E4M3_TIMING=1 in the environment on this GPU (compute "
                "capability 9.x has no e4m3 mma.sync: without it the e4m3 forms time the emulation, not what sm_120a "
                "issues), found it unset")
    return None


def _impls(text: str | None) -> list[str] | None:
    """--impl's names, each one of the implementations or peers (refused by name, exit 2)."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",")]
    known = (*IMPLS, *PEER_IMPLS)
    bad = [n for n in names if n not in known]
    if bad or not text.strip():
        raise BadArgument(f"argument --impl: expected comma-separated names of {', '.join(known)}, found "
                          + (", ".join(map(repr, bad)) if bad and text.strip() else "an empty value"))
    return names


def _shape_items(args: argparse.Namespace, impls: list[str] | None) -> list:
    """--shape's (shape, implementations) pairs: each B,L,N,H[,KV] with every --impl (refused in one line: a
    malformed shape, no --impl, or beside --preset or --resume)."""
    from ..checks.roofline import parse_shape

    if args.preset is not None:
        raise BadArgument(f"argument --shape: times the shapes it names, found it with --preset {args.preset}")
    if args.resume:
        raise BadArgument("argument --resume: finishes a preset's run, found it with --shape")
    if not impls:
        raise BadArgument("argument --shape: needs --impl (the implementations to time at these shapes), found none")
    items = []
    for text in args.shape:
        try:
            items.append((parse_shape(text), list(impls)))
        except ValueError as exc:
            raise BadArgument(f"argument --shape: {exc}")
    return items


def _out_file(text: str):
    """--out as a path whose folder exists and can be written (refused in one line before any timing)."""
    import os
    from pathlib import Path

    if not text.strip():
        raise BadArgument("argument --out: expected a file to write the JSON result to, found an empty value")
    path = Path(text).resolve()
    if path.is_dir():
        raise BadArgument(f"argument --out: expected a file, found the directory {path}")
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise BadArgument(f"argument --out: expected a file in a writable directory, found {path.parent} "
                          f"{'not writable' if path.parent.is_dir() else 'missing'}")
    return path


def _resume(path: str, preset: str) -> dict:
    """An interrupted run's JSON of the same preset (refused in one line when it is not one)."""
    import json
    from pathlib import Path

    try:
        doc = json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadArgument(f"argument --resume {path}: expected a bench result JSON, found unreadable JSON "
                          f"({type(exc).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise BadArgument(f"argument --resume {path}: expected a bench result JSON (with its rows), found none")
    if doc.get("preset") != preset:
        raise BadArgument(f"argument --resume {path}: expected a result of --preset {preset}, found one of "
                          f"{doc.get('preset')!r}")
    return doc


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("bench", help="time the CUDA kernel, the Triton twin and SGLang's kernels (GPU only)")
    p.add_argument("--preset", choices=PRESETS, default=None,
                   help="shape grid (default: quick; issue-fp8: the issue grid's H = 8, 16 rows over an fp8 pool on "
                        "the sm_120 e4m3 and exact configurations; hopper-fp8: the same rows over both pools on "
                        "sm_90a, v5 over bf16 beside v4's e4m3 variant, which v5 maps an fp8 pool to; fp8: memory- and "
                        "compute-bound shapes over a bf16 and an fp8 pool; chain: chains beside SGLang's "
                        "verify_shared_kv_fwd, FlashMLA and b12x; b12x: b12x's dense MLA beside ours on chains of 1-8 "
                        "rows, both pools; card-floor: issue 52's targets, the TP8 / TP4 rows at L >= 32k over both "
                        "pools on the sm_120 forms, in one run: with KDT_E4M3_TIMING=1)")
    p.add_argument("--shape", action="append", metavar="B,L,N,H[,KV]",
                   help="time this shape instead of a preset's (repeat it for more; KV: the pool, bf16 by default, "
                        "or fp8; needs --impl): a kernel change measured at the shapes it targets")
    p.add_argument("--impl", help=f"comma-separated subset of {', '.join((*IMPLS, *PEER_IMPLS))} "
                                  "(default: the implementations the preset names for each shape)")
    p.add_argument("--timing", choices=["graph", "eager"], default="graph",
                   help="graph: replays of a captured call (GPU time, as SGLang runs verify); eager: CUDA events "
                        "around each call, host launch overhead included")
    p.add_argument("--out", help="write the JSON result (with provenance) to this file; FILE.partial.json is "
                                 "rewritten after every shape")
    p.add_argument("--resume", metavar="PARTIAL_JSON", type=readable_file,
                   help="keep the rows of an interrupted run of the same preset and time only the missing shapes")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    fleet_flags(p)
    p.set_defaults(func=cmd_bench)
