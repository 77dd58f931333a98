#!/usr/bin/env bash
# One device call (issue 52, 32 rows over fp8 <= 0.6x the bf16 pick): e4m3-32-v-early-split.patch (each tile's slot
# refilled once its V is read) with a fifth ring slot (e4m3-32-v-early-split-ring5.patch; written 2026-12-08,
# fiftieth session, from the lead model, data/results/cpu/2026-12-08-e4m3-32-lead-model/). With four slots a step's
# second tile comes into the slot of the second tile two steps before, freed at the end of a PV step; with five it
# comes into the slot of the first tile two steps before, freed half a PV step sooner (after that step's first
# tile's MMAs and V read), and that tile is the one a step waits for. The prefix layout 79,096 -> 97,544 B (the launch
# 86,912 -> 97,544, inside sm_120's 101,376; launch_plan's 32-row configuration and its tests follow). Same MMAs in the
# same order: outputs main's bit for bit. SASS of the timing libraries: sm_90a PV loop 554 instructions (issue
# 1,375), sm_120a 573 (2,067); registers 240 / 246, no spill; the synchronisation model passes with it
# (data/results/cpu/2026-12-08-e4m3-32-v-early-model/, --slots 5 --v-early-split) and fails with K_EMPTY dropped.
# (A fifth slot alone, with 32-key steps, measured 0 to -0.8% on 2026-12-07: there every tile's slot was freed at
# the same point of a PV step.)
# Prediction (before the run; the lead model's -9.9% at B = 8, 200k, see its README): outputs identical; against main
# B = 8, L = 200k and 32k -4 to -10%, B = 1, 200k -2 to -8%, B = 1, 32k within +-1.5%; racecheck and synccheck clean.
# Rule: as v-early's (two of the four ratio shapes >= 0.5% faster than main in >= 6 of 8 rounds, none slower by more
# than +0.3%); of the three variants meeting it, the fastest at B = 8, 200k takes the gates.
#   (none)          measured with e4m3-32-v-early.patch and e4m3-32-v-early-split.patch by e4m3-32-v-early-run.sh
#                   (this one runs it)
#   gates           the e4m3 forms' gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3_32 with it (~1 minute)
# Prebuild: .prebuilt-next (docs/experiments/README.md item 1). Carry .whl-kernel and it (the measurement needs no
# SGLang); the gates .whl-sglang and it. Results in $OUT/results.tar.gz.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-v-early-split-ring5-run.sh
#   bash docs/experiments/e4m3-32-v-early-split-ring5-run.sh gates|gates-sanitize
set -uo pipefail
case "$*" in ""|gates|gates-sanitize) ;;
  *) echo "e4m3-32-v-early-split-ring5-run.sh: expected nothing, gates or gates-sanitize, found '$*'"; exit 2 ;;
esac
[ -z "${1:-}" ] && exec bash docs/experiments/e4m3-32-v-early-run.sh  # the measurement of the three patches
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-v-early-split-ring5-run.sh $*"
R=$KDT_PACK_DIR; PP=docs/experiments/e4m3-32-v-early-split-ring5.patch
e4m3_gates "$1" $PP vring5 "$R" cuda_sm120_e4m3_32; exit $?
