#!/usr/bin/env bash
# One device call (issue 52, 32 rows over fp8 <= 0.6x the bf16 pick): the 32-row e4m3 form's refill without its
# K_EMPTY mbarriers (e4m3-32-previous-p.patch; written 2026-12-07, forty-ninth session, after e4m3-32-step64.patch
# landed that day). The 64-key steps refill a step's two slots once the QK warps hold the step's scores (K_EMPTY, 64
# arrivals a tile). The QK warps already read a step's K before they publish P of the step before (step s + 1's
# MMAs sit in one basic block with step s's exponentials, ahead of P(s)), and the PV warps took that P a step
# earlier: so the refill may go as soon as every PV warp holds the step's V, as the 64-row form's refill does behind
# P(t - 1), with P(0) taken before the loop (step 0's K is read before it). Same bytes, same arithmetic, so the
# outputs must be main's bit for bit. The PV loop loses two mbarrier waits a step and the QK loop four arrivals: SASS
# of the timing libraries (`scripts/sass_census.py`), sm_90a QK 425 -> 420 instructions a step (issue 1,261 ->
# 1,232), PV 562 -> 547 (1,495 -> 1,485); sm_120a QK 557 -> 555, PV 576 -> 572; no spill (254 / 244-247 registers).
# The model of the step's synchronisation (data/results/cpu/2026-12-07-e4m3-32-step64-model/model.py --previous-p)
# passes every tile count and schedule it tries.
# Prediction (before the run): outputs identical; B = 8, L = 200k and 32k -0.3 to -1.5% (the refill issued after
# the V reads instead of after the QK warps' next scores, and fewer mbarrier operations), B = 1 within +-0.5% (its
# steps wait less on the refill); racecheck and synccheck clean. Rule: where identical, two of the four ratio shapes
# >= 0.5% faster in >= 6 of 8 rounds and none slower by more than +0.3%, its gates (`gates`, `gates-sanitize`) and
# it lands; else not (the K_EMPTY form stays).
#   (none)          digests of main and the patch (59 fp8 cases, the 32-row form), the interleaved A/B at issue 52's
#                   four ratio shapes and B = 1, 64k, racecheck and synccheck (~3 minutes warm)
#   gates           the e4m3 forms' gates with the patch (~4 minutes on an H100)
#   gates-sanitize  the four sanitizers on cuda_sm120_e4m3_32 with it (~1 minute)
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-32-previous-p.patch --out .prebuilt-prevp (four
# libraries). Carry .whl-kernel and .prebuilt-prevp (the measurement needs no SGLang); the gates .whl-sglang and
# .prebuilt-prevp. Results in $OUT/results.tar.gz.
#   WHEELS=.whl-kernel bash docs/experiments/e4m3-32-previous-p-run.sh
#   bash docs/experiments/e4m3-32-previous-p-run.sh gates|gates-sanitize
set -uo pipefail
case "$*" in ""|gates|gates-sanitize) ;;
  *) echo "e4m3-32-previous-p-run.sh: expected nothing, gates or gates-sanitize, found '$*'"; exit 2 ;;
esac
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-previous-p-run.sh $*"
R=$KDT_PACK_DIR; PP=docs/experiments/e4m3-32-previous-p.patch
case "${1:-}" in gates|gates-sanitize) e4m3_gates "$1" $PP prevp "$R" cuda_sm120_e4m3_32; exit $? ;; esac
kernels_snapshot
step "libraries and digest, main"; build_libs main "$R"; digest main cuda_sm120_e4m3_32 "$R"
git apply $PP || exit 1
step "libraries and digest, prevp"; build_libs prevp "$R"; digest prevp cuda_sm120_e4m3_32 "$R"
python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-cuda_sm120_e4m3_32.json" \
  "$R/digest-prevp-cuda_sm120_e4m3_32.json" > "$R/compare-prevp.txt" 2>&1
echo "prevp: $(tail -1 "$R/compare-prevp.txt")"
step "sanitizers on cuda_sm120_e4m3_32, prevp"
SANITIZE_TIMEOUT=90 run_sanitizers "racecheck synccheck" cuda_sm120_e4m3_32 "$R" "-prevp"
kernels_restore
timing_ab "the 32-row e4m3 form" cuda_sm120_e4m3_32 main prevp "$R" 1,200000,4,8,fp8 8,200000,4,8,fp8 \
  1,32768,4,8,fp8 8,32768,4,8,fp8 1,65536,4,8,fp8
pack
