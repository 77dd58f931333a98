#!/usr/bin/env bash
# Device calls (issue 52, 32 rows over fp8): the 32-row e4m3 form's ring refill writing whole aligned 128-byte lines
# (e4m3-32-refill-aligned.patch, written 2026-12-07, forty-eighth session). Its measurement (bits against main, then
# main against the patch interleaved at the four ratio shapes), its reasoning, prediction and rule are in
# e4m3-refill-aligned-run.sh, which measures it in one call beside the 64-row form's; this script runs its gates:
#   (none)          the measurement: e4m3-refill-aligned-run.sh, which needs the same prebuilt libraries
#   gates           the e4m3 forms' gates with this patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3_32 with it (~1.5 minutes)
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-32-refill-aligned.patch).
#   bash docs/experiments/e4m3-32-refill-aligned-run.sh [gates|gates-sanitize]
set -uo pipefail
[ $# = 0 ] && exec bash docs/experiments/e4m3-refill-aligned-run.sh
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-refill-aligned-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-32-refill-aligned.patch
case "$1" in
  gates) git apply $P || exit 1
         gate_tests "$R/gates-32-aligned" tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
           -k "e4m3 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" ;;
  gates-sanitize) git apply $P || exit 1
                  SANITIZE_TIMEOUT=50 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$R" \
                    -32-aligned ;;
  *) echo "e4m3-32-refill-aligned-run.sh: expected nothing, gates or gates-sanitize, found '$1'"; exit 2 ;;
esac
pack
