#!/usr/bin/env bash
# Call 1: the 12-warp 32-row e4m3 form (this tree) for correctness (debug library: every mbarrier wait traps after
# 2 s) and timing, then the previous form (variant-wide.patch reversed) timed in the same call.
set -uo pipefail
D=data/results/h200/2026-12-04-e4m3-32-wide
source scripts/session_lib.sh; mkdir -p "$OUT"; WHEELS=.whl-sglang install_wheels || exit 1
write_provenance "bash $D/call1.sh" "$OUT/provenance-call1.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$OUT/gpu.txt"
KDT_DEBUG_WAITS=1 timeout 240 python3 scripts/e4m3_lab.py --out "$OUT/e4m3-lab-wide.json" --random 40 \
  --impls cuda_sm120_e4m3_32 2>&1 | grep -v Warning | tail -4
KDT_E4M3_TIMING=1 timeout 150 python3 $D/ab_timing.py "$OUT/ab-wide.json" 2>&1 | tail -12
git apply -R $D/variant-wide.patch && echo "previous form restored"
KDT_E4M3_TIMING=1 timeout 150 python3 $D/ab_timing.py "$OUT/ab-before.json" 2>&1 | tail -12
