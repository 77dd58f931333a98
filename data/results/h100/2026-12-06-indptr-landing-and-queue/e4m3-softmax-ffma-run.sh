#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): the e4m3 forms' softmax on raw scores, the row scale taken once per
# row for the maximum and inside each exponent's FFMA (e4m3-softmax-ffma.patch), the Q pass folding the logit
# scale's sign into Q's row scale so that scale > 0. The exponents round once instead of twice, so the outputs are
# not main's bits: correctness from the patch's own tests, not a digest: the smoke of both e4m3 forms (kernel_profile,
# e4m3's tolerance) and the fp8-pool parity tests of both (edge grid + 500 random each); then main and the patch in
# one process through kdtree_lab.checks.ab_interleave on the timing libraries (eight rounds alternating A, B / B, A;
# it says the bits differ, as expected, and exits 1: the timings stand) at both forms' long shapes and one short
# call; last, issue 51's fresh draw against SGLang's own fp8 kernel on the two forms (scripts/fp8_accuracy.py --fresh
# 60 --impls: the whole draw over all ten configurations took 148 s on an H200). ~6-7 minutes with .prebuilt holding
# the libraries. Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/e4m3-softmax-ffma-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-softmax-ffma-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-softmax-ffma.patch
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries"
build_libs main "$R"; git apply $P || exit 1; build_libs patch "$R"
step "smoke, patch"
timeout 80 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3,cuda_sm120_e4m3_32 --smoke 40 --kv-dtype fp8 \
  --shapes mem --nsplit 131 --out "$R/smoke-patch-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
step "fp8 parity, patch"
timeout -s INT 200 python3 -m pytest -q -m gpu tests/test_gpu.py -k "fp8_pool_edge and e4m3" \
  --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -2
pack
step "interleaved A/B: main (A) and the patch (B), timing libraries"
timeout 150 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --shape 1,32768,64,8,fp8 --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3.json" 2>&1 | tail -5
timeout 120 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3_32 --shape 1,200000,4,8,fp8 --shape 8,200000,4,8,fp8 \
  --shape 1,32768,4,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3-32.json" 2>&1 | tail -4
pack
step "issue 51's fresh draw, the two forms, patch"
timeout 200 python3 scripts/fp8_accuracy.py --fresh 60 --impls cuda_sm120_e4m3,cuda_sm120_e4m3_32 \
  --out "$R/fp8-fresh-patch.json" 2>&1 | tee "$R/fp8-fresh-patch.log" | grep -E "draw|e4m3|FAIL|rows in" | cut -c1-220
kernels_restore; pack
