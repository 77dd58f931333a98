#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the combine loads the draft block's partial row and each warp's first
# eight prefix splits' with the LSEs, right after its wait (combine-loads-ahead.patch), where main's waits three round
# trips one after another (the LSEs; then the draft partial, once the weights are known; then the splits'). Only the
# splits the split rule fills are loaded ahead (split_chunk, kernels/common/frame.cuh, now shared by setup_work and
# the combine through Params::gran), so no row is read that this call did not write; the same values in the same
# order, so the same outputs. Every configuration's combine changes: ab_patch (outputs of the five sm_120
# configurations and v5 against main's, bit for bit; the short calls of every sm_120 form and the headlines for main /
# patch / main), a second patch step, then the phase clocks of the 64-row e4m3 form's short calls for main and the
# patch (the combine's wait to its end). ~7-8 minutes with .prebuilt holding both trees' libraries. The whole suite's
# gates come before it lands (landing-run.sh with STACK=(combine-loads-ahead.patch)).
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/combine-loads-ahead-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/combine-loads-ahead-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/combine-loads-ahead.patch
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 all cuda_sm120:bf16 cuda_sm120_roles:bf16 cuda_sm120_fp8:fp8 cuda_sm120_e4m3:fp8 \
  cuda_sm120_e4m3_32:fp8 cuda_wgmma_v5:bf16 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R"; kernels_restore
phase_ab $P "$R" "combine|split|^=="
