"""Subcommands that work on the contract and the kernels: audit, build, parity."""

from __future__ import annotations

import argparse
import sys

from .impls import IMPLS, kv_refusal
from .record import emit as _emit


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the ValueError into one usage line and exit 2)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "integer >= 1"


def positive_ints(text: str) -> list[int]:
    """argparse type: comma-separated integers >= 1."""
    return [positive_int(t) for t in text.split(",")]


positive_ints.__name__ = "comma-separated integers >= 1"


def readable_file(text: str) -> str:
    """argparse type: a path that names a readable file."""
    from pathlib import Path

    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: expected a readable file, found none")
    return text


def cmd_audit(args: argparse.Namespace) -> int:
    """Build a verify batch of the chosen variant and audit it (and the other variant's dtypes against it)."""
    from .audit import audit
    from .batch import build_verify_batch

    batch = build_verify_batch(args.prefix, args.draft, args.heads,
                               variant=args.variant, mask=args.mask, seed=args.seed,
                               padded_bs=args.padded_bs if args.variant == "capture" else None,
                               kv_dtype=args.kv_dtype, k_scale=args.k_scale, v_scale=args.v_scale)
    report = audit(batch.buffers(), variant=args.against or args.variant, kv_dtype=args.declare_kv_dtype)
    _emit(args, report, report.table())
    return 0 if report.ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    from .build import BuildError, CheckError, build_library, check_library

    archs = tuple(a.strip() for a in args.arch.split(",") if a.strip())
    try:
        result = build_library(archs, force=args.force, progress=not args.json)
        report = check_library(result.library, archs)
    except (BuildError, CheckError) as exc:
        print(f"kdtree-lab build: {exc}", file=sys.stderr)
        return 1
    lines = [f"library  {result.library} ({'cached' if result.cached else f'built in {result.seconds:.1f} s'})",
             f"nvcc     {result.nvcc_version}", "symbols  " + ", ".join(
                 f"{s}{'' if ok else ' MISSING'}" for s, ok in report.symbols.items()),
             "cubins   " + ", ".join(f"{a}: {n}" for a, n in report.cubins.items()), "",
             f"{'arch':<9}{'kernel':<28}{'regs':>5}{'static smem':>12}{'local':>7}{'stack':>7}{'HMMA':>6}"]
    lines += [f"{r.arch:<9}{r.kernel:<28}{r.registers:>5}{r.static_smem:>12}{r.local_bytes:>7}{r.stack:>7}{r.hmma:>6}"
              for r in report.resources]
    lines += ["", "configs: " + "; ".join(f"BM={c['block_m']} stages={c['stages']} threads={c['threads']} "
                                          f"smem={c['dynamic_smem']} fits={c.get('fits')}" for c in report.configs)]
    lines.append("checks: " + ("PASS" if report.ok else "FAIL\n  " + "\n  ".join(report.problems)))
    _emit(args, {"build": result, "check": report, "ok": report.ok}, "\n".join(lines))
    return 0 if report.ok else 1


def cmd_parity(args: argparse.Namespace) -> int:
    import torch

    from .parity import fp8_cases, grid, run_parity

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if IMPLS[args.impl].family == "cuda" and device == "cpu":
        print(f"kdtree-lab parity: --impl {args.impl} needs a CUDA GPU (use --impl triton with TRITON_INTERPRET=1 "
              "on a CPU)", file=sys.stderr)
        return 2
    if args.impl == "triton" and device == "cpu":
        import os

        if os.environ.get("TRITON_INTERPRET") != "1":
            print("kdtree-lab parity: Triton on the CPU needs TRITON_INTERPRET=1 in the environment", file=sys.stderr)
            return 2
    refusal = kv_refusal(args.impl, args.kv_dtype)
    if refusal:
        print(f"kdtree-lab parity: --kv-dtype {args.kv_dtype}: {refusal}", file=sys.stderr)
        return 2
    heads = tuple(int(h) for h in args.heads.split(","))
    cases = grid(args.cases, args.seed, max_prefix=args.max_prefix, max_batch=args.max_batch,
                 max_draft=args.max_draft, heads=heads, budget_tokens=args.budget_tokens, edge=not args.no_edge)
    if args.kv_dtype == "fp8":
        cases = fp8_cases(cases)
    if args.gpus:
        return _fleet_parity(args, cases)
    report = run_parity(args.impl, cases, device, progress=not args.json)
    summary = report.summary()
    text = (f"{args.impl} on {device}: {summary['passed']}/{summary['cases']} cases within tolerance; "
            f"max rel_l2 {summary['max_rel_l2']:.3g}, max abs {summary['max_abs']:.3g}")
    if summary["failed"]:
        text += f"\nFAILED: {summary['failed']}"
    _emit(args, {"summary": summary, "cases": [r.row() for r in report.results]}, text)
    return 0 if report.ok else 1


def _fleet_labels(args: argparse.Namespace, cmd: str) -> list[str] | None:
    """The --gpus list, or None after a one-line refusal."""
    from .fleet import FleetError, parse_gpus, require

    try:
        require()
        return parse_gpus(args.gpus)
    except FleetError as exc:
        print(f"kdtree-lab {cmd}: {exc}", file=sys.stderr)
        return None


def _fleet_report(args, cmd: str, rep, extra: dict, text: str) -> int:
    from .display import markdown_table

    doc = extra | {"gpus": rep.summary(), "complete": rep.complete, "rows": rep.rows}
    _emit(args, doc, text + "\n\n" + markdown_table(rep.summary()))
    for o in rep.outcomes:
        if o.error:
            print(f"kdtree-lab {cmd}: GPU {o.gpu}: {o.error}; the run is incomplete", file=sys.stderr)
    return 0 if rep.complete and all(r.get("ok", True) for r in rep.rows) else 1


def _fleet_parity(args: argparse.Namespace, cases) -> int:
    from . import fleet

    labels = _fleet_labels(args, "parity")
    if labels is None:
        return 2
    rep = fleet.parity(args.impl, cases, labels, args.scheduler)
    passed = sum(r["ok"] for r in rep.rows)
    text = f"{args.impl} on {len(labels)} workers ({','.join(labels)}): {passed}/{len(rep.rows)} cases within tolerance"
    return _fleet_report(args, "parity", rep, {"impl": args.impl, "cases": len(cases)}, text)


def cmd_bench(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import torch

    if not torch.cuda.is_available():
        print("kdtree-lab bench: needs a CUDA GPU (timings on a CPU would not mean anything)", file=sys.stderr)
        return 2
    from .bench import run_preset
    from .display import markdown_table
    from .provenance import provenance
    from .record import jsonable

    impls = args.impl.split(",") if args.impl else None
    out = Path(args.out) if args.out else None
    if args.gpus:
        from . import fleet
        from .bench import preset_items, sglang_available

        labels = _fleet_labels(args, "bench")
        if labels is None:
            return 2
        rep = fleet.bench(preset_items(args.preset, impls), labels, args.timing, args.scheduler)
        result = {"preset": args.preset, "ceilings": {o.gpu: o.value["ceilings"] for o in rep.outcomes
                                                      if o.error is None},
                  "sglang": sglang_available(), "timing": args.timing, "provenance": provenance()}
        if out:
            out.write_text(json.dumps(jsonable(result | {"gpus": rep.summary(), "complete": rep.complete,
                                                         "rows": rep.rows}), indent=2) + "\n")
        return _fleet_report(args, "bench", rep, result, markdown_table(rep.rows))
    resume = json.loads(Path(args.resume).read_text()) if args.resume else None
    result = run_preset(args.preset, impls, progress=not args.json, method=args.timing,
                        checkpoint=out.with_suffix(".partial.json") if out else None, resume=resume)
    result["provenance"] = provenance()
    if out:
        out.write_text(json.dumps(jsonable(result), indent=2) + "\n")
    c = result["ceilings"]
    text = (f"ceilings: copy {c['copy_gbps']:.0f} GB/s, bf16 GEMM {c['gemm_tflops']:.0f} TFLOP/s; "
            f"SGLang: {result['sglang'] or 'not importable'}\n" + markdown_table(result["rows"]))
    _emit(args, result, text)
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    import torch

    from .capture_plants import planted_findings
    from .display import markdown_table

    plants = planted_findings("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        _emit(args, {"capture_audit_plants": plants, "skipped": "graph capture needs a CUDA GPU"},
              markdown_table(plants) + "\n\ngraph capture and replay need a CUDA GPU: only the audit ran")
        return 2
    from .graphs import GraphConfig, enablement, graph_checks, pool_fields

    sizes = tuple(int(x) for x in args.bs.split(",")) if args.bs else ()
    cfg = GraphConfig(max_bs=max(sizes or (args.max_bs,)), num_draft=args.draft, num_heads=args.heads, ctx=args.ctx,
                      impl=args.impl, mask=args.mask, sizes=sizes, **pool_fields(args.kv_dtype))
    result = enablement(cfg, replays=args.replays, seed=args.seed) | {"capture_audit_plants": plants}
    checks = graph_checks(result, plants)
    rep = result["replay"]
    text = (f"captured {len(result['capture'])} sizes; graph pool {result['graph_pool_bytes_total'] / 2**20:.1f} MiB, "
            f"workspace {result['workspace_bytes'] / 2**20:.1f} MiB\n"
            f"replays: {rep['replays_per_size']} per size, {rep['mismatches_vs_eager']} mismatches vs eager, "
            f"{rep['oracle_failures']} oracle failures, addresses stable: {rep['addresses_stable']}\n"
            f"audit of the captured call: {'capture-safe' if result['audit_capture_safe'] else result['audit']}\n"
            + markdown_table(result["validate_in_graph"]) + "\n\n" + markdown_table(plants)
            + "\n\n" + markdown_table(checks))
    _emit(args, result | {"checks": checks}, text)
    ok = all(c["ok"] for c in checks)
    return 0 if ok else 1


def cmd_budget(args: argparse.Namespace) -> int:
    from .budget import BudgetInputError, BudgetInputs, calibrate, compute, parse_sglang_log
    from .display import markdown_table

    try:
        inp = BudgetInputs(gpu=args.gpu, model=args.model, tp=args.tp, quant=args.quant, kv_dtype=args.kv_dtype,
                           max_bs=args.max_bs, draft_tokens=args.draft_tokens, topk=args.topk,
                           spec_steps=args.spec_steps, spec_algorithm=args.spec_algorithm,
                           model_path=args.model_path, draft_model_path=args.draft_model_path, nsplit=args.nsplit,
                           context=args.context, concurrency=args.concurrency, mem_fraction=args.mem_fraction,
                           chunked_prefill=args.chunked_prefill, margin_mib=args.margin_mib)
        if args.sglang_log:
            from pathlib import Path

            inp = calibrate(inp, parse_sglang_log(Path(args.sglang_log).read_text()))
        res = compute(inp)
    except BudgetInputError as exc:
        print(f"kdtree-lab budget: {exc}", file=sys.stderr)
        return 2
    if res.impossible:
        if args.json:
            _emit(args, res, "")
        print(f"kdtree-lab budget: impossible deployment: {res.impossible}", file=sys.stderr)
        return 1
    text = (markdown_table(res.table()) + f"\n\nKV tokens: {res.kv_tokens} ({res.max_context_per_request} per "
            f"request at {inp.concurrency} concurrent)\nlargest safe fraction: {res.safe_fraction:.3f}; SGLang's "
            f"default: {res.sglang_default_fraction:.3f}; evaluated: {res.fraction:.3f}\n"
            + "".join(f"warning: {w}\n" for w in res.warnings) + res.launch_line)
    _emit(args, res, text)
    return 0


def _fleet_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", help="all | 0,1,... | cpu:N: shard the grid over these GPUs (one Dask worker each; "
                                  "needs the fleet extra), rows merged in grid order with their GPU")
    p.add_argument("--scheduler", help="a running Dask scheduler (tcp://host:8786) whose workers serve --gpus")


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("audit", help="audit a generated verify batch against the SGLang buffer contract")
    p.add_argument("--variant", choices=["eager", "capture"], default="eager", help="which variant to build")
    p.add_argument("--against", choices=["eager", "capture"], help="audit against this variant (default: same)")
    p.add_argument("--prefix", type=positive_ints, default="37,200,1", help="comma-separated prefix lengths (tokens)")
    p.add_argument("--draft", type=positive_int, default=8, help="N draft tokens per request")
    p.add_argument("--heads", type=positive_int, default=8, help="H local heads")
    p.add_argument("--mask", choices=["tree", "chain", "causal"], default="tree")
    p.add_argument("--padded-bs", type=positive_int, default=None, help="capture variant: pad to this batch size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16", help="the pool to build (fp8: e4m3)")
    p.add_argument("--k-scale", type=float, default=1.0, help="k_scale passed with the batch")
    p.add_argument("--v-scale", type=float, default=1.0, help="v_scale passed with the batch")
    p.add_argument("--declare-kv-dtype", choices=["auto", "bf16", "fp8_e4m3"], default=None,
                   help="audit the pool against this --kv-cache-dtype (default: not checked)")
    p.add_argument("--json", action="store_true", help="print the audit as JSON")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("build", help="build the CUDA kernel library and check symbols, SASS and resources")
    p.add_argument("--arch", default="sm_120a,sm_90a", help="comma-separated archs (default sm_120a,sm_90a)")
    p.add_argument("--force", action="store_true", help="rebuild even if a cached library exists")
    p.add_argument("--json", action="store_true", help="print the build and check report as JSON")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("parity", help="compare a kernel with the fp64 oracle on edge cases and random draws")
    p.add_argument("--impl", choices=list(IMPLS), default="cuda",
                   help="; ".join(f"{i.name}: {i.summary}" for i in IMPLS.values()))
    p.add_argument("--cases", type=int, default=50, help="random cases after the edge grid")
    p.add_argument("--no-edge", action="store_true", help="skip the edge grid")
    p.add_argument("--max-prefix", type=int, default=4096, help="longest prefix drawn (tokens)")
    p.add_argument("--max-batch", type=int, default=48, help="largest batch in the edge grid")
    p.add_argument("--max-draft", type=int, default=16, help="largest N drawn")
    p.add_argument("--heads", default="8,16", help="comma-separated H values")
    p.add_argument("--budget-tokens", type=int, default=None, help="cap on sum(L)*N*H per random case")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16",
                   help="KV pool: bf16, or fp8 (SGLang's fp8_e4m3, with k_scale / v_scale other than 1)")
    p.add_argument("--json", action="store_true", help="print the summary and every case as JSON")
    _fleet_flags(p)
    p.set_defaults(func=cmd_parity)

    p = sub.add_parser("budget", help="memory budget: KV tokens, slack consumers and the --mem-fraction-static to pass")
    p.add_argument("--gpu", default="rtx-pro-6000", help="GPU preset (data/presets/gpus.yaml)")
    p.add_argument("--model", default="kimi-k2", help="model preset (data/presets/models.yaml)")
    p.add_argument("--tp", type=positive_int, default=8, help="tensor parallel size")
    p.add_argument("--quant", default="int4", help="weight quantisation of the preset: int4, fp8, bf16")
    p.add_argument("--kv-dtype", default="bf16", choices=["bf16", "fp8"], help="KV cache dtype")
    p.add_argument("--max-bs", type=positive_int, default=8, help="largest verify batch captured")
    p.add_argument("--draft-tokens", type=positive_int, default=16,
                   help="N draft tokens per request (--speculative-num-draft-tokens)")
    p.add_argument("--topk", type=positive_int, default=4,
                   help="--speculative-eagle-topk: > 1 drafts a tree; 1 a chain of --spec-steps + 1 tokens")
    p.add_argument("--spec-steps", type=positive_int, default=3, help="--speculative-num-steps")
    p.add_argument("--spec-algorithm", choices=["EAGLE", "EAGLE3", "DFLASH"], default="EAGLE",
                   help="--speculative-algorithm (DFLASH: a chain, --topk 1 --spec-steps 1)")
    p.add_argument("--model-path", default="MODEL_PATH", help="checkpoint the launch line passes to SGLang")
    p.add_argument("--draft-model-path", default="DRAFT_MODEL_PATH",
                   help="draft checkpoint the launch line passes (--speculative-draft-model-path)")
    p.add_argument("--nsplit", type=int, default=0,
                   help="prefix splits of the verify kernel (0, the default: the kernel's own rule per batch size)")
    p.add_argument("--context", type=positive_int, default=200_000, help="context length per request (tokens)")
    p.add_argument("--concurrency", type=positive_int, default=8, help="concurrent requests the context must fit")
    p.add_argument("--mem-fraction", type=float, default=None, help="fraction to evaluate (default: the safe one)")
    p.add_argument("--chunked-prefill", type=int, default=None, help="chunked prefill size (default: SGLang's)")
    p.add_argument("--margin-mib", type=float, default=1024.0, help="safety margin (MiB)")
    p.add_argument("--sglang-log", type=readable_file, help="SGLang start-up log to calibrate G and the weights from")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_budget)

    p = sub.add_parser("capture", help="capture the verify call in CUDA graphs at SGLang's sizes and prove replays")
    p.add_argument("--bs", help="comma-separated batch sizes (default: SGLang's 23 verify sizes up to --max-bs)")
    p.add_argument("--max-bs", type=positive_int, default=48, help="largest batch (persistent buffers are sized for it)")
    p.add_argument("--draft", type=positive_int, default=16, help="N draft tokens per request")
    p.add_argument("--heads", type=int, default=8, help="H local heads")
    p.add_argument("--ctx", type=int, default=1024, help="longest prefix per request (tokens)")
    p.add_argument("--impl", choices=["cuda", "triton"], default="cuda")
    p.add_argument("--mask", choices=["tree", "causal"], default="tree")
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16",
                   help="KV pool held by the graphs (fp8: e4m3 with k_scale / v_scale other than 1)")
    p.add_argument("--replays", type=int, default=100, help="fresh random batches replayed per size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("bench", help="time the CUDA kernel, the Triton twin and SGLang's kernels (GPU only)")
    p.add_argument("--preset", choices=["quick", "issue", "fp8"], default="quick",
                   help="shape grid (fp8: memory- and compute-bound shapes over a bf16 and an fp8 pool)")
    p.add_argument("--impl", help=f"comma-separated subset of {','.join(IMPLS)},sglang_extend,sglang_decode")
    p.add_argument("--timing", choices=["graph", "eager"], default="graph",
                   help="graph: replays of a captured call (GPU time, as SGLang runs verify); eager: CUDA events "
                        "around each call, host launch overhead included")
    p.add_argument("--out", help="write the JSON result (with provenance) to this file; FILE.partial.json is "
                                 "rewritten after every shape")
    p.add_argument("--resume", metavar="PARTIAL_JSON",
                   help="keep the rows of an interrupted run of the same preset and time only the missing shapes")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _fleet_flags(p)
    p.set_defaults(func=cmd_bench)
