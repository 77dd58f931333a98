#!/usr/bin/env bash
# Device calls (issue 52, the fp8 headline): the 64-row e4m3 form's steady-state tile with fewer instructions, the same
# bytes to the same places and the same arithmetic (e4m3-lean-tile.patch, written 2026-12-07, forty-eighth session):
# - the refill from one source and one destination address a lane plus immediates (`e4m3-refill-immediates.patch`,
#   measured three times in data/results/h100/2026-12-07-refill-owned/: the headline -1.9 to -2.2%, B = 8 -0.4%);
# - the QK warps' mask computed once, for the split's last tile, the only one whose keys can pass the split's end
#   (keys 32 t + 31 < 32 (ntiles - 1) < span for every earlier tile); every other tile takes all ones, a select
#   where main built the 16 bits from 16 compares each tile. A mask folded away at compile time (the loop body
#   instantiated twice) spilled the draft block's QK loop on sm_120a (16 B of stack), so it is not that form.
# SASS (this CPU machine, main's timing library against the patch's, `scripts/sass_census.py`): the prefix QK loop
# sm_90a 394 -> 381 instructions a tile (issue 1,016 -> 991 cycles), sm_120a 495 -> 462; the PV loop sm_90a 549 -> 519,
# sm_120a 545 -> 533; no spill, registers unchanged; every other loop's count main's.
# Prediction (before the run): outputs identical; the fp8 headline -2 to -3%, B = 8 -0.5 to -1%, 1 x 32k -1 to -2%;
# the 4k call within +-0.3 us. Rule (written before the run): where identical, the headline >= 2% faster in >= 6 of 8
# rounds and no shape's median slower than +0.5%, its gates (`gates`, then `gates-sanitize`) and it lands (B = 8's
# bound is not the tile's issue: the owned refill's 8x requests cost it 2.7-3.0x and B = 1 11-22%); else not landed.
#   (none)          bits (ab_patch, 40 random fp8 cases + the edge grid) and the short calls main / patch / main, then
#                   main (A) against the patch (B) interleaved at four shapes, eight rounds (~6 minutes)
#   gates           the 64-row e4m3 form's gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3 with the patch (~1.5 minutes)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-lean-tile.patch. Carry .whl-sglang and .prebuilt.
# Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/e4m3-lean-tile-run.sh [gates|gates-sanitize]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-lean-tile-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-lean-tile.patch
case "${1:-}" in gates|gates-sanitize) e4m3_gates "$1" $P lean "$R"; exit $? ;; esac
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 || exit 1
e4m3_ab main patch "$R"
