#!/usr/bin/env bash
# One device call (issue 52): e4m3-ring4-q11.patch with its prefix warps at 168 registers each (docs/experiments/,
# "final") against the text measured in call 8 (e4m3-ring4-q11-measured.patch, QK 184 / PV 160): the same arithmetic,
# so the bits must be identical; the time within call 8's spread. Then main against the final patch.
# Predicted (written 2026-12-07 before the run): bits identical at every shape; final against measured within +-1%;
# main against final as call 8 (headline -8 to -10%, B = 8 -10 to -12%).
# Carry .whl-sglang and .prebuilt (main's and both patches' normal and timing libraries). Results in
# $OUT/results.tar.gz. ~3 minutes.
#   bash data/results/h100/2026-12-07-refill-loop/q11-register-split-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash data/results/h100/2026-12-07-refill-loop/q11-register-split-run.sh"
R=$KDT_PACK_DIR; D=data/results/h100/2026-12-07-refill-loop
kernels_snapshot
step "libraries, main"; build_libs main "$R"
git apply $D/e4m3-ring4-q11-measured.patch || exit 1
step "libraries, measured"; build_libs measured "$R"; kernels_restore
git apply docs/experiments/e4m3-ring4-q11.patch || exit 1
step "libraries, final"; build_libs final "$R"
step "smoke, final"
timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3 --smoke 40 --kv-dtype fp8 --shapes mem \
  --nsplit 131 --out "$R/smoke-final-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
kernels_restore
ab() {  # A B SHAPE...
  local a=$1 b=$2; shift 2
  timeout 120 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-$a.json" \
    --lib-b "$R/build-timing-$b.json" --impl cuda_sm120_e4m3 $(printf -- "--shape %s " "$@") --rounds 8 \
    --out "$R/ab-$a-vs-$b.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
  pack
}
step "measured (A) against final (B)"
ab measured final 1,200000,16,8,fp8 8,200000,16,8,fp8 1,32768,16,8,fp8 1,4096,16,8,fp8
step "main (A) against final (B)"
ab main final 1,200000,16,8,fp8 8,200000,16,8,fp8
