#!/usr/bin/env bash
# One device call (issue 52): the draft block dispatched first only where the launch's grid fits one wave
# (draft-wave.patch). stack-ab-run.sh (2026-12-06, data/results/h100/2026-12-06-stack-landing-grid-and-stack-ab/)
# found draft-first.patch's order costing every B = 1, 32k shape whose grid overflows the 132 SMs (N = 64 at H = 8
# and 16, the first sm_120 kernel's N = 16 at H = 16): +6 to +15 us, the prefix CTAs past the first wave waiting
# for the draft CTAs dispatched ahead of them. The patch sets Params::draft_first at launch (grid CTAs <= SMs x the
# kernel's resident CTAs per SM) and setup_work maps blockIdx.y by it; the order only, so outputs are main's.
# ab_patch (outputs of the four sm_120 configurations against main's, bit for bit; the fp8 short calls for main /
# patch / main), then two rounds of main and the patch at stack-ab's shapes, the headlines and B = 8.
# ~6 minutes with .prebuilt holding both trees' libraries. Carry .whl-sglang and .prebuilt.
# Results in $OUT/results.tar.gz (packed after each step).
# `v5`: the sm_90a kernels instead (v5, the Hopper default over bf16, and v4, which took the same order since
# draft-first.patch), two rounds of main and the patch at the overflowing and fitting shapes, then two of them through
# kdtree_lab.checks.ab_interleave (its first device run), ~4 minutes, no digests (the gates' wgmma tests cover
# their outputs).
#   bash docs/experiments/draft-wave-run.sh [v5]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/draft-wave-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/draft-wave.patch
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
if [ "${1:-}" = v5 ]; then
  build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"; kernels_restore
  for round in 1 2; do
    for tag in main patch; do
      [ $tag = patch ] && { git apply $P || exit 1; }
      step "timing $tag-$round (sm_90a)"
      timeout 120 python3 -m kdtree_lab bench --out "$R/ab-sm90-$tag-$round.json" --impl cuda_wgmma_v5,cuda_wgmma \
        --shape 1,32768,64,8 --shape 1,32768,64,16 --shape 1,32768,16,16 --shape 8,32768,4,8 --shape 1,200000,16,8 \
        --shape 8,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
      kernels_restore; pack
    done
  done
  # the same question through the interleaved harness (both builds in one process, rounds A, B / B, A): its first
  # device run, beside the bench rounds it is read against
  step "interleaved A/B (sm_90a)"
  timeout 150 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-main.json" --lib-b "$R/build-patch.json" \
    --impl cuda_wgmma_v5 --shape 1,32768,64,8 --shape 1,32768,16,16 --rounds 6 --out "$R/ab-interleave-v5.json" 2>&1 \
    | tail -4
  pack
  exit 0
fi
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 cuda_sm120:bf16 cuda_sm120_roles:bf16 || exit 1
timed() {  # TAG: fp8 on the timing library, bf16 on the normal one
  step "timing $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 -m kdtree_lab bench --out "$R/ab-fp8-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,32768,64,8,fp8 --shape 1,32768,64,16,fp8 --shape 1,32768,4,16,fp8 --shape 1,32768,16,16,fp8 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  timeout 100 python3 -m kdtree_lab bench --out "$R/ab-bf16-$1.json" --impl cuda_sm120,cuda_sm120_roles \
    --shape 1,32768,64,8 --shape 1,32768,64,16 --shape 1,32768,16,16 --shape 1,200000,16,8 --shape 8,200000,16,8 \
    2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
for round in 1 2; do
  timed main-$round
  git apply $P || exit 1; timed patch-$round; kernels_restore
done
