#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the combine's LSE reads in flight together (combine-lse-once.patch:
# each lane loads the LSEs of splits lane + 32 i, i < 5, at once and keeps them for the weight sum, where the loop
# over s = lane, lane + 32, ... left a short split count's two to five loads one after another). The values and
# their order are the loop's, so the outputs must be main's bit for bit: digests of four configurations over the
# GPU grid (bf16 and fp8 pools, normal library), then main, the patch and main again: a short call's marginal cost in
# a graph (timing library: both e4m3 forms over fp8 and the bf16 picks at N = 4 and 16, L = 128 and 4k), the fp8
# headline and B = 8 and the bf16 headline (no slower than 1%). Every library is built before the step that times
# it. ~8-9 minutes.
#   bash docs/experiments/combine-lse-once-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/combine-lse-once-run.sh $*"
P=docs/experiments/combine-lse-once.patch; R=$KDT_PACK_DIR
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
ab_patch $P $R 20 all cuda_sm120:bf16 cuda_sm120_roles:bf16 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8
