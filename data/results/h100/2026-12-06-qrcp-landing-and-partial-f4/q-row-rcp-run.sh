#!/usr/bin/env bash
# Device calls (issue 52, the fixed cost): the role-split kernels' Q rows addressed without an integer division.
# q_row (roles_common.cuh) divides each row by H (node and head) behind a branch; the QK warps' Q prologue calls it for
# ten rows a lane, so on sm_90a, what the H100 and H200 run, the 64-row e4m3 form's draft block spent 944 instructions
# before its first barrier (434 on sm_120a). node_head (kernels/common/frame.cuh) takes the quotient through MUFU.RCP
# with one correction each way and q_row<true> selects instead of branching: 520 (374). The same addresses, so the same
# outputs. Measured on 2026-12-06 applied to every role-split QK path (q-row-rcp-full.patch,
# data/results/h100/2026-12-06-draft-prologue-and-combine/): the 64-row form's short calls at N = 16 -1.0 us (L = 128)
# and -0.3 (4k), the bf16 role split's -0.7 to -0.9, the bf16 headline +1.4% / +2.4%. docs/experiments/q-row-rcp.patch
# is that change confined to the e4m3 form's draft block (roles_qk): its e4m3 kernel's SASS is the measured one's,
# every other kernel's main's (data/results/cpu/2026-12-06-q-row-rcp/).
#   gates           the 64-row e4m3 form's gates with the patch: the fp8 and e4m3 parity and graph tests (edge grid
#                   + 500 random, 23 capture sizes x 100 replays) and the hook against SGLang over fp8 (~9 minutes)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3 with the patch (~1 minute)
#   headline        the measured full patch against main, alternated four times on the headlines: bf16
#                   (cuda_sm120_roles, B = 1 and 8) and fp8 (cuda_sm120_e4m3, B = 1 and 8), timing library as
#                   time_short_calls times them, each tree's libraries built before the first round (~5 minutes):
#                   whether its bf16 headline reading was a cost or main's spread (0.2179-0.2274 ms that day)
#   (none)          the patch against main: outputs of both e4m3 forms bit for bit, short calls and headlines main /
#                   patch / main / patch (fp8), the phase clocks of main and the patch (~6 minutes)
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/q-row-rcp-run.sh [gates|gates-sanitize|headline]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/q-row-rcp-run.sh $*"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/q-row-rcp.patch
FULL=data/results/h100/2026-12-06-draft-prologue-and-combine/q-row-rcp-full.patch
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P qrcp "$R"; exit $? ;; esac
kernels_snapshot  # main's kernels/; the patches touch kernels/ only
if [ "${1:-}" = headline ]; then
  build_libs main "$R"; git apply $FULL || exit 1; build_libs full "$R"; kernels_restore
  for round in 1 2 3 4; do
    for tag in main full; do
      [ $tag = main ] || git apply $FULL || exit 1
      step "headlines, $tag-$round"
      KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/head-bf16-$tag-$round.json" \
        --impl cuda_sm120_roles --shape 1,200000,16,8 --shape 8,200000,16,8 2>&1 | grep -E "^cuda|rror|Killed" \
        | cut -c1-100
      KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/head-fp8-$tag-$round.json" \
        --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 \
        | grep -E "^cuda|rror|Killed" | cut -c1-100
      kernels_restore
    done
  done
  pack; exit 0
fi
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R" fp8; kernels_restore
phase_ab $P "$R" "draft|split|^=="
