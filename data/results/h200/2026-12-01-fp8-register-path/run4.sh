#!/usr/bin/env bash
# One device call (issue 18, fixed cost): the combine reading only the prefix splits a call used, against main.
# scripts/fixed_cost.py on main (B = 1, H = 8, N = 4 and 16, L = 128 .. 200k, split counts 1 .. 131 and the
# automatic one, v4 and the sm_120 kernel), then the patch applied, rebuilt, smoked (edge grid + 40 random cases
# per configuration and pool) and the same sweep again. Results packed to $OUT/results.tar.gz.
# Carry .whl with data/results moved out of the tree (64 MiB), or a smaller wheel folder as WHEELS=.
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/combine-used-splits-run.sh"
mkdir -p "$OUT/r"; mv "$OUT"/*.json "$OUT/r/" 2>/dev/null
timeout 170 python3 scripts/fixed_cost.py --out "$OUT/r/fixed-cost-main.json" 2>&1 | grep floor
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
git apply docs/experiments/combine-used-splits.patch && python3 -m kdtree_lab build --json > "$OUT/r/build-patch.json"
echo "patched build rc=$?"
timeout 100 python3 scripts/kernel_profile.py --configs 0,1,2,3 --smoke 40 --shapes mem --nsplit 131 \
  --out "$OUT/r/smoke-patch-bf16.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout 60 python3 scripts/kernel_profile.py --configs 1,3 --smoke 40 --kv-dtype fp8 --shapes mem --nsplit 131 \
  --out "$OUT/r/smoke-patch-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout 170 python3 scripts/fixed_cost.py --out "$OUT/r/fixed-cost-patch.json" 2>&1 | grep floor
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
