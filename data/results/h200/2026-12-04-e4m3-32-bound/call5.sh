#!/usr/bin/env bash
# Call 5 (issue 52): (1) does the 32-row form's load path answer a deeper ring and an earlier refill once its MMA path
# is mostly gone (A+B, then A+B with pv-v-first.patch at SLOTS 5, V_FIRST)? (2) the 64-row e4m3
# form's ablations at its shapes (ablate64-*.patch: A one Q term, B no PV MMAs, C no refill loads after the first
# three tiles). Each build carries one ablation set per form (different kernels); timing library; results wrong by
# design, only times count. Carry .whl-sglang. Results in $OUT/results.tar.gz.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-32-bound/call5.sh"
W=data/results/h200/2026-12-04-e4m3-32-wide; H=data/results/h200/2026-12-04-e4m3-32-bound; R=/tmp/r5
mkdir -p $R; mv "$OUT"/*.json $R/
pack() { tar -C $R -czf "$OUT/results.tar.gz" .; }
cp -r kernels /tmp/kernels0
restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }
time_cfg() {  # NAME
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/ablate-$1.json" \
    --impl cuda_sm120_e4m3_32,cuda_sm120_e4m3 --shape 8,200000,4,8,fp8 --shape 1,200000,4,8,fp8 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 2>&1 | grep -E "^cuda" | cut -c1-75
  pack
}
a32() { git apply $W/ablate-one-q-term.patch && git apply $W/ablate-no-pv-mma.patch; }
a64() { for x in "$@"; do git apply $H/ablate64-$x.patch || exit 1; done; }
time_cfg main
restore; a32; a64 one-q-term; time_cfg 32AB-64A
restore; git apply $H/pv-v-first.patch; a32; a64 no-refill-loads
sed -i "s/static constexpr bool V_FIRST = true;/static constexpr bool V_FIRST = false;/" kernels/mma_sync/verify_sm120_e4m3.cuh
time_cfg 32ABs5v-64C
restore; a64 one-q-term no-refill-loads; time_cfg 64AC
restore; a64 no-pv-mma no-refill-loads; time_cfg 64BC
restore; a64 one-q-term no-pv-mma no-refill-loads; time_cfg 64ABC
restore
