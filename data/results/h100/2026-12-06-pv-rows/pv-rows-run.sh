#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the bf16 role split's PV warps owning rows instead of columns
# (pv-rows.patch): each PV warp takes the softmax of its m-tile (16 rows) and multiplies its P, from registers, into
# 256 output columns of those rows; no P, factor or flag exchange and no named barrier between the PV warps, each ring
# slot released on an EMPTY mbarrier. The arithmetic is main's in its order, so the outputs must be main's bits. Both
# libraries built first; on the patch a smoke of the role split (a hang shows here, under a short timeout), its parity
# tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck; then main and the patch timed in
# one process by kdtree_lab.checks.ab_interleave (graphs over the same inputs, eight rounds alternating A, B / B, A;
# it also says whether the two wrote the same bits) at the ablations' three shapes, one short call and one
# memory-bound shape. ~3-4 minutes with .prebuilt. Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz
# (packed after each step).
#   bash docs/experiments/pv-rows-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pv-rows-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/pv-rows.patch
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
roles_checks "$R"  # scripts/session_lib.sh: smoke, parity, racecheck / synccheck
kernels_restore
roles_ab main "$R"  # scripts/session_lib.sh: main (A) against the patch (B), to ab-interleave-main-patch.json
