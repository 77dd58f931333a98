#!/usr/bin/env bash
# Call 2: the gather-read ceiling and our kernels over random against sorted KV slots (gather.py), with the 12-warp
# 32-row form (this tree), then the previous form (variant-wide.patch reversed) over both layouts.
set -uo pipefail
D=data/results/h200/2026-12-04-e4m3-32-wide
source scripts/session_lib.sh; mkdir -p "$OUT"; WHEELS=.whl-gpu install_wheels || exit 1
write_provenance "bash $D/call2.sh" "$OUT/provenance-call2.json"
KDT_E4M3_TIMING=1 timeout 200 python3 $D/gather.py "$OUT/gather-wide.json" ceiling cuda_sm120_e4m3_32 cuda_sm120_e4m3 \
  cuda_sm120 2>&1 | grep -v Warn | tail -16
git apply -R $D/variant-wide.patch && echo "previous form restored"
KDT_E4M3_TIMING=1 timeout 150 python3 $D/gather.py "$OUT/gather-before.json" cuda_sm120_e4m3_32 2>&1 | tail -6
