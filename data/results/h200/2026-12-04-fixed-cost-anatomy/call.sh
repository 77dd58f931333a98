#!/usr/bin/env bash
# One device call (issue 52): where a short call's fixed cost goes, and the 64-row e4m3 form's V_FIRST against main
# in alternation.
#   1. scripts/fixed_cost.py --anatomy on main (timing library): B = 1, L = 128 and 4k, N = 4 and 16, H = 8, fp8,
#      both e4m3 forms; each automatic-split row also as the marginal cost of one call among ten in a graph and, from
#      the profiler's record of that graph's replays, each kernel's duration and the gaps between them.
#   2. ../2026-12-04-e4m3-32-bound/pv-v-first.patch at "4 0 1" (the 64-row form's V_FIRST only) against main, three
#      times each in alternation (both libraries built once: the build cache is keyed by the sources), at the 64-row
#      form's shapes.
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step; the device returns at most 8 files).
#   bash data/results/h200/2026-12-04-fixed-cost-anatomy/call.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-fixed-cost-anatomy/call.sh"
D=data/results/h200/2026-12-04-e4m3-32-bound; K=kernels/mma_sync; R=/tmp/r
mkdir -p $R; mv "$OUT"/*.json $R/
pack() { tar -C $R -czf "$OUT/results.tar.gz" .; }
cp -r kernels /tmp/kernels0
restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }
KDT_E4M3_TIMING=1 timeout 200 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
  --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --anatomy --out $R/fixed-cost-anatomy.json 2>&1 \
  | grep -E "floor|rror" | cut -c1-160
pack
vfirst() {
  git apply $D/pv-v-first.patch || return 1  # "4 0 1": the 32-row form as main (4 slots, no V_FIRST)
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
  restore; time64 main-$i
  vfirst || exit 1; time64 vfirst-$i
done
restore
