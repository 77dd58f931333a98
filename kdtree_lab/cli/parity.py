"""``kdtree-lab parity``: a kernel against the fp64 oracle on the edge grid and random draws."""

from __future__ import annotations

import argparse

from ..kernels.impls import IMPLS, kv_refusal
from ..lab.record import emit
from .args import FAILED, OK, AnswerNo, BadArgument, as_flags, bounded_int, check_fleet_flags, fleet_flags, \
    fleet_labels, fleet_report, positive_int, positive_ints, seed


def cmd_parity(args: argparse.Namespace) -> int:
    """Exit 0 when every case is within tolerance, 1 when one is not, 2 for a bad argument, 3 when this machine
    cannot run the implementation (no GPU, no Triton interpreter)."""
    import torch

    from ..checks.parity import fp8_cases, grid, require_grid_fits, run_parity
    from ..core.env import SizeError

    check_fleet_flags(args)
    if args.fp8_math != "auto" and args.kv_dtype != "fp8":
        raise BadArgument(f"argument --fp8-math: applies with --kv-dtype fp8 only (how an fp8 pool's e4m3 is read), "
                          f"found --fp8-math {args.fp8_math} with a {args.kv_dtype} pool")
    refusal = kv_refusal(args.impl, args.kv_dtype)
    if refusal:
        raise BadArgument(f"argument --kv-dtype {args.kv_dtype}: {refusal}")
    heads = tuple(args.heads)
    cases = grid(args.cases, args.seed, max_prefix=args.max_prefix, max_batch=args.max_batch,
                 max_draft=args.max_draft, heads=heads, budget_tokens=args.budget_tokens, edge=not args.no_edge)
    if not cases:
        raise BadArgument("arguments --cases and --no-edge: expected at least one case, found --cases 0 with "
                          "--no-edge (no edge grid, no random draw)")
    if args.kv_dtype == "fp8":
        cases = fp8_cases(cases)
    if args.gpus:
        return _fleet_parity(args, cases)
    problem = _device_problem(args, torch.cuda.is_available())
    if problem:
        raise AnswerNo(problem)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        require_grid_fits(cases, device)
    except SizeError as exc:
        raise BadArgument(as_flags(str(exc), ["max_prefix", "max_batch", "max_draft", "heads"])) from None
    report = run_parity(args.impl, cases, device, progress=not args.json, fp8_math=args.fp8_math)
    summary = report.summary()
    text = (f"{args.impl} on {device}: {summary['passed']}/{summary['cases']} cases within tolerance; "
            f"max rel_l2 {summary['max_rel_l2']:.3g}, max abs {summary['max_abs']:.3g}")
    if summary["failed"]:
        text += f"\nFAILED: {summary['failed']}"
    emit(args, {"summary": summary, "cases": [r.row() for r in report.results]}, text)
    return OK if report.ok else FAILED


def _device_problem(args: argparse.Namespace, has_gpu: bool) -> str | None:
    """The one line refusing --device / --impl on this machine, with what to run instead; None when they can run."""
    import os

    from ..core.env import no_gpu_here

    cpu_run = "on a CPU run TRITON_INTERPRET=1 kdtree-lab parity --impl triton"
    if args.device == "cuda" and not has_gpu:
        return f"--device cuda: expected a CUDA GPU, found {no_gpu_here()}; {cpu_run}"
    device = args.device or ("cuda" if has_gpu else "cpu")
    if IMPLS[args.impl].family == "cuda" and device == "cpu":
        where = "--device cpu" if args.device else no_gpu_here()
        return f"--impl {args.impl}: expected a CUDA GPU, found {where}; {cpu_run}"
    if args.impl == "triton" and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        found = os.environ.get("TRITON_INTERPRET")
        return (f"--impl triton on a CPU: expected TRITON_INTERPRET=1 in the environment (Triton's interpreter), "
                f"found {'it unset' if found is None else repr(found)}; run TRITON_INTERPRET=1 kdtree-lab parity ...")
    return None


def _fleet_parity(args: argparse.Namespace, cases) -> int:
    from ..lab import fleet

    labels = fleet_labels(args)
    rep = fleet.parity(args.impl, cases, labels, args.scheduler)
    passed = sum(r["ok"] for r in rep.rows)
    text = f"{args.impl} on {len(labels)} workers ({','.join(labels)}): {passed}/{len(rep.rows)} cases within tolerance"
    return fleet_report(args, "parity", rep, {"impl": args.impl, "cases": len(cases)}, text)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("parity", help="compare a kernel with the fp64 oracle on edge cases and random draws")
    p.add_argument("--impl", choices=list(IMPLS), default="cuda", metavar="IMPL",
                   help="the implementation (default: cuda), one of:\n"
                        + "\n".join(f"{i.name}: {i.summary}" for i in IMPLS.values()))
    p.add_argument("--cases", type=bounded_int(0, 100_000), default=50, help="random cases after the edge grid")
    p.add_argument("--no-edge", action="store_true", help="skip the edge grid")
    p.add_argument("--max-prefix", type=bounded_int(1, 1 << 22), default=4096, help="longest prefix drawn (tokens)")
    p.add_argument("--max-batch", type=bounded_int(1, 4096), default=48, help="largest batch in the edge grid")
    p.add_argument("--max-draft", type=bounded_int(1, 1024), default=16, help="largest N drawn")
    p.add_argument("--heads", type=positive_ints, default=[8, 16], help="comma-separated H values")
    p.add_argument("--budget-tokens", type=positive_int, default=None, help="cap on sum(L)*N*H per random case (default: no cap)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="cpu or cuda (default: cuda when present)")
    p.add_argument("--seed", type=seed, default=0, help="random seed of the generated batches")
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16",
                   help="KV pool: bf16, or fp8 (SGLang's fp8_e4m3, with k_scale / v_scale other than 1)")
    p.add_argument("--fp8-math", choices=["auto", "exact", "e4m3"], default="auto",
                   help="with --kv-dtype fp8 only: exact (e4m3 -> bf16/f16), e4m3 (e4m3 tensor cores, its own tolerance) or "
                        "auto, what VerifyAttention takes (e4m3 above 32 rows on sm_120, exact elsewhere)")
    p.add_argument("--json", action="store_true", help="print the summary and every case as JSON")
    fleet_flags(p)
    p.set_defaults(func=cmd_parity)
