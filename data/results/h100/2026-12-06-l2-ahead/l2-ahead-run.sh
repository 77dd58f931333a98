#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline and the 32-row ratios): the rows a refill will read, prefetched into L2
# a few tiles before it (l2-ahead.patch): in the 64-row and 32-row e4m3 forms' PV warps (two 32-key tiles ahead) and
# the bf16 role split's (four 16-key tiles ahead), each row's lines by `prefetch.global.L2` from the lanes that refill
# it, the kv_indices entry's low word loaded a step before. A hint only: the outputs must be main's bits. Both
# libraries first; on the patch the three forms' smoke, their parity tests (edge grid + 500 random each, both pools)
# and memcheck over them (the prefetches' addresses); then main (A) and the patch (B) in one process each through
# kdtree_lab.checks.ab_interleave (eight rounds alternating A, B / B, A, graphs over the same inputs; it says whether
# the two wrote the same bits), on the timing libraries for the e4m3 forms. ~6 minutes with .prebuilt. Carry
# .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/l2-ahead.patch). Results in
# $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/l2-ahead-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/l2-ahead-run.sh"
R=$KDT_PACK_DIR; P=${PATCH:-docs/experiments/l2-ahead.patch}
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
step "smoke, patch"
timeout 80 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3,cuda_sm120_e4m3_32 --smoke 40 --kv-dtype fp8 \
  --shapes mem --nsplit 131 --out "$R/smoke-patch-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_roles --smoke 40 --shapes mem --nsplit 131 \
  --out "$R/smoke-patch.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
step "parity, patch"
timeout -s INT 240 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "(fp8_pool_edge and e4m3) or ((sm120_kernel_edge_grid_and_500_random or corrupt_kv_indptr) and roles)" \
  --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -2
SANITIZE_TIMEOUT=120 run_sanitizers memcheck cuda_sm120_e4m3,cuda_sm120_e4m3_32,cuda_sm120_roles "$R" -patch
pack
kernels_restore
step "interleaved A/B: main (A) and the patch (B)"
timeout 150 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --shape 1,32768,64,8,fp8 --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3.json" 2>&1 | tail -5
timeout 120 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3_32 --shape 1,200000,4,8,fp8 --shape 8,200000,4,8,fp8 \
  --shape 1,32768,4,8,fp8 --shape 8,32768,4,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3-32.json" 2>&1 | tail -5
pack
roles_ab main "$R"  # scripts/session_lib.sh: the bf16 role split, to ab-interleave-main-patch.json
