#!/usr/bin/env bash
# Device calls (issue 52, the fp8 headline): the 64-row e4m3 form's ring refill writing whole aligned 128-byte lines
# (e4m3-refill-aligned.patch, written 2026-12-07, forty-eighth session; it holds e4m3-lean-tile.patch's QK change too).
# The profiles of the fp8 headline (H100 2026-12-06 and H200 2026-12-06, `ncu ... .source.csv.gz`) put 1,400,272 of
# its 17.9M shared-memory wavefronts (7.8%) as excessive, all of them at the refill's five LDGSTS: 7.0 wavefronts for
# each of the first four copies (ideal 4) and 4.0 for the fifth (ideal 2). A key row is 576 bytes, 4.5 lines of 128,
# so an odd row starts half a line in, and main's eight lanes a row (chunk lch + 8 k at position (lch + 8 k) ^ swizzle)
# write half lines there: a warp's copy touches 6 lines where its 512 bytes fill 4. Here an odd row's lanes start 4
# positions in (positions 4 + 8 k + lch) and take the row's first 4 positions in the fifth copy, beside the even row's
# last 4: every copy writes whole aligned lines (4 a warp, 2 for the fifth; checked for every lane and copy against
# e4m3::tile_offset on this machine), the same bytes to the same places, so the outputs must be main's bit for bit.
# Each lane still copies one key row, so its index fetch and pool check are main's; its source is still 128
# contiguous bytes per eight lanes (main's pattern, which the owned refill's 16 bytes from each of 32 rows was not).
# SASS (this CPU machine, timing libraries, `scripts/sass_census.py`): the PV loop sm_90a 549 -> 529 instructions a tile
# (e4m3-lean-tile.patch 519: the fifth copy's offset is per lane here, -4 or +32 positions), sm_120a 545 -> 544; the
# QK loop as e4m3-lean-tile.patch's (394 -> 381, 495 -> 462); no spill.
# Prediction (before the run): outputs identical; excessive shared wavefronts at the refill ~0 (not profiled in this
# call); the fp8 headline -2 to -5% (lean-tile's -2 to -3% and 0-3% from the wavefronts: the profile's own estimate,
# 7.4%, is an upper bound), B = 8 -0.5 to -3%, 1 x 32k -1 to -3%; the 4k call within +-0.3 us. Rule (written before
# the run): where identical, the headline >= 2% faster in >= 6 of 8 rounds and no shape's median slower than +0.5%, its
# gates (`gates`, then `gates-sanitize`) and it lands in place of e4m3-lean-tile.patch; else not landed.
#   (none)          bits (ab_patch, 40 random fp8 cases + the edge grid) and the short calls main / patch / main, then
#                   main (A) against the patch (B) interleaved at four shapes, eight rounds (~6 minutes)
#   gates           the 64-row e4m3 form's gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3 with the patch (~1.5 minutes)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-refill-aligned.patch. Carry .whl-sglang and .prebuilt.
# Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/e4m3-refill-aligned-run.sh [gates|gates-sanitize]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-refill-aligned-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-refill-aligned.patch
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P aligned "$R"; exit $? ;; esac
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 || exit 1
e4m3_ab main patch "$R"
