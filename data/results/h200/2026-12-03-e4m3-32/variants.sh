#!/usr/bin/env bash
# Call 1's variant timings (the timing library, KDT_E4M3_TIMING=1): each patch of this folder applied to the tree in
# turn, the library rebuilt, the shapes below timed (CUDA-graph replay medians), then the patch reverted.
# Usage (device, repo root, after the call's own steps): bash data/results/h200/2026-12-03-e4m3-32/variants.sh DIR
set -uo pipefail
DIR=$1; HERE=data/results/h200/2026-12-03-e4m3-32
shapes() {  # impl, patch name
  KDT_E4M3_TIMING=1 timeout 150 python3 - "$1" "$2" "$DIR/variant-$2.json" <<'PY'
import json, sys
from kdtree_lab.checks.bench import run_grid
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings
impl, name, out = sys.argv[1:]
shapes = [Shape(1, 200_000, 4, 8, kv="fp8"), Shape(8, 200_000, 4, 8, kv="fp8"), Shape(1, 32_768, 4, 8, kv="fp8"),
          Shape(1, 200_000, 16, 8, kv="fp8"), Shape(8, 200_000, 16, 8, kv="fp8")]
res = run_grid(shapes, [impl], measure_ceilings(), progress=False)
json.dump(res, open(out, "w"), indent=1)
for r in res["rows"]:
    print(f"{name:10s} {r['impl']:20s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} {r['ms']:.4f} ms", flush=True)
PY
}
for v in slots5 chains2; do
  git apply $HERE/variant-$v.patch && shapes cuda_sm120_e4m3_32 $v; git apply -R $HERE/variant-$v.patch
done
git apply $HERE/../2026-12-02-e4m3-early-refill/next-softmax-ffma.patch && shapes cuda_sm120_e4m3 ffma64
git apply -R $HERE/../2026-12-02-e4m3-early-refill/next-softmax-ffma.patch
