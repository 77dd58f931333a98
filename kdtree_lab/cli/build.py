"""``kdtree-lab build``: the nvcc build of the kernel library and its checks."""

from __future__ import annotations

import argparse

from ..core.display import aligned_table
from ..lab.record import emit
from .args import FAILED, OK, AnswerNo, BadArgument, Refusal


def cmd_build(args: argparse.Namespace) -> int:
    from ..kernels.build import BuildError, CheckError, arch_problem, build_library, check_library

    from ..core.cuda_tools import find_nvcc

    archs = tuple(a.strip() for a in args.arch.split(","))
    problem = arch_problem(archs if all(archs) else ("",))
    if problem:
        raise BadArgument(problem.replace("archs:", "argument --arch:", 1))
    if not find_nvcc():
        raise AnswerNo("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    try:
        result = build_library(archs, force=args.force, progress=not args.json)
        report = check_library(result.library, archs)
    except (BuildError, CheckError) as exc:
        raise Refusal(str(exc)) from None
    lines = [f"library  {result.library} ({'cached' if result.cached else f'built in {result.seconds:.1f} s'})",
             f"nvcc     {result.nvcc_version}", "symbols  " + ", ".join(
                 f"{s}{'' if ok else ' MISSING'}" for s, ok in report.symbols.items()),
             "cubins   " + ", ".join(f"{a}: {n}" for a, n in report.cubins.items()), "",
             "kernel resources per arch (registers per thread; bytes of static shared, local and stack memory; "
             "tensor-core MMA instructions in the SASS):",
             aligned_table([{"arch": r.arch, "kernel": r.kernel, "registers": r.registers,
                             "static smem": r.static_smem, "local": r.local_bytes, "stack": r.stack, "HMMA": r.hmma}
                            for r in report.resources]), "",
             "kernel configurations (dynamic shared memory in bytes; automatic: the launcher's priority, 0 = forced "
             "only):",
             aligned_table([{"kernel": c["kernel"], "rows per CTA": c["block_m"], "stages": c["stages"],
                             "threads": c["threads"], "dynamic smem": c["dynamic_smem"],
                             "pools": "/".join(c.get("kv_dtypes", [])), "automatic": c.get("auto_priority", "-"),
                             **{f"fits {a}": "yes" if ok else "no" for a, ok in (c.get("fits") or {}).items()}}
                            for c in report.configs]), ""]
    lines.append("checks: " + ("PASS" if report.ok else "FAIL\n  " + "\n  ".join(report.problems)))
    emit(args, {"build": result, "check": report, "ok": report.ok}, "\n".join(lines))
    return OK if report.ok else FAILED


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("build", help="build the CUDA kernel library and check symbols, SASS and resources")
    from ..kernels.build import DEFAULT_ARCHS, SUPPORTED_ARCHS

    p.add_argument("--arch", default=",".join(DEFAULT_ARCHS),
                   help=f"comma-separated archs, each one of {', '.join(SUPPORTED_ARCHS)}")
    p.add_argument("--force", action="store_true", help="rebuild even if a cached library exists")
    p.add_argument("--json", action="store_true", help="print the build and check report as JSON")
    p.set_defaults(func=cmd_build)
