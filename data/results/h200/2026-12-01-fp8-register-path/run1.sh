#!/usr/bin/env bash
# One device call (issue 17 speed / sm_120 users): the fp8 register path of the sm_120 kernel against the landed
# conversion pass. Smoke of the e4m3 variant (config 1 forced: the launcher runs its fp8 variant, 4), the GPU
# fp8 tests for it (edge grid + 500 random, 23 sizes x 100 replays, the hook against SGLang), then the fp8
# preset for cuda_sm120 (bf16 and fp8 rows of the same shapes, one run). Results packed to $OUT/results.tar.gz.
# Carry .whl with data/results moved out of the tree (64 MiB), or a smaller wheel folder as WHEELS=.
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/fp8-register-path-run.sh"
mkdir -p "$OUT/r"; mv "$OUT"/*.json "$OUT/r/" 2>/dev/null
timeout 120 python3 scripts/kernel_profile.py --configs 1 --smoke 40 --kv-dtype fp8,bf16 --smoke-configs 1 \
  --shapes mem,headline --out "$OUT/r/profile.json" 2>&1 | grep -E "smoke|rror" | cut -c1-300
echo "profile rc=${PIPESTATUS[0]}"
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
timeout 260 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
  -k fp8 --junitxml="$OUT/r/gpu-tests.xml" -p no:cacheprovider 2>&1 | tail -5
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
timeout 120 python3 -m kdtree_lab bench --preset fp8 --impl cuda_sm120 --out "$OUT/r/bench-fp8.json" > "$OUT/r/bench.log" 2>&1
echo "bench rc=$?"
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
