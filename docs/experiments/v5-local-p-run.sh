#!/usr/bin/env bash
# One device call (issue 18, v5's next step): each warpgroup's PV over its own tile takes P from its registers
# (wgmma with A in registers) instead of shared memory, and the warpgroup barrier before it goes. Main first (GPU
# time of v4 and v5 on the five profile shapes), then the patch applied, rebuilt, the wgmma tests (the small case
# first: a wrong A fragment shows there), the same profile, the default's parity tests and the sanitizers on v5.
# Results packed to $OUT/results.tar.gz. Carry .whl with data/results moved out of the tree (64 MiB).
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/v5-local-p-run.sh"
mkdir -p "$OUT/r"; mv "$OUT"/*.json "$OUT/r/" 2>/dev/null
timeout 120 python3 scripts/kernel_profile.py --configs cuda_wgmma,cuda_wgmma_v5 --smoke 0 --out "$OUT/r/profile-main.json" 2>&1 | grep -c config
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
git apply docs/experiments/v5-local-p.patch && python3 -m kdtree_lab build --json > "$OUT/r/build-patch.json"
echo "patched build rc=$?"
timeout 120 python3 -m pytest -q -x tests/test_gpu_wgmma.py --junitxml="$OUT/r/gpu-wgmma-patch.xml" \
  -p no:cacheprovider 2>&1 | tail -3
timeout 120 python3 scripts/kernel_profile.py --configs cuda_wgmma,cuda_wgmma_v5 --smoke 0 --out "$OUT/r/profile-patch.json" 2>&1 | grep -c config
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
timeout 150 python3 -m pytest -q -m gpu tests/test_gpu.py -k "test_cuda_ or fp8_pool_edge" \
  --junitxml="$OUT/r/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -3
SANITIZE_TIMEOUT=60 run_sanitizers "racecheck synccheck" cuda_wgmma_v5 "$OUT/r" -patch  # scripts/session_lib.sh
tar -C "$OUT/r" -czf "$OUT/results.tar.gz" .
