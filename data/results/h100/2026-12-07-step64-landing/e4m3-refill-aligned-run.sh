#!/usr/bin/env bash
# Device calls (issue 52, the fp8 headline and 32 rows over fp8): the e4m3 forms' ring refills writing whole aligned
# 128-byte lines (e4m3-refill-aligned.patch, the 64-row form, holding e4m3-lean-tile.patch's QK change too, and
# e4m3-32-refill-aligned.patch, the 32-row form; written 2026-12-07, forty-eighth session), measured in one call with
# e4m3-lean-tile.patch beside them (what the QK change and the immediates alone buy).
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
# The 32-row form (e4m3-32-refill-aligned.patch): its profile (data/results/h200/2026-12-03-e4m3-32/call3-ncu/, the
# `mem` shape) counts 19.4% of its shared wavefronts as excessive, 8 a copy where 4 would do at all nine refill copies
# (four lanes a row write 64 bytes of each of eight rows: eight half lines). Here eight lanes a row, two rows a thread
# (lrow, lrow + 16: two index fetches and pool checks a tile where main has one), an odd row's lanes 4 positions in, and
# the ninth copy of a lane from row lrow (lch < 4) or lrow + 16: nine copies a lane as main, each writing 4 whole lines
# (checked for every lane and copy on the CPU). Its PV loop 366 -> 428 instructions a tile on sm_90a (issue 864 -> 970
# cycles; sm_120a 365 -> 416), no spill, registers main's. Its load path was measured 1.4x slower than a gather-only
# kernel reading the same rows (2026-12-04): the smem side of its copies is the candidate. Prediction (before the run):
# outputs identical; B = 8, L = 200k -3 to -10% (the load path's share), B = 1, 200k -1 to -6%, 32k shapes -0 to -5%.
# Rule: where identical, two of the four shapes >= 2% faster in >= 6 of 8 rounds and no shape slower than +0.5%, its
# gates (e4m3-32-refill-aligned-run.sh gates, gates-sanitize) and it lands.
#   (none)          bits (40 random fp8 cases + the edge grid) of the three patches against main, then main (A) against
#                   each (B) interleaved, eight rounds: the 64-row form at four shapes (lean-tile, aligned), the 32-row
#                   form at its four ratio shapes (~4 minutes warm, libraries prebuilt)
#   quick           the two aligned patches' A/Bs alone, where little device time is left (ab_interleave reports
#                   whether their bits are main's; no digests, no lean-tile; ~2.5 minutes with the prologue)
#   gates           the 64-row e4m3 form's gates with e4m3-refill-aligned.patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3 with it (~1.5 minutes)
#   gates-both      where both aligned patches met their rules: the e4m3 forms' gates with the two stacked (~4 minutes)
#   gates-both-sanitize  the four sanitizers on both e4m3 forms with the two stacked (~2.5 minutes)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-lean-tile.patch \
#   docs/experiments/e4m3-refill-aligned.patch docs/experiments/e4m3-32-refill-aligned.patch (eight libraries, 6.4 MB).
# Carry .whl-kernel (WHEELS=.whl-kernel: the A/B needs no SGLang) and .prebuilt; the gates need .whl-sglang. Results in
# $OUT/results.tar.gz (packed after each step).
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-refill-aligned-run.sh [quick|gates|gates-sanitize]
set -uo pipefail
case "$*" in ""|quick|gates|gates-sanitize|gates-both|gates-both-sanitize) ;;
  *) echo "e4m3-refill-aligned-run.sh: expected nothing, quick, gates[-sanitize] or gates-both[-sanitize], found '$*'"
     exit 2 ;;
esac
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-refill-aligned-run.sh $*"
R=$KDT_PACK_DIR; X=docs/experiments
case "${1:-}" in
  gates|gates-sanitize) e4m3_gates "$1" $X/e4m3-refill-aligned.patch aligned "$R"; exit $? ;;
  gates-both|gates-both-sanitize)
    git apply $X/e4m3-32-refill-aligned.patch || exit 1
    SANITIZE_TIMEOUT=90 e4m3_gates "${1/-both/}" $X/e4m3-refill-aligned.patch both "$R" cuda_sm120_e4m3,cuda_sm120_e4m3_32
    exit $? ;;
esac
kernels_snapshot
if [ "$*" = quick ]; then
  build_libs main "$R"
  for tag in refill-aligned 32-refill-aligned; do
    git apply $X/e4m3-$tag.patch || exit 1; build_libs $tag "$R"; kernels_restore
  done
  e4m3_ab main refill-aligned "$R"; e4m3_32_ab main 32-refill-aligned "$R"
  exit 0
fi
step "libraries and digests, main"; build_libs main "$R"
digest main cuda_sm120_e4m3 "$R"; digest main cuda_sm120_e4m3_32 "$R"
for ti in refill-aligned:cuda_sm120_e4m3 32-refill-aligned:cuda_sm120_e4m3_32 lean-tile:cuda_sm120_e4m3; do
  tag=${ti%:*} impl=${ti#*:}
  git apply $X/e4m3-$tag.patch || exit 1
  step "libraries and digest, $tag"; build_libs $tag "$R"; digest $tag $impl "$R"
  kernels_restore
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-$impl.json" "$R/digest-$tag-$impl.json" \
    > "$R/compare-$tag.txt" 2>&1; echo "$tag: $(tail -1 "$R/compare-$tag.txt")"
done
pack
e4m3_ab main refill-aligned "$R"
e4m3_32_ab main 32-refill-aligned "$R"
e4m3_ab main lean-tile "$R"
