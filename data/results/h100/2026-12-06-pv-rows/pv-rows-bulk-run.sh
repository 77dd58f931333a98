#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): pv-rows.patch with the ring refilled by one bulk copy a key row
# (pv-rows-bulk.patch, a whole diff against main: rows unswizzled at a 1,168-byte pitch, lanes 0..15 of PV warp 0
# each copying a row with cp.async.bulk onto the slot's FULL mbarrier, the CTA's Work read from shared memory by the
# PV warps). The arithmetic is main's, so the outputs must be main's bits. Three libraries built first (main,
# pv-rows, this patch); on the patch a smoke of the role split (a hang shows here, under a short timeout), its parity
# tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck; then, in one process each
# (kdtree_lab.checks.ab_interleave, eight rounds alternating A, B / B, A, same inputs; it says whether the two wrote the
# same bits), main against the patch and pv-rows against the patch, at the ablations' three shapes, one short call and
# one memory-bound shape. ~4-5 minutes with .prebuilt. Carry .whl-sglang and .prebuilt (main's, pv-rows' and this
# patch's: python scripts/prebuild.py main docs/experiments/pv-rows.patch docs/experiments/pv-rows-bulk.patch).
# Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/pv-rows-bulk-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pv-rows-bulk-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/pv-rows-bulk.patch
kernels_snapshot  # both patches touch kernels/ only, so kernels_restore undoes them
step "libraries"
build_libs main "$R"
git apply docs/experiments/pv-rows.patch || exit 1; build_libs rows "$R"; kernels_restore
git apply $P || exit 1; build_libs patch "$R"
roles_checks "$R"  # scripts/session_lib.sh: smoke, parity, racecheck / synccheck
kernels_restore
roles_ab main "$R"; roles_ab rows "$R"  # scripts/session_lib.sh: main, then pv-rows (A) against the patch (B)
