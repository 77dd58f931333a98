#!/usr/bin/env bash
# One device call (issue 52, 32 rows over fp8 <= 0.6x the bf16 pick): e4m3-32-v-early.patch (its run script has the
# rotation and the reasons) with each tile's slot refilled as soon as its V is read (e4m3-32-v-early-split.patch;
# written 2026-12-07, fiftieth session): the next step's first tile's slot is refilled before this step's second
# tile's MMAs, the second's after them, each behind its own K_EMPTY wait and a PV barrier (two a step instead of one).
# Same MMAs in the same order: outputs main's bit for bit. SASS of the timing libraries (`scripts/sass_census.py`):
# sm_90a PV loop 562 -> 556 instructions (issue 1,495 -> 1,368 cycles), sm_120a 576 -> 565 (2,101 -> 2,060); QK as
# v-early's; registers 240 / 248, no spill; the synchronisation model passes with it
# (data/results/cpu/2026-12-08-e4m3-32-v-early-model/, --v-early-split). A step's tiles both have to arrive (the QK
# warps of an m-tile meet at the pair barrier), and the second tile's refill goes when v-early's does, so the gain
# over v-early is the earlier tile's bytes out of the second's way.
# Prediction (before the run): outputs identical; against main B = 8, L = 200k and 32k -0.5 to -2.5%, B = 1 within
# +-1%; against v-early within +-1%; racecheck and synccheck clean. Rule: as v-early's (two of the four ratio shapes
# >= 0.5% faster than main in >= 6 of 8 rounds, none slower by more than +0.3%); where both meet it, the faster at
# B = 8, 200k takes the gates.
#   (none)          measured with e4m3-32-v-early.patch by its run script (this one runs it)
#   gates           the e4m3 forms' gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3_32 with it (~1 minute)
# Prebuild: .prebuilt-next (docs/experiments/README.md item 1). Carry .whl-kernel and it (the measurement needs no
# SGLang); the gates .whl-sglang and it. Results in $OUT/results.tar.gz.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-v-early-split-run.sh
#   bash docs/experiments/e4m3-32-v-early-split-run.sh gates|gates-sanitize
set -uo pipefail
case "$*" in ""|gates|gates-sanitize) ;;
  *) echo "e4m3-32-v-early-split-run.sh: expected nothing, gates or gates-sanitize, found '$*'"; exit 2 ;;
esac
[ -z "${1:-}" ] && exec bash docs/experiments/e4m3-32-v-early-run.sh  # the measurement of the three patches
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-v-early-split-run.sh $*"
R=$KDT_PACK_DIR; PP=docs/experiments/e4m3-32-v-early-split.patch
e4m3_gates "$1" $PP vsplit "$R" cuda_sm120_e4m3_32; exit $?
