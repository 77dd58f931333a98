#!/usr/bin/env bash
# Device calls (issue 52): the gates of the fourth ring slot's candidate (TAG q11 or q13: docs/experiments/
# e4m3-ring4-TAG.patch; e4m3-ring4-q13-run.sh decides which). The patch changes one kernel,
# verify_sm120_e4m3_kernel<64>, instruction for instruction on both archs and both libraries
# (data/results/cpu/2026-12-07-e4m3-ring4-sass/), so its gates are that form's (scripts/session_lib.sh, e4m3_64_gates):
#   bash docs/experiments/e4m3-ring4-gates-run.sh TAG gates   the fp8 and e4m3 parity and graph tests (edge grid + 500
#       random, 23 capture sizes x 100 replays, splits of 1-8 key tiles on a fresh seed) and the hook against SGLang
#       over fp8 pools (~5.5 minutes on an H100), then two fresh fp8 draws (60 cases, new seeds) in what is left
#   bash docs/experiments/e4m3-ring4-gates-run.sh TAG rest    the four sanitizers on cuda_sm120_e4m3 (its cases include a
#       47-tile split) and five draws (~4 minutes; e4m3-ring4-q13-run.sh runs the sanitizers and three draws for q13)
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-ring4-TAG.patch).
# Results in $OUT/results.tar.gz.
set -uo pipefail
case "${1:-}" in q11|q13) ;; *) echo "e4m3-ring4-gates-run.sh: expected q11 or q13, found '${1:-}'"; exit 2 ;; esac
case "${2:-}" in gates|rest) ;; *) echo "e4m3-ring4-gates-run.sh: expected gates or rest, found '${2:-}'"; exit 2 ;; esac
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-ring4-gates-run.sh $*"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-ring4-$1.patch
draws() {  # COUNT: fresh draws of 60 cases on new seeds (the tree as it is: the patch applied)
  local i
  for i in $(seq 1 "$1"); do
    step "fresh draw $i, $TAG"
    timeout 100 python3 scripts/fp8_accuracy.py --fresh 60 --impls cuda_sm120_e4m3 --out "$R/fp8-fresh-$TAG-$i.json" \
      2>&1 | grep -E "KDT_FRESH_SEED|ours / SGLang|FAIL" | cut -c1-200
    pack
  done
}
sanitizers() {
  step "sanitizers on cuda_sm120_e4m3, $TAG"
  SANITIZE_TIMEOUT=150 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3 "$R" "-$TAG"
  pack
}
TAG=$1
if [ "$2" = gates ]; then
  step "gates, $TAG"; GATE_TIMEOUT=${GATE_TIMEOUT:-450} e4m3_64_gates gates $P "$TAG" "$R" || exit 1
  draws 2
else
  git apply $P || exit 1
  sanitizers; draws 5
fi
