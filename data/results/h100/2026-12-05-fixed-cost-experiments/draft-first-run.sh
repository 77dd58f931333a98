#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the draft block dispatched first (draft-first.patch: blockIdx.y 0 is
# the draft block, y > 0 prefix split y - 1, in setup_work, which every split kernel shares). Each CTA's work and the
# combine's order are unchanged, so the outputs must be main's bit for bit: digests of four configurations over the
# GPU grid (bf16 and fp8 pools, normal library), then main, the patch and main again: a short call's marginal cost in
# a graph (timing library: both e4m3 forms over fp8 and the bf16 picks at N = 4 and 16, L = 128 and 4k), the fp8
# headline and B = 8 and the bf16 headline (no slower than 1%). Every library is built before the step that times
# it (a build inside a timed step's timeout would eat it). ~8-9 minutes. The phase clocks with the patch, if wanted
# after it: apply the patch, then bash docs/experiments/phase-clocks-run.sh (its split.last_cta_split then reads the
# blockIdx.y, the logical split + 1).
#   bash docs/experiments/draft-first-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/draft-first-run.sh $*"
P=docs/experiments/draft-first.patch; R=$KDT_PACK_DIR
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
ab_patch $P $R 20 all cuda_sm120:bf16 cuda_sm120_roles:bf16 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8
