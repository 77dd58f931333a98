#!/usr/bin/env bash
# One device call (issue 18, v5's next step): each warpgroup's PV over its own tile takes P from its registers
# (wgmma with A in registers) instead of shared memory, and the warpgroup barrier before it goes
# (v5-local-p.patch). Both libraries built first (main, then the patch); on the patch the wgmma tests (-x: a wrong
# A fragment shows in the small case first), the default's (v5's) parity tests and racecheck / synccheck on v5; then main
# and the patch timed in one process by kdtree_lab.checks.ab_interleave (graphs over the same inputs, rounds
# alternating A, B / B, A; it also says whether the two wrote the same bits), at the compute-bound shapes the
# prediction names and one memory-bound shape. ~4-5 minutes. Carry .whl-sglang (and .prebuilt where it holds the
# libraries). Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/v5-local-p-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/v5-local-p-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/v5-local-p.patch
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
step "wgmma tests, patch"
timeout -s INT 150 python3 -m pytest -q -x -m gpu tests/test_gpu_wgmma.py --junitxml="$R/gpu-wgmma-patch.xml" \
  -p no:cacheprovider 2>&1 | tail -3
step "parity, patch"
timeout -s INT 200 python3 -m pytest -q -m gpu tests/test_gpu.py -k "test_cuda_" \
  --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -3
SANITIZE_TIMEOUT=60 run_sanitizers "racecheck synccheck" cuda_wgmma_v5 "$R" -patch  # scripts/session_lib.sh
kernels_restore
step "interleaved A/B: v5, main (A) and the patch (B)"
timeout 240 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-main.json" --lib-b "$R/build-patch.json" \
  --impl cuda_wgmma_v5 --shape 1,200000,16,8 --shape 8,200000,16,8 --shape 1,32768,64,8 --shape 1,32768,16,16 \
  --shape 8,32768,4,8 --rounds 8 --out "$R/ab-interleave-v5.json" 2>&1 | tail -6
pack
