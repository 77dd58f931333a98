#!/usr/bin/env bash
# One device call (issue 52, what bounds the sm_120 forms on the H200; ~1 minute): how often one warp issues mma.sync
# by warps per scheduler (1, 2, 4), independent accumulator chains (4, 8) and independent FFMAs beside each MMA (0, 4,
# 8), f16 (the timing library's instruction for one e4m3 MMA) and bf16 (scripts/mma_issue.cu). The 64-row e4m3 form's
# QK warp issued its 144 MMAs a tile ~15 cycles apart in the profile of 2026-12-06
# (data/results/h200/2026-12-06-ncu-e4m3/); this says whether that is one warp's rate or the pipe's.
# Predicted (written 2026-12-06 before the run): one warp a scheduler with 4 chains and no FFMAs 12-16 cycles a
# MMA (the pipe's 6.7 at the measured mma.sync ceiling, 636 TFLOP/s: one warp cannot reach it), two warps a scheduler
# 13-16 cycles each, i.e. the scheduler within 15% of the ceiling; 8 chains no faster than 4 for one warp; 4 FFMAs a
# MMA not slower (issued in the MMAs' stall), 8 up to 1.3x slower.
# Carry .whl-sglang and .prebuilt (the prologue builds the library: python scripts/prebuild.py main makes that instant).
# Results in $OUT/results.tar.gz.
#   bash docs/experiments/mma-issue-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/mma-issue-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
step "mma issue"
timeout 240 python3 scripts/mma_issue.py --out "$R/mma-issue.json" 2>&1 | tee "$R/mma-issue.txt" | tail -40
pack
