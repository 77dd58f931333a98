#!/usr/bin/env bash
# Call 5: main against the 32-row form with kv_indices fetched 8 tiles ahead (variant-prefetch.patch), timed in one
# call (timing library); then the gates on the patched tree: the GPU tests of the fp8 configurations (edge grid +
# 500 random, 23 capture sizes x 100 replays, the hook against SGLang) and the four sanitizers.
set -uo pipefail
D=data/results/h200/2026-12-04-e4m3-32-wide
source scripts/session_lib.sh; mkdir -p "$OUT"; WHEELS=.whl-sglang install_wheels || exit 1
write_provenance "bash $D/call5.sh" "$OUT/provenance-call5.json"
git apply -R $D/variant-prefetch.patch && echo "main restored"
KDT_E4M3_TIMING=1 timeout 100 python3 $D/ablate.py "$OUT/ab5-main.json" main 2>&1 | grep B=
git apply $D/variant-prefetch.patch && echo "prefetch applied"
KDT_E4M3_TIMING=1 timeout 100 python3 $D/ablate.py "$OUT/ab5-prefetch.json" prefetch8 2>&1 | grep B=
timeout 330 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
  -k "e4m3_32 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$OUT/gates.xml" -p no:cacheprovider \
  > "$OUT/gates.log" 2>&1; echo "gates rc=$?"; tail -2 "$OUT/gates.log"
SANITIZE_TIMEOUT=55 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$OUT"
