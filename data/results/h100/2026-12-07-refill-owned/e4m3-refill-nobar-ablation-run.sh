#!/usr/bin/env bash
# Device call (issue 52, the fp8 headline): what the 64-row e4m3 form's per-tile rendezvous of its eight PV warps
# before the ring refill costs (e4m3-refill-nobar-ablation.patch: the named barrier removed; racy, a measurement only,
# never to land). Each PV warp copies chunks of every warp's V columns, so the eight wait for each other each tile
# (`BAR.SYNC 0x3, 0x100` in the PV loop's SASS) before any refills the slot. A refill in which each PV warp copies only
# the V chunks it read itself (4 a lane, one key row a lane) and a share of the rope chunks (which only the QK warps
# read, and they are done with the slot before P(t - 1)) would need no rendezvous: this ablation bounds that design's
# gain before it is written.
# Prediction (before the run): the headline and B = 8 0 to -3% (the eight PV warps wait on the same full barrier and
# do equal work before the rendezvous, so their skew is small); 1 x 4k within the spread. Rule: >= 1.5% at the
# headline and B = 8 -> write the warp-owned refill (docs/experiments/README.md); below -> the rendezvous is not the
# refill loop's cost, noted in docs/performance.md.
#   bash docs/experiments/e4m3-refill-nobar-ablation-run.sh   # ~4 minutes; carry .whl-sglang .prebuilt
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-refill-nobar-ablation-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-refill-nobar-ablation.patch
kernels_snapshot
step "libraries, main"; build_libs main "$R"
git apply $P || exit 1
step "libraries, ablation"; build_libs ablation "$R"
kernels_restore
e4m3_ab main ablation "$R"
