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
case "$*" in ""|gates|gates-sanitize) ;;
  *) echo "e4m3-32-refill-aligned-run.sh: expected nothing, gates or gates-sanitize, found '$*'"; exit 2 ;;
esac
[ $# = 0 ] && exec bash docs/experiments/e4m3-refill-aligned-run.sh
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-refill-aligned-run.sh $*"
e4m3_gates "$1" docs/experiments/e4m3-32-refill-aligned.patch 32-aligned "$KDT_PACK_DIR" cuda_sm120_e4m3_32
