"""``kdtree-lab build``: the nvcc build of the kernel library and its checks."""

from __future__ import annotations

import argparse
import sys

from ..core.display import aligned_table
from ..lab.record import emit


def cmd_build(args: argparse.Namespace) -> int:
    from ..kernels.build import BuildError, CheckError, build_library, check_library

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
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("build", help="build the CUDA kernel library and check symbols, SASS and resources")
    p.add_argument("--arch", default="sm_120a,sm_90a", help="comma-separated archs (default sm_120a,sm_90a)")
    p.add_argument("--force", action="store_true", help="rebuild even if a cached library exists")
    p.add_argument("--json", action="store_true", help="print the build and check report as JSON")
    p.set_defaults(func=cmd_build)
