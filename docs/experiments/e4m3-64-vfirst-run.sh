#!/usr/bin/env bash
# One device call (issue 52): the 64-row e4m3 form's V_FIRST (the PV warps take tile t's V and refill its slot
# before they wait for P(t)) against main, three times each in alternation, at the 64-row form's shapes (timing
# library). Both libraries are built once: the build cache is keyed by the sources. The patch is the twenty-first
# session's, as measured: data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first.patch at "4 0 1" (the 32-row form as
# main: 4 slots, no V_FIRST). Its gates, where all three alternations agree in sign at the headline:
#   bash data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first-run.sh gates 4 0 1
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step). ~4 minutes.
#   bash docs/experiments/e4m3-64-vfirst-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-64-vfirst-run.sh"
D=data/results/h200/2026-12-04-e4m3-32-bound; K=kernels/mma_sync; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
kernels_snapshot
vfirst() {
  git apply $D/pv-v-first.patch || return 1
  sed -i "s/static constexpr int SLOTS = [0-9], DRAFT_PAIRS = 1;/static constexpr int SLOTS = 4, DRAFT_PAIRS = 1;/" \
    $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr bool V_FIRST = [a-z]*;/static constexpr bool V_FIRST = false;/" $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr bool V_FIRST = [a-z]*;/static constexpr bool V_FIRST = true;/" $K/verify_sm120_e4m3.cuh
}
time64() {  # NAME: the 64-row form at its shapes (timing library)
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/vfirst64-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 --shape 1,32768,16,8,fp8 2>&1 | grep -E "^cuda" | cut -c1-80
  pack
}
for i in 1 2 3; do
  kernels_restore; time64 main-$i
  vfirst || exit 1; time64 vfirst-$i
done
kernels_restore
