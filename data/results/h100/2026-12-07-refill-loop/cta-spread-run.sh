#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): which CTAs end the headline call, and whether the one-term patch's
# shorter QK tile reaches them. On 2026-12-07 (e4m3-one-term-ncu-run.sh, H100) the patch took B = 8 -6.7% (ncu,
# locked clock: -5.9% cycles) and the headline -0.5% (ncu: +1.1% elapsed cycles, -2.1% SM-active cycles); nvidia-smi
# read 1,890-1,980 MHz through the whole A/B, so the clock is not why. SM-active falling while elapsed rises says the
# headline ends on its slowest CTAs (130 prefix CTAs of ~97 tiles on 132 SMs, one each), not its average one.
# Steps: the phase library (KDT_PHASE_CLOCKS=1) of main, of the patch, of main again; each at the headline
# (1,200000,16,8), B = 2 and B = 8, 7 graph replays read per shape; kdtree_lab.checks.phase_clocks keeps each prefix
# CTA's row (SM, tiles, its end, its time a tile) and `spread` (tile-time percentiles, the last CTA's end over the
# median one's, whether the same SMs are slow every replay).
# Predicted (written 2026-12-07 before the run): at the headline main's last CTA ends 3-6% after the median one (an
# earlier run: PV done median 125.6 us, max 131.3); the patch cuts the median CTA's time a tile 1-3% at the headline
# and 5-7% at B = 8, and at the headline the last CTA's end moves less than the median's; the slow CTAs are the same
# SMs replay after replay (same_sm_r > 0.5: a place, e.g. far from the L2 slices its KV lands in), not chance.
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-one-term-steps.patch
# --variants normal,timing,phase). Results in $OUT/results.tar.gz. ~3 minutes.
#   bash docs/experiments/cta-spread-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/cta-spread-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-one-term-steps.patch
kernels_snapshot
spread_of() {  # TAG: the phase library of the tree as it is now, its CTAs at three shapes
  step "phase clocks, $1"
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-phase-$1.json"
  echo "phase build rc=$?"
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 timeout 150 python3 -m kdtree_lab.checks.phase_clocks --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8 --shape 2,200000,16,8 --shape 8,200000,16,8 --repeats 7 --out "$R/cta-spread-$1.json" \
    2>&1 | grep -E "^==|^prefix CTAs|^loop|^done|split kernel" | cut -c1-400
  pack
}
spread_of main
git apply $P || exit 1
spread_of patch
kernels_restore
spread_of main-2
