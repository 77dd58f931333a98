#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the combine's LSE reads in flight together (combine-lse-once.patch:
# each lane loads the LSEs of splits lane + 32 i, i < 5, at once and keeps them for the weight sum, where the loop
# over s = lane, lane + 32, ... left a short split count's two to five loads one after another). The values and
# their order are the loop's, so the outputs must be main's bit for bit: digests of four configurations over the
# GPU grid (bf16 and fp8 pools, normal library), then main, the patch and main again: a short call's marginal cost in
# a graph (timing library: both e4m3 forms over fp8 and the bf16 picks at N = 4 and 16, L = 128 and 4k), the fp8
# headline and B = 8 and the bf16 headline (no slower than 1%). Every library is built before the step that times
# it. ~8-9 minutes.
#   bash docs/experiments/combine-lse-once-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/combine-lse-once-run.sh $*"
P=docs/experiments/combine-lse-once.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
IDENT=("cuda_sm120 bf16" "cuda_sm120_roles bf16" "cuda_sm120_e4m3 fp8" "cuda_sm120_e4m3_32 fp8")
ident() {  # NAME: digests of each configuration over its pool's grid (edge grid + 20 random)
  for pair in "${IDENT[@]}"; do
    set -- "$1" $pair
    timeout 100 python3 -m kdtree_lab.checks.output_identity --impl $2 --kv $3 --cases 20 \
      --out "$R/digest-$1-$2.json" 2>&1 | tail -1
  done
}
libs() {  # NAME: the normal and the timing library of the tree as it is now (cached by source digest)
  python3 -m kdtree_lab build --json > "$R/build-$1.json"; echo "$1 build rc=$?"
  KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-timing-$1.json"; echo "$1 timing build rc=$?"
}
step "libraries, main"; libs main
step "digests, main"; ident main
git apply $P || exit 1
step "libraries, patch"; libs patch
step "digests, patch"; ident patch
for pair in "${IDENT[@]}"; do
  set -- $pair
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-$1.json" "$R/digest-patch-$1.json" \
    | tail -1 || { echo "outputs differ (or a digest is missing): no timing"; pack; kernels_restore; exit 1; }
done
pack
timed() {  # NAME: the short calls, then the long shapes (timing library, built above)
  step "timing $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --out "$R/fixed-fp8-$1.json" 2>&1 | grep -E "^auto" \
    | cut -c1-120
  KDT_E4M3_TIMING=1 timeout 80 python3 scripts/fixed_cost.py --impls cuda_sm120,cuda_sm120_roles --drafts 4,16 \
    --lengths 128,4096 --nsplit 8 --repeat 10 --out "$R/fixed-bf16-$1.json" 2>&1 | grep -E "^auto" | cut -c1-120
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/bench-fp8-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/bench-bf16-$1.json" --impl cuda_sm120_roles \
    --shape 1,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
kernels_restore; timed main-1
git apply $P || exit 1; timed patch-1
kernels_restore; timed main-2
