#!/usr/bin/env bash
# One device call (issue 52, 32 rows over fp8 <= 0.6x the bf16 pick): two ablations of the 32-row e4m3 form, outputs
# wrong by design, that size what its refill costs since the 64-key steps (written 2026-12-07, fiftieth session,
# after that day's profile, data/results/h100/2026-12-07-previous-p-and-ncu-32/: the QK warps wait for the next
# step's tile 23-27% of their loop's samples, the PV warps for P 16-20% and issue the refill 8-12%).
#   e4m3-32-no-refill-ablation.patch     no refill after the ring's first fill: no DRAM traffic, no copies issued, no
#                                        FULL waits past the first four tiles (the MMA and hand-off path alone)
#   e4m3-32-no-full-wait-ablation.patch  the refill issued as on main, but no warp waits for a refilled tile: the
#                                        copies' issue and traffic present, their latency not waited for
# Prediction (before the run): no-refill -15 to -25% at the two 200k shapes and B = 8, 32k, -5 to -15% at B = 1, 32k
# (its fixed cost); no-full-wait within 5 points of no-refill at the 200k shapes (the refill's lead, not its issue or
# its bytes, is what the steps wait for). A measurement: nothing lands; the reading goes to docs/performance.md ("What
# bounds the 32-row e4m3 configuration"). Builds only the timing libraries (prebuilt: python scripts/prebuild.py main
# docs/experiments/e4m3-32-no-refill-ablation.patch docs/experiments/e4m3-32-no-full-wait-ablation.patch --variants
# timing --out .prebuilt-abl). Carry .whl-kernel and .prebuilt-abl (~2 minutes warm). Results in
# $OUT/results.tar.gz.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-no-refill-ablation-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-kernel}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-no-refill-ablation-run.sh"
R=$KDT_PACK_DIR
kernels_snapshot
step "timing library, main"
KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-timing-main.json"; echo "main timing build rc=$?"
for a in no-refill no-full-wait; do
  git apply "docs/experiments/e4m3-32-$a-ablation.patch" || exit 1
  step "timing library, $a"
  KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-timing-$a.json"; echo "$a timing build rc=$?"
  kernels_restore
done
for a in no-refill no-full-wait; do
  timing_ab "the 32-row e4m3 form, ablation $a (outputs differ by design)" cuda_sm120_e4m3_32 main "$a" "$R" \
    1,200000,4,8,fp8 8,200000,4,8,fp8 1,32768,4,8,fp8 8,32768,4,8,fp8
done
pack
