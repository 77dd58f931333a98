#!/usr/bin/env bash
# One device call (issue 52; the review of the Q pass): the e4m3 forms' Q fragments loaded at L2 (ld.global.cg,
# q8-loads-cg.patch) instead of through the non-coherent path (ld.global.nc), whose contract (data read-only for the
# kernel's life) the Q pass, a PDL primary still writing q8 when the split kernel starts, does not meet; the values
# are the same, so the outputs must be main's bit for bit (digests over the fp8 GPU grid, both forms, normal library),
# then the fp8 pools' 23 capture sizes x 100 replays with the patch, then main and the patch in alternation: a short
# call's marginal cost in a graph (timing library, both forms at L = 128 and 4k, under the driver's carveout and under
# KDT_CARVEOUT=100, where main's 64-row form lost ~5 us before the Q pass) and the fp8 headline shapes (~9 minutes).
#   bash docs/experiments/q8-loads-cg-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/q8-loads-cg-run.sh $*"
P=docs/experiments/q8-loads-cg.patch; R=$KDT_PACK_DIR
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
ident() {  # NAME: digests of both e4m3 forms over the fp8 grid
  for impl in cuda_sm120_e4m3 cuda_sm120_e4m3_32; do
    timeout 120 python3 -m kdtree_lab.checks.output_identity --impl $impl --kv fp8 --cases 40 \
      --out "$R/digest-$1-$impl.json" 2>&1 | tail -1
  done
}
ident main
git apply $P || exit 1
python3 -m kdtree_lab build --json > "$R/build-cg.json"; echo "patched build rc=$?"
ident cg
for impl in cuda_sm120_e4m3 cuda_sm120_e4m3_32; do
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-$impl.json" "$R/digest-cg-$impl.json" \
    | tail -1 || { echo "outputs differ (or a digest is missing): no timing"; pack; kernels_restore; exit 1; }
done
GATE_TIMEOUT=150 gate_tests "$R/graphs-cg" tests/test_gpu_graphs.py -k "fp8_pool_all_23 and e4m3"
pack
timed() {  # NAME: the short calls under both carveouts, then the fp8 headline shapes (timing library)
  echo "== $1"
  for cv in driver 100; do
    local env_cv=(-u KDT_CARVEOUT); [ $cv = 100 ] && env_cv=(KDT_CARVEOUT=100)
    env "${env_cv[@]}" KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 \
      --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 \
      --out "$R/fixed-$1-$cv.json" 2>&1 | grep -E "^auto" | cut -c1-120 | sed "s/^/$cv /"
  done
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/bench64-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
kernels_restore; timed main-1
git apply $P || exit 1; timed cg-1
kernels_restore
