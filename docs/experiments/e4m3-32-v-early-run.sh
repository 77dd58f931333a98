#!/usr/bin/env bash
# One device call (issue 52, 32 rows over fp8 <= 0.6x the bf16 pick): the 32-row e4m3 form's PV warps read the next
# step's V while this step's MMAs issue (e4m3-32-v-early.patch; written 2026-12-07, fiftieth session, after that day's
# profile, data/results/h100/2026-12-07-previous-p-and-ncu-32/: the QK warps wait for the ring 23-27% of their loop's
# samples because a step's slots are refilled only after the PV warps' MMAs of the step before and both tiles' V
# reads). The loop is rotated: after P(st), tile 2 st's 32 MMAs, then tile 2 st + 2's V fragments into the registers
# those MMAs freed (they issue beside tile 2 st + 1's MMAs), then tile 2 st + 1's MMAs, tile 2 st + 3's V, and the
# refill of step st + 1's slots; step 0's V and refill before the loop. Same MMAs in the same order: outputs main's bit
# for bit. The waits it adds before tile 2 st + 1's MMAs are already met (the QK warps waited for step st + 1's tiles
# before they published P(st)). SASS of the timing libraries (`scripts/sass_census.py`): sm_90a PV loop 562 -> 547
# instructions (issue 1,495 -> 1,422 cycles), QK 425 (1,261 -> 1,227); sm_120a PV 576 -> 588 (2,101 -> 2,147), QK
# 557 -> 559; registers 240 / 244, no spill. The synchronisation model passes with it
# (data/results/cpu/2026-12-08-e4m3-32-v-early-model/, --v-early).
# Prediction (before the run): outputs identical; B = 8, L = 200k and 32k -0.5 to -2% (the refill one tile's V reads
# sooner), B = 1 within +-1%; racecheck and synccheck clean. Rule: where identical, two of the four ratio shapes >= 0.5%
# faster in >= 6 of 8 rounds and none slower by more than +0.3%, its gates (`gates`, `gates-sanitize`) and it lands;
# else not. (The sm_120a PV loop is longer, the sm_90a one shorter: the H100 times sm_90a code; the card's issue
# estimate is +2% on the PV loop, which holds the refill, so a landing says so.)
#   (none)          digests of main, the patch, e4m3-32-v-early-split.patch and e4m3-32-v-early-split-ring5.patch
#                   (59 fp8 cases each, the 32-row form), racecheck and synccheck on each, each against main in the
#                   interleaved A/B at issue 52's four ratio shapes and B = 1, 64k (~4.5 minutes warm)
#   gates           the e4m3 forms' gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3_32 with it (~1 minute)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-32-v-early.patch --out .prebuilt-vearly (four
# libraries; or .prebuilt-next with the split's too, docs/experiments/README.md item 1). Carry .whl-kernel and that
# folder (the measurement needs no SGLang); the gates .whl-sglang and that folder. Results in $OUT/results.tar.gz.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-v-early-run.sh
#   bash docs/experiments/e4m3-32-v-early-run.sh gates|gates-sanitize
set -uo pipefail
case "$*" in ""|gates|gates-sanitize) ;;
  *) echo "e4m3-32-v-early-run.sh: expected nothing, gates or gates-sanitize, found '$*'"; exit 2 ;;
esac
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-v-early-run.sh $*"
R=$KDT_PACK_DIR; PP=docs/experiments/e4m3-32-v-early.patch
case "${1:-}" in gates|gates-sanitize) e4m3_gates "$1" $PP vearly "$R" cuda_sm120_e4m3_32; exit $? ;; esac
kernels_snapshot
step "libraries and digest, main"; build_libs main "$R"; digest main cuda_sm120_e4m3_32 "$R"
for v in vearly vsplit vring5; do  # e4m3-32-v-early.patch, then -split.patch and -split-ring5.patch (their scripts)
  pp=$PP; [ $v = vsplit ] && pp=docs/experiments/e4m3-32-v-early-split.patch
  [ $v = vring5 ] && pp=docs/experiments/e4m3-32-v-early-split-ring5.patch
  git apply $pp || exit 1
  step "libraries and digest, $v"; build_libs $v "$R"; digest $v cuda_sm120_e4m3_32 "$R"
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-cuda_sm120_e4m3_32.json" \
    "$R/digest-$v-cuda_sm120_e4m3_32.json" > "$R/compare-$v.txt" 2>&1
  echo "$v: $(tail -1 "$R/compare-$v.txt")"
  step "sanitizers on cuda_sm120_e4m3_32, $v"
  SANITIZE_TIMEOUT=90 run_sanitizers "racecheck synccheck" cuda_sm120_e4m3_32 "$R" "-$v"
  kernels_restore
done
for v in vearly vsplit vring5; do
  timing_ab "the 32-row e4m3 form" cuda_sm120_e4m3_32 main $v "$R" 1,200000,4,8,fp8 8,200000,4,8,fp8 \
    1,32768,4,8,fp8 8,32768,4,8,fp8 1,65536,4,8,fp8
done
pack
