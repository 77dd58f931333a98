#!/usr/bin/env bash
# Device calls (issue 52, the fixed cost): the 64-row e4m3 form's QK warps with their Q loads in flight before the
# first K tile's wait (e4m3-64-q-early.patch). The draft block (roles_qk): its latent Q fragments as weak ld.global
# instead of ld.global.nc, which ptxas sank past the rope's cp.async wait, the QK barrier and the first tile's
# mbarrier wait, into that tile's MMAs. The prefix CTAs (e4m3_qk): the wait for Q's second term moved after the first
# tile's wait, so ptxas no longer issues 10-12 of the first term's 18 loads after it. The same bytes, so the same
# outputs; only verify_sm120_e4m3_kernel<64>'s SASS moves (both archs).
#   call 1: bash docs/experiments/e4m3-64-q-early-run.sh     outputs against main's (fp8 grid, normal library), then
#           main / patch / main / patch: the short calls of both e4m3 forms (a graph of ten, N = 4 and 16, L = 128
#           and 4k) and the fp8 headline and B = 8 (timing library); then the phase clocks of the 64-row form's short
#           calls, main and patch (each role's first tile, the draft block's and the split kernel's end) (~6 minutes)
#   call 2: bash docs/experiments/e4m3-64-q-early-run.sh gates            where its rule says land: the fp8 and e4m3
#           parity and graph tests (edge grid + 500 random, 23 capture sizes x 100 replays), the hook against SGLang
#           over fp8 (~9 minutes); then gates-sanitize: the four sanitizers on cuda_sm120_e4m3 (~1 minute)
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-64-q-early-run.sh $*"
P=docs/experiments/e4m3-64-q-early.patch; R=$KDT_PACK_DIR
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P qearly "$R"; exit $? ;; esac
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
ab_patch $P $R 60 fp8 cuda_sm120_e4m3:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 $R fp8; kernels_restore
phase_ab $P "$R" "draft|split|^=="
