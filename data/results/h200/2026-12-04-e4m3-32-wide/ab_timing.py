"""A/B timing of the 32-row e4m3 configuration (graph-replay medians, timing library): the 32-row fp8 shapes of the
issue-fp8 grid and three 128-row ones, the bf16 pick at 32 rows (cuda_sm120) beside it, ceilings in the same run.

    KDT_E4M3_TIMING=1 python3 data/results/h200/2026-12-04-e4m3-32-wide/ab_timing.py OUT.json
"""
import json
import sys

from kdtree_lab.checks.bench import run_grid
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings
from kdtree_lab.lab.provenance import provenance

ROWS32 = [(b, length, 4, 8) for b in (1, 8) for length in (4096, 32_768, 200_000)]
ROWS128 = [(1, 32_768, 16, 8), (1, 200_000, 16, 8), (8, 200_000, 16, 8)]

ceilings = measure_ceilings()
fp8 = run_grid([Shape(*s, kv="fp8") for s in ROWS32 + ROWS128], ["cuda_sm120_e4m3_32"], ceilings, progress=False)
bf16 = run_grid([Shape(*s) for s in ROWS32], ["cuda_sm120"], ceilings, progress=False)
out = {"provenance": provenance("python3 " + " ".join(sys.argv)), **fp8, "rows": fp8["rows"] + bf16["rows"]}
open(sys.argv[1], "w").write(json.dumps(out, indent=1) + "\n")
for r in out["rows"]:
    print(f"{r['impl']:20s} {r.get('kv', 'bf16'):4s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} {r['ms']:.4f} ms nsplit={r['nsplit']}")
