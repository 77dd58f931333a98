#!/usr/bin/env bash
# Device call (issue 52, 32 rows over fp8): the 32-row e4m3 form's refill owned by warp alone
# (e4m3-32-refill-owned.patch): bits against main, then main (A) against it (B) interleaved at four shapes. The same
# measurement runs inside e4m3-refill-owned-run.sh beside the 64-row form's; its prediction and rule are there.
#   bash docs/experiments/e4m3-32-refill-owned-run.sh   # ~2 minutes; carry .whl-min (WHEELS=.whl-min) and .prebuilt
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-refill-owned-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-32-refill-owned.patch
kernels_snapshot
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3_32:fp8 || exit 1
step "interleaved A/B: the 32-row e4m3 form, main (A) and its owned refill (B), timing libraries"
kernels_restore
timeout 170 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3_32 --shape 1,200000,4,8,fp8 \
  --shape 8,200000,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 8,32768,4,8,fp8 --rounds 8 \
  --out "$R/ab-interleave-main-patch.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
pack
