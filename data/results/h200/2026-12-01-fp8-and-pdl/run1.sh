#!/usr/bin/env bash
# Device call 1 of 2026-12-01 (7th session): combine-pdl-late + fp8-kernels patches applied together (uncommitted).
set -uo pipefail
source scripts/device_prologue.sh "bash run1.sh (combine-pdl-late.patch + fp8-kernels.patch on 94fa1f3)"
SECONDS=0
timeout 200 python3 scripts/kernel_profile.py --configs 1,3 --smoke 40 --kv-dtype fp8,bf16 --smoke-configs 1,3 \
  --shapes mem,headline,deploy --out "$OUT/profile-fp8.json" 2>&1 | grep -E "smoke|rror" | cut -c1-300
echo "profile rc=${PIPESTATUS[0]} t=$SECONDS"
timeout 120 python3 -m kdtree_lab bench --preset fp8 --impl cuda,cuda_sm120 --out "$OUT/bench-fp8.json" > "$OUT/bench-fp8.log" 2>&1
echo "bench fp8 rc=$? t=$SECONDS"; tail -3 "$OUT/bench-fp8.log"
timeout 100 python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --out "$OUT/bench-quick-pdl-late.json" > /dev/null 2>&1
echo "bench pdl rc=$? t=$SECONDS"
KDT_NO_PDL=1 timeout 100 python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --out "$OUT/bench-quick-nopdl.json" \
  > /dev/null 2>&1; echo "bench nopdl rc=$? t=$SECONDS"
