#!/usr/bin/env bash
# One device call (issue 18): the faster combine with programmatic dependent launch triggered at each split
# kernel's epilogue (the version measured on 2026-12-01 triggered at the start and lost 4-90 us). Smoke of the
# sm_120 kernel and v4 with it, then the quick bench with PDL and without (KDT_NO_PDL=1), same build.
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/combine-pdl-late-run.sh"
timeout 120 python3 scripts/kernel_profile.py --configs 1,3 --smoke 20 --shapes mem --out "$OUT/smoke.json" 2>&1 \
  | grep -E "smoke|rror" | cut -c1-200; echo "smoke rc=${PIPESTATUS[0]}"
python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --out "$OUT/bench-quick-pdl-late.json" > /dev/null 2>&1
echo "bench pdl rc=$?"
KDT_NO_PDL=1 python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --out "$OUT/bench-quick-nopdl.json" \
  > /dev/null 2>&1; echo "bench nopdl rc=$?"
