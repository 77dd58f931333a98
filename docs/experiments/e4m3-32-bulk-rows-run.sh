#!/usr/bin/env bash
# Two device calls (issue 52, the 32-row fp8 target). The patch fills the 32-row e4m3 form's ring with one
# cp.async.bulk per 576-byte key row (lanes 0-7 of each PV warp, 8 rows each, completing the slot's FULL mbarrier by
# bytes) into rows pitched 592 bytes apart without a swizzle, instead of 9 16-byte cp.async per PV thread into
# swizzled 576-byte rows (BULK, a constant; at false every kernel's SASS is main's).
#   call 1: bash docs/experiments/e4m3-32-bulk-rows-run.sh          main and the patch, each alone and with the MMA
#           ablations A+B of data/results/h200/2026-12-04-e4m3-32-wide/ (the load path alone), timing library; then
#           the patch's correctness (debug-wait build, edge grid + 40 random fp8 cases)
#   call 2: bash docs/experiments/e4m3-32-bulk-rows-run.sh gates    the gates, where call 1 beat main by 3% at B = 8,
#           L = 200k: the fp8 GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against
#           SGLang) and the four sanitizers
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step; the device returns at most 8 files).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-bulk-rows-run.sh $*"
P=docs/experiments/e4m3-32-bulk-rows.patch; W=data/results/h200/2026-12-04-e4m3-32-wide; R=/tmp/r
mkdir -p $R; mv "$OUT"/*.json $R/
pack() { tar -C $R -czf "$OUT/results.tar.gz" .; }
cp -r kernels /tmp/kernels0
restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }
time_cfg() {  # NAME: the 32-row form at its shapes and 128 rows, the bf16 pick (cuda_sm120) beside it
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 -m kdtree_lab bench --out "$R/bulk-$1.json" --impl cuda_sm120_e4m3_32,cuda_sm120 \
    --shape 8,200000,4,8,fp8 --shape 1,200000,4,8,fp8 --shape 8,32768,4,8,fp8 --shape 1,32768,4,8,fp8 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,4,8 2>&1 | grep -E "^cuda" | cut -c1-80
  pack
}
ab() { git apply $W/ablate-one-q-term.patch && git apply $W/ablate-no-pv-mma.patch; }
if [ "${1:-}" = gates ]; then
  git apply $P || exit 1
  timeout 320 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3_32 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$R/gates-bulk.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  pack
  SANITIZE_TIMEOUT=50 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$R" -bulk
  pack
  exit 0
fi
time_cfg main
restore; ab || exit 1; time_cfg main-AB
restore; git apply $P || exit 1; time_cfg bulk
ab || exit 1; time_cfg bulk-AB
restore; git apply $P
KDT_DEBUG_WAITS=1 timeout 200 python3 scripts/e4m3_lab.py --out "$R/e4m3-lab-bulk.json" --random 40 \
  --impls cuda_sm120_e4m3_32 2>&1 | grep -E "accuracy|NaN|stuck|rror"
pack
restore
