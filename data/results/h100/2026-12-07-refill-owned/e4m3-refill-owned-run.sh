#!/usr/bin/env bash
# Device call (issue 52, the fp8 headline and 32 rows over fp8): the e4m3 forms' ring refill owned by warp
# (e4m3-refill-owned.patch, the 64-row form; e4m3-32-refill-owned.patch, the 32-row form). Main's PV warps each copy
# chunks of every warp's V columns (64-row form: thread v, key row v >> 3, chunks (v & 7) + 8 k; 32-row form: row
# v >> 2, chunks (v & 3) + 4 k), so each tile they meet at a named barrier (`BAR.SYNC 0x3`) before any refills the
# slot. With the patches lane l of PV warp pw copies key row l's V chunks (4 pw .. + 3 in the 64-row form, 8 pw .. + 7
# in the 32-row form: exactly the bytes its warp's ldmatrix read, to the addresses it read them from) and rope chunk
# 32 + pw (warps 0-3; read only by the QK group, which is done with the slot before the P(t - 1) every PV warp
# acquired), so a __syncwarp replaces the barrier. Every (row, chunk) of a tile is copied once to its
# e4m3::tile_offset, so the outputs must be main's bit for bit. Beside them, in the same call and the same interleaved
# harness: e4m3-refill-immediates.patch (queued, one address a lane) and e4m3-refill-nobar-ablation.patch (the 64-row
# form's barrier removed, racy: the bound of its owned refill's gain).
# Prediction (before the run): outputs identical (both owned patches and the immediates); the ablation 0 to -3% at the
# headline and B = 8; the 64-row owned refill within 1% of the ablation (its 4-5 copies a lane as main's, one 64-bit
# address a lane, but 16 bytes of a row a lane per copy where main reads 128 contiguous bytes a row with 8 lanes:
# twice the L2 sector requests for the same bytes, at ~7 B a cycle a SM far from L2's rate); the immediates -1 to -3%;
# the 32-row owned refill 0 to -3% at its long shapes (its four PV warps meet as the 64-row form's eight do).
# Rule: for the 64-row form the faster of owned and immediates lands where identical and the headline and B = 8 each
# >= 1.5% faster; the 32-row owned refill where identical and >= 1.5% faster at B = 1 and B = 8, L = 200k; each after
# the gates (racecheck and synccheck clean included), run on the warm machine right after:
#   (none)   bits and interleaved A/B against main (~3 minutes; carry .whl-min and .prebuilt: WHEELS=.whl-min, a
#            folder of one small wheel, as .whl-sglang and nine libraries pass the carry's 64 MiB; nothing here needs
#            SGLang)
#   gates    with the patches in $OWNED applied (default: both owned refills, in this order), the e4m3 forms' gates
#            (edge grid + 500 random of each fp8 configuration, 23 sizes x 100 replays over fp8, the hook against
#            SGLang over fp8: ~4 minutes on an H100) and the four sanitizers on both e4m3 forms (~2 minutes); carry
#            .whl-sglang and a .prebuilt holding main's normal library and the applied stack's
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-refill-owned.patch
#   docs/experiments/e4m3-32-refill-owned.patch docs/experiments/e4m3-refill-immediates.patch (the ablation: --variants
#   timing); for gates, main and the stack (--variants normal). Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/e4m3-refill-owned-run.sh [gates]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-refill-owned-run.sh $*"
R=$KDT_PACK_DIR; X=docs/experiments
if [ "${1:-}" = gates ]; then
  for tag in ${OWNED:-refill-owned 32-refill-owned}; do git apply $X/e4m3-$tag.patch || exit 1; done
  step "gates: ${OWNED:-refill-owned 32-refill-owned}"
  gate_tests "$R/gates-owned" tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3 or fp8_pool or (sglang_on_the_gpu_grid and fp8)"
  pack
  for impl in cuda_sm120_e4m3 cuda_sm120_e4m3_32; do
    step "sanitizers on $impl"; SANITIZE_TIMEOUT=60 run_sanitizers "memcheck racecheck synccheck initcheck" $impl "$R" "-$impl"
    pack
  done
  exit 0
fi
[ $# = 0 ] || { echo "e4m3-refill-owned-run.sh: expected nothing or gates, found '$*'"; exit 2; }
kernels_snapshot
digest() {  # TAG IMPL
  timeout 150 python3 -m kdtree_lab.checks.output_identity --impl $2 --kv fp8 --cases 40 \
    --out "$R/digest-$1-$2.json" 2>&1 | tail -1
}
step "libraries and digests, main"; build_libs main "$R"
digest main cuda_sm120_e4m3; digest main cuda_sm120_e4m3_32
for tag in refill-owned 32-refill-owned refill-immediates refill-nobar-ablation; do
  git apply $X/e4m3-$tag.patch || exit 1
  if [ $tag = refill-nobar-ablation ]; then  # racy: its timing library only
    KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-timing-$tag.json"; echo "$tag timing build rc=$?"
  else
    step "libraries and digest, $tag"; build_libs $tag "$R"
    case $tag in 32-*) digest $tag cuda_sm120_e4m3_32 ;; *) digest $tag cuda_sm120_e4m3 ;; esac
  fi
  kernels_restore
done
for ti in refill-owned:cuda_sm120_e4m3 32-refill-owned:cuda_sm120_e4m3_32 refill-immediates:cuda_sm120_e4m3; do
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-${ti#*:}.json" "$R/digest-${ti%:*}-${ti#*:}.json" \
    > "$R/compare-${ti%:*}.txt" 2>&1; echo "${ti%:*}: $(tail -1 "$R/compare-${ti%:*}.txt")"
done
pack
for tag in refill-owned refill-immediates refill-nobar-ablation; do e4m3_ab main $tag "$R"; done
step "interleaved A/B: the 32-row e4m3 form, main (A) and its owned refill (B), timing libraries"
timeout 170 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-32-refill-owned.json" --impl cuda_sm120_e4m3_32 --shape 1,200000,4,8,fp8 \
  --shape 8,200000,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 8,32768,4,8,fp8 --rounds 8 \
  --out "$R/ab-interleave-main-32-refill-owned.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
pack
