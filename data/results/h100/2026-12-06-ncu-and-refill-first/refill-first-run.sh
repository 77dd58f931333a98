#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the bf16 role split's ring refill moved to the top of each PV step
# (refill-first.patch): the slot of tile t - 1 refilled before the PV warps wait for the QK group's scores of tile t,
# behind an EMPTY mbarrier a slot (every PV thread arrives once its ldmatrix of the slot's V are in), instead of after
# the PV group's per-tile barrier, between it and the MMAs. The arithmetic is main's, so the outputs must be main's
# bits. Both libraries first; on the patch a smoke of the role split (a hang shows here, under a short timeout), its
# parity tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck; then main and the patch in
# one process by kdtree_lab.checks.ab_interleave (eight rounds alternating A, B / B, A, graphs over the same inputs; it
# says whether the two wrote the same bits) at the ablations' three shapes, one short call and one memory-bound shape.
# Then the same for the variant the patch holds switched off (CfgPvs::REFILL_AFTER_S: the refill after the step has
# read and released the scores), switched on here by sed and built here (its sm_120a build keeps 8 B of stack, so
# prebuild.py refuses it; sm_90a, what an H100 times, has none), into after-s/. ~6 minutes with .prebuilt. Carry
# .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/refill-first.patch). Results in
# $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/refill-first-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/refill-first-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/refill-first.patch
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
roles_checks "$R"  # scripts/session_lib.sh: smoke, parity, racecheck / synccheck
kernels_restore
roles_ab main "$R"  # scripts/session_lib.sh: main (A) against the patch (B), to ab-interleave-main-patch.json
step "the variant: the refill after the step's scores are read and released (REFILL_AFTER_S)"
V=$R/after-s; mkdir -p "$V"; cp "$R/build-main.json" "$R/build-timing-main.json" "$V/"
git apply $P || exit 1
sed -i 's/static constexpr bool REFILL_AFTER_S = false;/static constexpr bool REFILL_AFTER_S = true;/' \
  kernels/mma_sync/verify_sm120_roles.cuh
grep -q "REFILL_AFTER_S = true;" kernels/mma_sync/verify_sm120_roles.cuh || { echo "the variant's switch not found"; exit 1; }
build_libs patch "$V"  # rc=1 for the sm_120a stack above: the library is built and listed
roles_checks "$V"
kernels_restore
roles_ab main "$V"
