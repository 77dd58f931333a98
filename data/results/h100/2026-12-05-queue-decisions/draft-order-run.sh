#!/usr/bin/env bash
# One device call (issue 52): did the landed stack (draft-first.patch, combine-lse-once.patch, landed 2026-12-05)
# slow the shapes its own A/B runs did not time, and does draft-order.patch (the draft block first only where the
# prefix splits are short) keep its short-call gains without that? The stack's grid on an H100 read B = 1, L = 32k
# 7-25% and fp8 B = 8, 200k, N = 16 5.8% above the twenty-ninth session's grid (another machine, another call: single
# medians of the B = 1, 32k shapes spread 10-20% between calls of one session), and fp8 B = 8 2-3% above main's in
# that day's calls on the same machine (data/results/h100/2026-12-05-stack-landing/README.md).
# First ab_patch with draft-order.patch (outputs of four configurations against main's, then issue 52's short fp8
# calls and fp8 headlines for main / patch / main); then two rounds of three trees, main (the stack), main with both
# landed patches reverted (git apply -R, newest first) and main with draft-order.patch, each timed by bench at B = 1,
# L = 32k, N = 4 and 16 (both e4m3 forms over fp8 on the timing library, the bf16 first sm_120 kernel and role split
# on the normal one) and B = 8, L = 200k, N = 16. ~6-7 minutes (with .prebuilt holding the three trees' libraries: the reverted tree's
# from `git diff HEAD 404e24c -- kernels` as a patch, docs/experiments/README.md; without them ~25 s a build here).
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/draft-order-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/draft-order-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/draft-order.patch; L=data/results/h100/2026-12-05-fixed-cost-experiments
kernels_snapshot  # main's kernels/ (the stack)
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3_32:fp8 cuda_sm120_e4m3:fp8 cuda_sm120:bf16 cuda_sm120_roles:bf16 || exit 1
revert() { git apply -R "$L/combine-lse-once.patch" && git apply -R "$L/draft-first.patch"; }
revert || { echo "draft-order-run.sh: the landed patches do not revert on this tree"; exit 1; }
build_libs before "$R"
kernels_restore
timed() {  # TAG: the shapes above (fp8 on the timing library, bf16 on the normal one)
  step "timing $1"
  KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/ab-fp8-$1.json" \
    --impl cuda_sm120_e4m3_32,cuda_sm120_e4m3 --shape 1,32768,4,8,fp8 --shape 1,32768,16,8,fp8 \
    --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  timeout 90 python3 -m kdtree_lab bench --out "$R/ab-bf16-$1.json" --impl cuda_sm120,cuda_sm120_roles \
    --shape 1,32768,4,8 --shape 1,32768,16,8 --shape 8,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
for round in 1 2; do
  timed stack-$round
  revert || exit 1; timed before-$round; kernels_restore
  git apply $P || exit 1; timed order-$round; kernels_restore
done
