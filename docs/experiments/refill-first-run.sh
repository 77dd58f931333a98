#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the bf16 role split's ring refill moved to the top of each PV step
# (refill-first.patch): the slot of tile t - 1 refilled before the PV warps wait for the QK group's scores of tile t,
# behind an EMPTY mbarrier a slot (every PV thread arrives once its ldmatrix of the slot's V are in), instead of after
# the PV group's per-tile barrier, between it and the MMAs. The arithmetic is main's, so the outputs must be main's
# bits. Both libraries first; on the patch a smoke of the role split (a hang shows here, under a short timeout), its
# parity tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck; then main and the patch in
# one process by kdtree_lab.checks.ab_interleave (eight rounds alternating A, B / B, A, graphs over the same inputs; it
# says whether the two wrote the same bits) at the ablations' three shapes, one short call and one memory-bound shape.
# ~3-4 minutes with .prebuilt. Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main
# docs/experiments/refill-first.patch). Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/refill-first-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/refill-first-run.sh"
R=$KDT_PACK_DIR; P=${PATCH:-docs/experiments/refill-first.patch}  # PATCH=...: a variant, built here
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
roles_checks "$R"  # scripts/session_lib.sh: smoke, parity, racecheck / synccheck
kernels_restore
roles_ab main "$R"  # scripts/session_lib.sh: main (A) against the patch (B), to ab-interleave-main-patch.json
