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
if [ "${1:-}" = gates ]; then  # the parity and graph half (the sanitizers: gates-sanitize; clean on 2026-12-05)
  git apply $P || exit 1
  gate_tests "$R/gates-vfirst64" tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3 or fp8_pool or (sglang_on_the_gpu_grid and fp8)"
  pack
  exit 0
fi
if [ "${1:-}" = gates-sanitize ]; then
  git apply $P || exit 1
  SANITIZE_TIMEOUT=50 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3 "$R" "-vfirst64"
  pack
  exit 0
fi
kernels_snapshot
time64() {  # NAME: the 64-row form at its shapes (timing library)
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/vfirst64-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 --shape 1,32768,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}
for i in 1 2 3; do
  kernels_restore; time64 main-$i
  git apply $P || exit 1; time64 vfirst-$i
done
kernels_restore
