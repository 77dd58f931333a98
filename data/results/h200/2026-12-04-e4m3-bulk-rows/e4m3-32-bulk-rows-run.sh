#!/usr/bin/env bash
# Two device calls (issue 52, the fp8 targets). The patch fills the e4m3 forms' rings with one cp.async.bulk per
# 576-byte key row (bulk_fill in roles_common.cuh: lanes of each PV warp, one row each, completing the slot's FULL
# mbarrier by bytes) into common/layout.cuh's e4m3_bulk rows (592 bytes apart, no swizzle), instead of 16-byte
# cp.async into swizzled 576-byte rows. BULK is a constant per form: on in the 32-row form, off in the 64-row form
# (at true ptxas spills in its QK loop on sm_120a); both off is main's SASS byte for byte.
#   call 1: bash data/results/h200/2026-12-04-e4m3-bulk-rows/e4m3-32-bulk-rows-run.sh          main and the patch, each alone and with the MMA
#           ablations A+B of data/results/h200/2026-12-04-e4m3-32-wide/ (the 32-row load path alone); then the
#           64-row form's BULK on as well (spilling); timing library; then correctness of both forms at BULK on
#           (debug-wait build, edge grid + 40 random fp8 cases each)
#   call 2: bash data/results/h200/2026-12-04-e4m3-bulk-rows/e4m3-32-bulk-rows-run.sh gates    the gates, where call 1 beat main by 3% at B = 8,
#           L = 200k: the fp8 GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against
#           SGLang) and the four sanitizers
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step; the device returns at most 8 files).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-bulk-rows/e4m3-32-bulk-rows-run.sh $*"
P=data/results/h200/2026-12-04-e4m3-bulk-rows/e4m3-32-bulk-rows.patch; W=data/results/h200/2026-12-04-e4m3-32-wide; R=/tmp/r
mkdir -p $R; mv "$OUT"/*.json $R/
pack() { tar -C $R -czf "$OUT/results.tar.gz" .; }
cp -r kernels /tmp/kernels0
restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }
time_cfg() {  # NAME: both e4m3 forms at their shapes, the bf16 pick (cuda_sm120) beside them at 32 rows
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 -m kdtree_lab bench --out "$R/bulk-$1.json" \
    --impl cuda_sm120_e4m3_32,cuda_sm120_e4m3,cuda_sm120 --shape 8,200000,4,8,fp8 --shape 1,200000,4,8,fp8 \
    --shape 8,32768,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
    --shape 8,200000,4,8 2>&1 | grep -E "^cuda" | cut -c1-80
  pack
}
bulk64() { sed -i "s/static constexpr bool BULK = false;/static constexpr bool BULK = true;/" \
  kernels/mma_sync/verify_sm120_e4m3.cuh; }
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
restore; git apply $P; bulk64; time_cfg bulk-both
KDT_DEBUG_WAITS=1 timeout 200 python3 scripts/e4m3_lab.py --out "$R/e4m3-lab-bulk.json" --random 40 \
  --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 2>&1 | grep -E "accuracy|NaN|stuck|rror"
pack
restore
