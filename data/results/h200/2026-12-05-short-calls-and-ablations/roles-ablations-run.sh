#!/usr/bin/env bash
# One device call (issue 52, the bf16 headline): what bounds the role split over bf16 pools (cuda_sm120_roles, the
# 128-row bf16 kernel), by ablation as the e4m3 forms were measured (data/results/h200/2026-12-04-e4m3-32-bound/).
# roles-ablations.patch adds four switches to CfgRoles, all off (main's SASS unchanged): A the QK MMAs of the odd k16
# steps (32 of 72 per tile), S the partner swap, C the refill loads after the first four tiles, B the PV MMAs. Each
# setting is one build (the build cache is keyed by the sources), timed at the bf16 headline (B = 1, L = 200k,
# N = 16, H = 8) and at B = 8; main first and last (the spread of unchanged code in the call). Results are wrong by
# design: only the times count. AS alone is not run: it spills 24 bytes on sm_90a, the code the H200 runs (ASC does
# not). ~6 minutes. Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each setting).
#   bash docs/experiments/roles-ablations-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/roles-ablations-run.sh"
R=$KDT_PACK_DIR; F=kernels/mma_sync/verify_sm120_roles.cuh
mkdir -p $R; mv "$OUT"/*.json $R/
git apply docs/experiments/roles-ablations.patch || exit 1
kernels_snapshot
ablate() {  # LETTERS (a subset of ASCB, or "main"): switch those ablations on, the rest off; stops where a switch is missing
  kernels_restore
  local x v
  for x in A S C B; do
    v=false; [[ $1 == *$x* ]] && v=true
    sed -i "s/ABL_$x = [a-z]*/ABL_$x = $v/" $F
    grep -q "ABL_$x = $v" $F || { echo "ablate $1: no ABL_$x in $F"; exit 1; }
  done
}
time_roles() {  # NAME
  echo "== $1"
  timeout 90 python3 -m kdtree_lab bench --out "$R/roles-$1.json" --impl cuda_sm120_roles \
    --shape 1,200000,16,8,bf16 --shape 8,200000,16,8,bf16 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}
for s in main A S C B AC ASC; do ablate $s; time_roles $s; done
ablate main; time_roles main-again
kernels_restore
