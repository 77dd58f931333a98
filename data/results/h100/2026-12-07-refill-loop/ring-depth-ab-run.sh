#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): is the headline's tile bound by the ring's refill loop? The 64-row
# e4m3 form refills a ring slot with tile t + 3 when its PV warps start tile t (once they hold V(t)); the QK warps,
# which may run two P buffers ahead, need that tile in their iteration t + 2. When they run ahead, each 3 tiles then
# take about one refill latency + one QK iteration + one PV tile, not 3 QK iterations. On 2026-12-07 (H100) the
# one-term patch (16 fewer QK MMAs a tile) gained nothing at B = 1 with nsplit 32 or 65 (196 or 97 tiles a CTA) and
# ~6.7% at nsplit 8 (782 tiles), B = 1 or 8 (split-count-ab-run.sh); the row-half CTA pairs of a split stayed in step
# where it gained nothing and drifted apart where it gained (cta-spread-run.sh, phase library).
# e4m3-ring4.patch (a diagnostic: 4 slots, 115,808 B of shared memory, past sm_120's 101,376; the H100 has 227 KB)
# gives the refill one more tile of lead. Interleaved A/B (timing libraries): main (A) against ring4 (B), then ring4
# (A) against ring4 + the one-term patch (B). ring4 changes no arithmetic: its outputs must be bit-identical to main's.
# Predicted (written 2026-12-07 before the run): ring4 takes the headline -6 to -12%, 1 x 32k -3 to -8%, B = 8 and
# B = 1 at nsplit 8 -0 to -3%, outputs identical; over ring4 the one-term patch then takes the headline -4 to -7%
# (over the 3-slot ring: -0.5%) and B = 8 -6 to -7%. If ring4 gains nothing at the headline, the refill loop is not
# its bound.
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-ring4.patch
# docs/experiments/e4m3-ring4.patch+docs/experiments/e4m3-one-term-steps.patch). Results in $OUT/results.tar.gz.
# ~4 minutes.
#   bash docs/experiments/ring-depth-ab-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/ring-depth-ab-run.sh"
R=$KDT_PACK_DIR; P4=docs/experiments/e4m3-ring4.patch; P1=docs/experiments/e4m3-one-term-steps.patch
kernels_snapshot
step "libraries, main"; build_libs main "$R"
git apply $P4 || exit 1
step "libraries, ring4"; build_libs ring4 "$R"
git apply $P1 || exit 1
step "libraries, ring4 + one-term"; build_libs ring4-oneterm "$R"
kernels_restore
ab() {  # A B NSPLIT SHAPE...
  local a=$1 b=$2 ns=$3; shift 3
  timeout 120 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-$a.json" \
    --lib-b "$R/build-timing-$b.json" --impl cuda_sm120_e4m3 $(printf -- "--shape %s " "$@") --nsplit "$ns" \
    --rounds 8 --out "$R/ab-$a-vs-$b-ns$ns.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
  pack
}
step "main (A) against ring4 (B)"
ab main ring4 0 1,200000,16,8,fp8 1,32768,16,8,fp8 8,200000,16,8,fp8
ab main ring4 8 1,200000,16,8,fp8
step "ring4 (A) against ring4 + one-term (B)"
ab ring4 ring4-oneterm 0 1,200000,16,8,fp8 8,200000,16,8,fp8 1,32768,16,8,fp8
