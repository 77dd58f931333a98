#!/usr/bin/env bash
# Call 4: the kv_indices prefetch distance of both e4m3 forms (PREFETCH in their configurations, set here by sed:
# 32-row / 64-row), timed per setting; 1 / 1 is one tile ahead as main, but with the fetch issued before the
# tile's cp.async (IndexQueue::pop as load_tile's argument), not after as in main.
set -uo pipefail
D=data/results/h200/2026-12-04-e4m3-32-wide
source scripts/session_lib.sh; mkdir -p "$OUT"; WHEELS=.whl-gpu install_wheels || exit 1
write_provenance "bash $D/call4.sh" "$OUT/provenance-call4.json"
for pair in 1:1 4:2 8:4 2:8; do
  a=${pair%:*}; b=${pair#*:}
  sed -i "s/static constexpr int PREFETCH = [0-9]*;/static constexpr int PREFETCH = $a;/" kernels/mma_sync/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr int PREFETCH = [0-9]*;/static constexpr int PREFETCH = $b;/" kernels/mma_sync/verify_sm120_e4m3.cuh
  KDT_E4M3_TIMING=1 timeout 130 python3 $D/prefetch.py "$OUT/prefetch-$a-$b.json" "pf$a/$b" 2>&1 | grep "B="
done
