#!/usr/bin/env bash
# One device call (issue 17): the e4m3-pool paths of the sm_120 kernel and of v4. Build, 78-case smokes over fp8
# pools with k_scale / v_scale other than 1 (configs 1 and 3 forced: the launcher takes their fp8 variants, 4 and
# 5), then split + combine time of both over the same shapes with a bf16 pool and with an fp8 pool.
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/fp8-kernels-run.sh"
timeout 200 python3 scripts/kernel_profile.py --configs 1,3 --smoke 40 --kv-dtype fp8,bf16 --smoke-configs 1,3 \
  --shapes mem,headline,deploy --out "$OUT/profile-fp8.json" 2>&1 | grep -E "smoke|rror" | cut -c1-300
echo "profile rc=${PIPESTATUS[0]}"
