#!/usr/bin/env bash
# Device calls (issue 52): the 64-row e4m3 form's PV warps take tile t's V and refill its slot before they wait for
# P(t) (e4m3-64-vfirst.patch, the landing form: no switch). Its SASS is byte for byte that of the twenty-first
# session's measured setting, data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first.patch at "4 0 1" (checked on
# sm_120a and sm_90a, normal and timing library, scripts/sass_identity.py), so those measurements are this patch's.
#   call 1: bash docs/experiments/e4m3-64-vfirst-run.sh          main and the patch three times each in alternation
#           at the 64-row form's shapes (timing library; the build cache holds both libraries, so a switch costs no
#           build) (~4 minutes)
#   call 2: bash docs/experiments/e4m3-64-vfirst-run.sh gates    where all three pairs agree in sign at the headline
#           (they did on 2026-12-05: -4 to -5%): the fp8 and e4m3 parity and graph tests (edge grid + 500 random,
#           23 capture sizes x 100 replays, calls back to back), the hook against SGLang over fp8 (~9 minutes);
#           gates-sanitize: the four sanitizers on cuda_sm120_e4m3 (clean on 2026-12-05). Then land it:
#           git apply docs/experiments/e4m3-64-vfirst.patch, and regenerate the issue-fp8 grid in a call of its own
#           (KDT_E4M3_TIMING=1 python3 -m kdtree_lab bench --preset issue-fp8), readme tables, docs.
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-64-vfirst-run.sh $*"
P=docs/experiments/e4m3-64-vfirst.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P vfirst64 "$R"; exit $? ;; esac
kernels_snapshot
for i in 1 2 3; do
  kernels_restore; time_e4m3_64 "$R/vfirst64-main-$i.json"
  git apply $P || exit 1; time_e4m3_64 "$R/vfirst64-vfirst-$i.json"
done
kernels_restore
