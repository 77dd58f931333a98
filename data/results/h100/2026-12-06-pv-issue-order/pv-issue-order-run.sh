#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the bf16 role split's PV loop in a shorter order after its per-tile
# barrier (pv-issue-order.patch). Nsight Compute's stall samples of main at the bf16 headline (2026-12-06,
# data/results/h100/2026-12-06-ncu-and-refill-first/) put ~6% of the PV warps' samples on the mbarrier wait for
# the tile's V (complete long before: the QK group waited on it) between P's loads and the first ldmatrix, and the
# rescale flags' load, its four branches and P's four loads in a chain after the barrier. The patch's two switches
# (CfgPvs): WAIT_EARLY, that wait beside the score loads at the top of the step; LOADS_FIRST, P's loads issued with
# the flags' before the rescale's branches. Both off is main's SASS (recorded); the arithmetic is main's, so the
# outputs must be main's bits. The patch (both on) first: its smoke, parity tests (edge grid + 500 random, the
# corrupt-indptr flag), racecheck / synccheck, then main (A) against it (B) by kdtree_lab.checks.ab_interleave at
# the ablations' five shapes; then LOADS_FIRST alone, by sed, A/B only (loads-first/): the patch against it is
# WAIT_EARLY's share. (WAIT_EARLY alone keeps 4 B of spill in its sm_120a build, so it is not a candidate.) ~4
# minutes with .prebuilt. Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main
# docs/experiments/pv-issue-order.patch and the variant's tree: the patch with the sed below applied). Results in
# $OUT/results.tar.gz (packed after each step).
# Predicted (written 2026-12-06 before the call): the patch -2 to -5% at the four long shapes (the path from the
# barrier to the first MMA shortened by one mbarrier round trip and one shared-memory load's latency, ~60-100 of the
# ~1,900 cycles a tile takes at Nsight Compute's clock), ~0 at B = 1, L = 4k; LOADS_FIRST alone -1 to -3%.
#   bash docs/experiments/pv-issue-order-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pv-issue-order-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/pv-issue-order.patch
F=kernels/mma_sync/verify_sm120_roles.cuh
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
roles_checks "$R"  # scripts/session_lib.sh: smoke, parity, racecheck / synccheck
kernels_restore
roles_ab main "$R"  # main (A) against the patch (B), to ab-interleave-main-patch.json
for v in "loads-first:false, LOADS_FIRST = true"; do
  name=${v%%:*}; val=${v#*:}
  step "one switch: $name"
  V=$R/$name; mkdir -p "$V"; cp "$R/build-main.json" "$R/build-timing-main.json" "$V/"
  git apply $P || exit 1
  sed -i "s/WAIT_EARLY = true, LOADS_FIRST = true;/WAIT_EARLY = $val;/" $F
  grep -q "WAIT_EARLY = $val;" $F || { echo "the switches not found"; exit 1; }
  build_libs patch "$V"
  kernels_restore
  roles_ab main "$V"
done
