#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the bf16-pool kernels' partial rows in 16-byte stores (partial-f4.patch:
# write_partial_row_f4, lane pairs swap one n-tile's two values, so a warp store covers 8 rows x 64 B instead of
# 8 x 32 B; the same values at the same places). Run on 2026-12-06 with the patch in every kernel's bf16 path
# (data/results/h100/2026-12-06-qrcp-landing-and-partial-f4/: the fp8 headline +2.4% / +2.5%); confined since to the
# two bf16-pool kernels, whose SASS is the one measured (every other kernel's main's), so this call is now a check.
# store-patterns-run.sh timed the float2 pattern at 1.40x the float4 one's time with every SM storing (alone, equal):
# data/results/h100/2026-12-05-queue-decisions/.
# ab_patch (outputs of five configurations against main's, bit for bit; issue 52's short calls, both pools, and the
# headlines for main / patch / main), a second patch step of them, then main / patch / main / patch at
# the bf16 shapes where many CTAs store at once (N = 16: B = 8 at 200k and 32k, B = 1 at 32k). The graph tests and
# the rest of the gates come before it lands (landing-run.sh). ~8-9 minutes with .prebuilt holding both trees'
# libraries (the last long step is the one a 600-s call would lose).
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/partial-f4-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/partial-f4-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/partial-f4.patch
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 all cuda_sm120:bf16 cuda_sm120_roles:bf16 cuda_sm120_fp8:fp8 cuda_sm120_e4m3:fp8 \
  cuda_sm120_e4m3_32:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R"; kernels_restore
long() {  # TAG: the bf16 forms where many CTAs store their partial rows at once
  step "long shapes $1"
  timeout 90 python3 -m kdtree_lab bench --out "$R/bench-long-$1.json" --impl cuda_sm120,cuda_sm120_roles \
    --shape 8,200000,16,8 --shape 1,32768,16,8 --shape 8,32768,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
for round in 1 2; do
  long main-$round
  git apply $P || exit 1; long patch-$round; kernels_restore
done
