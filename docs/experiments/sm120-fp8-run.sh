#!/usr/bin/env bash
# One device call (issue 17): the e4m3-pool path of the sm_120 kernel. Build, 78-case smoke over fp8 pools with
# k_scale / v_scale other than 1 (config 1 forced: the launcher takes its fp8 variant, config 4), then split +
# combine time of the sm_120 kernel over the same shapes with a bf16 pool and with an fp8 pool.
set -uo pipefail
source scripts/device_prologue.sh "bash docs/experiments/sm120-fp8-run.sh"
timeout 140 python3 scripts/kernel_profile.py --configs 1 --smoke 40 --kv-dtype fp8 --shapes mem,headline,deploy \
  --out "$OUT/profile-fp8-smoke.json" 2>&1 | grep -E "smoke|rror" | cut -c1-300; echo "smoke rc=${PIPESTATUS[0]}"
timeout 60 python3 scripts/kernel_profile.py --configs 1 --smoke 0 --kv-dtype bf16 --shapes mem,headline,deploy \
  --out "$OUT/profile-bf16.json" > /dev/null 2>&1; echo "bf16 rc=$?"
