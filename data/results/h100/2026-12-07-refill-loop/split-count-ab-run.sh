#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): does the one-term patch's gain follow the batch or the split count?
# On 2026-12-07 (H100) the patch (16 fewer QK MMAs a tile) took B = 8 (nsplit 8: 128 prefix CTAs of 782 tiles)
# -6.7% and the headline (B = 1, nsplit 65: 130 CTAs of 97 tiles) -0.5%; ncu under a locked clock agreed (-5.9%,
# +1.1%), so the clock is not why; the phase library showed the CTAs end within 1.5-3.8% of each other, so a few
# slow CTAs are not why either. Here the timing libraries of main (A) and the patch (B), interleaved
# (kdtree_lab.checks.ab_interleave --nsplit), at B = 1 with nsplit 8, 16, 32 and 65 (16 to 130 prefix CTAs, 782 to
# 97 tiles each) and at B = 8 with nsplit 8, 16 and 65 (128 CTAs of 782 tiles to 1,040 CTAs of 97 in 8 waves).
# Predicted (written 2026-12-07 before the run): the gain follows the tiles a CTA walks, not the batch: B = 1 at
# nsplit 8 -5 to -7% (its CTAs walk what B = 8's do), nsplit 16 -4 to -6%, 32 -2 to -4%, 65 -0 to -1%; B = 8 at
# nsplit 16 -4 to -6% and at 65 -0 to -2%. If instead B = 1 gains nothing at any split count and B = 8 gains at every
# one, the cause is in one request's data or addresses (every CTA of the headline reads one request's pages and
# shares one Q), not in the split.
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-one-term-steps.patch).
# Results in $OUT/results.tar.gz. ~4 minutes.
#   bash docs/experiments/split-count-ab-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/split-count-ab-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-one-term-steps.patch
kernels_snapshot
step "libraries, main"; build_libs main "$R"
git apply $P || exit 1
step "libraries, patch"; build_libs patch "$R"
kernels_restore
ab() {  # NSPLIT SHAPE...
  local ns=$1; shift
  timeout 100 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
    --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 $(printf -- "--shape %s " "$@") --nsplit "$ns" \
    --rounds 8 --out "$R/ab-nsplit-$ns.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
  pack
}
step "interleaved A/B by split count"
ab 65 1,200000,16,8,fp8 8,200000,16,8,fp8
ab 8 1,200000,16,8,fp8 8,200000,16,8,fp8
ab 16 1,200000,16,8,fp8 8,200000,16,8,fp8
ab 32 1,200000,16,8,fp8
ab 0 1,200000,16,8,fp8 8,200000,16,8,fp8
