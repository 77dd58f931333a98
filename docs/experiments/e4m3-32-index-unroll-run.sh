#!/usr/bin/env bash
# Two device calls (issue 52, the 32-row fp8 target). The patch lets the 32-row e4m3 form's PV warps fetch kv_indices
# PREFETCH tiles ahead into registers that the tile loop, unrolled by PREFETCH, names statically (main: one tile
# ahead), and prefetch the entries L2_AHEAD tiles further into L2 (no register waits on a prefetch); PREFETCH 1,
# L2_AHEAD 0 is main's sm_90a SASS byte for byte.
#   call 1: bash docs/experiments/e4m3-32-index-unroll-run.sh          main, then four settings, timing library
#   call 2: bash docs/experiments/e4m3-32-index-unroll-run.sh gates P A  the gates at PREFETCH P, L2_AHEAD A (the
#           fastest of call 1, where it beats main by more than 3% at B = 8, L = 200k): debug-wait e4m3 lab, the fp8
#           GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against SGLang), sanitizers
# Carry .whl-sglang.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash docs/experiments/e4m3-32-index-unroll-run.sh $*"
A=data/results/h200/2026-12-04-e4m3-32-wide/ablate.py; H=kernels/mma_sync/verify_sm120_e4m3_32.cuh
set_cfg() { sed -i "s/static constexpr int PREFETCH = [0-9]*;/static constexpr int PREFETCH = $1;/; s/static constexpr int L2_AHEAD = [0-9]*;/static constexpr int L2_AHEAD = $2;/" $H; }
if [ "${1:-}" = gates ]; then
  git apply docs/experiments/e4m3-32-index-unroll.patch && set_cfg "$2" "$3" || exit 1
  KDT_DEBUG_WAITS=1 timeout 150 python3 scripts/e4m3_lab.py --out "$OUT/e4m3-lab-unroll.json" --random 40 \
    --impls cuda_sm120_e4m3_32 2>&1 | grep accuracy
  timeout 300 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3_32 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$OUT/gates-unroll.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  SANITIZE_TIMEOUT=40 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$OUT" -unroll
  exit 0
fi
KDT_E4M3_TIMING=1 timeout 80 python3 $A "$OUT/unroll-main.json" main 2>&1 | grep B=
git apply docs/experiments/e4m3-32-index-unroll.patch || exit 1
for cfg in "2 0" "4 0" "1 8" "2 8"; do
  set -- $cfg; set_cfg "$1" "$2"
  KDT_E4M3_TIMING=1 timeout 80 python3 $A "$OUT/unroll-p$1-l$2.json" "p$1-l$2" 2>&1 | grep B=
done
