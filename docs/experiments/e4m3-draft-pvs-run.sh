#!/usr/bin/env bash
# One device call (issue 52, the fixed cost; one home for the role split): the 64-row e4m3 form's draft block on the
# bf16 role split's landed form (e4m3-draft-pvs.patch: pvs_qk / pvs_pv, the softmax in the PV warps) instead of the
# first form's code (roles_qk / roles_pv, deleted by the patch). The landed form's outputs are the first form's bit
# for bit (data/results/h100/2026-12-05-pv-softmax-landing/), so the e4m3 form's must be main's: digests over the fp8
# GPU grid (normal library), then main, the patch and main again: a short call's marginal cost in a graph (timing
# library, both e4m3 forms at N = 4 and 16, L = 128 and 4k) and the fp8 headline and B = 8, then the patch once more
# (2026-12-05's call put the headline +3% with the patch, one sample); then the phase clocks of the 64-row form's short
# calls on main and with the patch, in this call (the draft block's span by role, and whether the split kernel's end
# moves while the graph of ten does not). Then the B = 8 question (2026-12-05: +6.1% / +2.0% / +1.9% in three
# single-median pairs) through kdtree_lab.checks.ab_interleave: both timing libraries in one process, graphs over the
# same inputs, eight rounds alternating A, B / B, A, at B = 8 and 1, L = 200k and a 4k short call. ~6-7 minutes (4.3
# on 2026-12-05 before the second rounds).
#   bash docs/experiments/e4m3-draft-pvs-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-draft-pvs-run.sh $*"
P=docs/experiments/e4m3-draft-pvs.patch; R=$KDT_PACK_DIR
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
ab_patch $P $R 60 fp8 cuda_sm120_e4m3:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 $R fp8; kernels_restore
phase_ab $P "$R" "draft|split|^=="
step "interleaved A/B: the 64-row e4m3 form, main (A) and the patch (B), timing libraries"
timeout 200 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 8,200000,16,8,fp8 --shape 1,200000,16,8,fp8 \
  --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3.json" 2>&1 | tail -4
pack
