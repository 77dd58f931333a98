#!/usr/bin/env bash
# One device call (issue 52): did the landed stack (draft-first.patch, combine-lse-once.patch, landed 2026-12-05) cost
# the B = 1, L = 32k shapes no A/B has timed? Its A/B runs and draft-order-run.sh (2026-12-05) timed N = 4 and 16 at
# H = 8 (the stack 0.9-2.9 us faster) and B = 8; the grids since read the e4m3 form at N = 64 and H = 16 up to 22%
# above the twenty-ninth session's (data/results/h100/2026-12-05-queue-decisions/README.md). Three rounds of main
# (the stack) and main with both landed patches reverted (git apply -R, newest first), each timed by bench at B = 1,
# L = 32k: N = 64 at H = 8 and 16, N = 4 and 16 at H = 16, the 64-row e4m3 form over fp8 (timing library) and the
# bf16 first sm_120 kernel and role split. ~4 minutes with .prebuilt holding both trees' libraries (the reverted
# tree's from both patches reverted with git apply -R, as a patch: docs/experiments/README.md).
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/stack-ab-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/stack-ab-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
L=data/results/h100/2026-12-05-fixed-cost-experiments
kernels_snapshot  # main's kernels/ (the stack)
build_libs main "$R"
revert() { git apply -R "$L/combine-lse-once.patch" && git apply -R "$L/draft-first.patch"; }
revert || { echo "stack-ab-run.sh: the landed patches do not revert on this tree"; exit 1; }
build_libs before "$R"
kernels_restore
timed() {  # TAG: the shapes above (fp8 on the timing library, bf16 on the normal one)
  step "timing $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 -m kdtree_lab bench --out "$R/ab-fp8-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,32768,64,8,fp8 --shape 1,32768,64,16,fp8 --shape 1,32768,4,16,fp8 --shape 1,32768,16,16,fp8 2>&1 \
    | grep -E "^cuda|rror|Killed" | cut -c1-100
  timeout 100 python3 -m kdtree_lab bench --out "$R/ab-bf16-$1.json" --impl cuda_sm120,cuda_sm120_roles \
    --shape 1,32768,64,8 --shape 1,32768,64,16 --shape 1,32768,4,16 --shape 1,32768,16,16 2>&1 \
    | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
for round in 1 2 3; do
  timed stack-$round
  revert || exit 1; timed before-$round; kernels_restore
done
