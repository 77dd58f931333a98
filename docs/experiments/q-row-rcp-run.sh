#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the role-split kernels' Q rows addressed without an integer division
# (q-row-rcp.patch). q_row (roles_common.cuh) divided each row by H (node and head) behind a branch; the QK warps' Q
# prologue calls it for ten rows a lane, so on sm_90a, what the H100 and H200 run, it was 944 instructions in the
# 64-row e4m3 form's draft block and 1,245 in every CTA of the bf16 role split before their first barrier. The patch
# computes the quotient through MUFU.RCP with one correction each way (node_head, kernels/common/frame.cuh) and
# selects instead of branching: 520 and 844 on sm_90a (374 and 501 on sm_120a, from 434 and 569). The same
# addresses, so the same outputs. ab_patch (outputs of the three configurations it touches against main's, bit for
# bit; the short calls of every sm_120 form and the headlines for main / patch / main), a second patch step, then the
# phase clocks of the 64-row e4m3 form's short calls for main and the patch (the draft block's prologue and end).
# ~7-8 minutes with .prebuilt holding both trees' libraries. The whole suite's gates come before it lands
# (landing-run.sh with STACK=(q-row-rcp.patch)).
#   headline: main and the patch alternated four times on the headlines, bf16 (cuda_sm120_roles, B = 1 and 8) and fp8
#   (cuda_sm120_e4m3, B = 1 and 8), on the timing library as time_short_calls times them, each tree's libraries built
#   before the first round (~5 minutes): its first call read the bf16 headline +1.4% / +2.4%, inside main's spread.
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/q-row-rcp-run.sh [headline]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/q-row-rcp-run.sh $*"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/q-row-rcp.patch
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
if [ "${1:-}" = headline ]; then
  build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"; kernels_restore
  for round in 1 2 3 4; do
    for tag in main patch; do
      [ $tag = main ] || git apply $P || exit 1
      step "headlines, $tag-$round"
      KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/head-bf16-$tag-$round.json" \
        --impl cuda_sm120_roles \
        --shape 1,200000,16,8 --shape 8,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
      KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/head-fp8-$tag-$round.json" \
        --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 \
        | grep -E "^cuda|rror|Killed" | cut -c1-100
      kernels_restore
    done
  done
  pack; exit 0
fi
ab_patch $P "$R" 40 all cuda_sm120_roles:bf16 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R"; kernels_restore
phase_ab $P "$R" "draft|split|^=="
