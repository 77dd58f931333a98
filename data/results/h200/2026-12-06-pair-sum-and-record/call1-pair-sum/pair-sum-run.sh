#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the bf16 role split's QK pair sums its two partial scores itself
# (pair-sum.patch), through the score buffer and a 64-thread named barrier a pair, so a tile's scores take 4 KB and
# the buffer holds two tiles (S_FULL[2], S_EMPTY[2]): the QK group can run two tiles ahead, the PV warps load one
# float2 a key pair instead of two and add nothing. The step toward the pipelined PV order (docs/performance.md,
# "sm_120 over bf16 pools", the plan after the 2026-12-06 profile). Each score is the sum main's PV group took, so the
# outputs must be main's bits. Both libraries first; on the patch the role split's smoke (a hang shows here, under a
# short timeout), its parity tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck (the
# pair's new hand-off); then main (A) against it (B) by kdtree_lab.checks.ab_interleave at the ablations' five
# shapes. ~3 minutes with .prebuilt. Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main
# docs/experiments/pair-sum.patch). Results in $OUT/results.tar.gz (packed after each step).
# Predicted (written 2026-12-06 before any run): outputs identical; the four long shapes 0 to -1.5% (the PV warps'
# score loads halved and four FADD fewer a tile, their wait for the scores shorter with the QK group further ahead;
# the pair's swap on the QK warps, which wait 15% of their samples on the PV group, hidden there), the 4k call within
# 0.3 us.
#   bash docs/experiments/pair-sum-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pair-sum-run.sh"
R=$KDT_PACK_DIR
step "libraries"
build_libs main "$R"
# scripts/session_lib.sh: the patch's libraries, smoke, parity, racecheck / synccheck, then main (A) against it (B)
roles_patch docs/experiments/pair-sum.patch "$R" || exit 1
