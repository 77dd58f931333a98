#!/usr/bin/env bash
# Call 4 (issue 52): the 32-row e4m3 form's ablations combined, each in the same call as main (timing library;
# results wrong by design, only times count). A = one Q term (half the QK MMAs), B = no PV MMAs, C = no refill loads
# after the first four tiles (the 2026-12-04-e4m3-32-wide patches). If QK and PV each nearly bound a tile, A and B
# alone move little and A+B much. Carry .whl-sglang. Results in $OUT/results.tar.gz.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-32-bound/call4.sh"
D=data/results/h200/2026-12-04-e4m3-32-wide; R=/tmp/r; mkdir -p $R; mv "$OUT"/*.json $R/
pack() { tar -C $R -czf "$OUT/results.tar.gz" .; }
time_cfg() {  # NAME
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 -m kdtree_lab bench --out "$R/ablate-$1.json" --impl cuda_sm120_e4m3_32 \
    --shape 8,200000,4,8,fp8 --shape 1,200000,4,8,fp8 --shape 1,200000,16,8,fp8 2>&1 | grep -E "^cuda" | cut -c1-75
  pack
}
cp -r kernels /tmp/kernels0
restore() { rm -rf kernels && cp -r /tmp/kernels0 kernels; }
declare -A PATCH=([A]=one-q-term [B]=no-pv-mma [C]=no-refill-loads)
for cfg in main A B C AB AC BC ABC; do
  restore
  if [ $cfg != main ]; then
    for ((i = 0; i < ${#cfg}; i++)); do git apply $D/ablate-${PATCH[${cfg:$i:1}]}.patch || exit 1; done
  fi
  time_cfg $cfg
done
restore
