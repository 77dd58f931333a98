"""The kv_indices prefetch distance (IndexQueue's PREFETCH) of both e4m3 forms against time (timing library,
graph-replay medians): the 32-row form on 32-row shapes, the 64-row form on 128-row ones (issue 52).

    KDT_E4M3_TIMING=1 python3 prefetch.py OUT.json NAME
"""
import json
import sys

from kdtree_lab.checks.bench import run_grid
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings

out, name = sys.argv[1], sys.argv[2]
ceilings = measure_ceilings()
rows32 = [Shape(b, length, 4, 8, kv="fp8") for b in (1, 8) for length in (32_768, 200_000)]
rows128 = [Shape(1, 200_000, 16, 8, kv="fp8"), Shape(8, 200_000, 16, 8, kv="fp8"), Shape(1, 32_768, 16, 8, kv="fp8")]
a = run_grid(rows32, ["cuda_sm120_e4m3_32"], ceilings, progress=False)
b = run_grid(rows128, ["cuda_sm120_e4m3"], ceilings, progress=False)
result = {**a, "rows": a["rows"] + b["rows"], "variant": name}
for r in result["rows"]:
    print(f"{name:8s} {r['impl']:20s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} {r['ms']:.4f} ms", flush=True)
json.dump(result, open(out, "w"), indent=1)
