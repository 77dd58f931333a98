#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): what each part of the e4m3 forms' Q prologue costs, by taking the parts
# away one at a time (q-prologue-ablation.patch; outputs wrong from mode 1 on, timings only; not meant to land). Per
# mode (Q_ABLATE in kernels/mma_sync/e4m3_rows.cuh, set here): 0 main; 1 the terms pass without its conversion; 2
# without its loads either; 3 the max pass without its loads too. For each, the phase library's stamps
# (kdtree_lab.checks.phase_clocks, timing library) of both e4m3 forms at B = 1, L = 128, H = 8 (the 32-row form at
# N = 4, the 64-row form at N = 16): when the QK warps' prologue ends and when the split kernel ends (~1.5 minutes a
# mode, most of it the build).
#   bash docs/experiments/q-prologue-ablation-run.sh
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/q-prologue-ablation-run.sh $*"
P=docs/experiments/q-prologue-ablation.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
kernels_snapshot
for mode in ${MODES:-0 1 2 3}; do
  kernels_restore; git apply $P || exit 1
  sed -i "s/constexpr int Q_ABLATE = 0;/constexpr int Q_ABLATE = $mode;/" kernels/mma_sync/e4m3_rows.cuh
  grep -q "constexpr int Q_ABLATE = $mode;" kernels/mma_sync/e4m3_rows.cuh || { echo "mode $mode not set"; exit 1; }
  step "mode $mode"
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-mode$mode.json"
  echo "phase build rc=$?"
  for f in "cuda_sm120_e4m3_32 1,128,4,8" "cuda_sm120_e4m3 1,128,16,8"; do
    set -- $f
    KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab.checks.phase_clocks --impl $1 --shape $2 \
      --out "$R/phase-$1-mode$mode.json" 2>&1 | grep -E "^==|^mark|^prologue|^first|^done|split kernel ends|rror" \
      | cut -c1-160
  done
  pack
done
kernels_restore
