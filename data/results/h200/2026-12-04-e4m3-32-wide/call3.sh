#!/usr/bin/env bash
# Call 3: ablations of the 32-row e4m3 form (main's), each patch applied, timed, reverted; the mma.sync rate against
# warps per scheduler.
set -uo pipefail
D=data/results/h200/2026-12-04-e4m3-32-wide
source scripts/session_lib.sh; mkdir -p "$OUT"; WHEELS=.whl-gpu install_wheels || exit 1
write_provenance "bash $D/call3.sh" "$OUT/provenance-call3.json"
timeout 60 python3 $D/ablate.py "$OUT/mma-warps.json" mma 2>&1 | grep mma
KDT_E4M3_TIMING=1 timeout 100 python3 $D/ablate.py "$OUT/ablate-main.json" main 2>&1 | grep B=
for v in no-pv-mma one-q-term no-refill-loads; do
  git apply $D/ablate-$v.patch && KDT_E4M3_TIMING=1 timeout 100 python3 $D/ablate.py "$OUT/ablate-$v.json" $v 2>&1 | grep B=
  git apply -R $D/ablate-$v.patch
done
