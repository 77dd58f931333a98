#!/usr/bin/env bash
# Device calls (issue 52, the fp8 headline): the 64-row e4m3 form's ring refill with one source and one destination
# address a lane and immediates (e4m3-refill-immediates.patch). A PV warp copies its five 16-byte chunks lch + 8 k of
# key row lrow each tile; main computes each chunk's swizzled destination, tile_offset(lrow, lch + 8 k), and its 64-bit
# source apart. The row swizzle (< 4) flips bits 8 k never touches, so chunk k lands at tile_offset(lrow, lch) + 128 k
# (the 32-row form and the bf16 role split already copy this way): the same bytes to the same places, so the outputs
# must be main's bit for bit. The PV loop's SASS (this CPU machine, landed main's timing library against the patch's,
# `scripts/sass_census.py`): sm_90a 549 -> 519 instructions a tile (issue 1,198 -> 1,165 cycles), sm_120a 545 -> 533;
# the copies now `LDGSTS [R+0x80], [R.64+0x80]`. The form's tile is scheduler issue on GH100 (~6 cycles a MMA, ~1 an
# other instruction, docs/performance.md "What bounds the e4m3 configuration"): two PV warps a scheduler, 60 fewer
# issue slots of ~1,950 a tile.
# Prediction (before the run): outputs identical; the fp8 headline -1 to -3%, B = 8 -1 to -3%, 1 x 32k -1 to -2%;
# the short calls within +-0.3 us (a refill is per tile). Rule: where identical and the headline and B = 8 each >= 1.5%
# faster (interleaved medians), its gates (`gates`, then `gates-sanitize`) and it lands; else not landed, kept with its
# results.
#   (none)          bits (ab_patch, 40 random fp8 cases + the edge grid) and the short calls main / patch / main, then
#                   main (A) against the patch (B) interleaved at four shapes, eight rounds (~6 minutes)
#   gates           the 64-row e4m3 form's gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3 with the patch (~1.5 minutes)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-refill-immediates.patch. Carry .whl-sglang and
# .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/e4m3-refill-immediates-run.sh [gates|gates-sanitize]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-refill-immediates-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-refill-immediates.patch
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P refill "$R"; exit $? ;; esac
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 || exit 1
e4m3_ab main patch "$R"
