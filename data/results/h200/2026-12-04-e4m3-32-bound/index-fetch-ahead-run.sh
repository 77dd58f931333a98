#!/usr/bin/env bash
# Two device calls (issue 52). The patch adds, as constants of each configuration: the 32-row e4m3 form's PV warps
# fetch kv_indices PREFETCH tiles ahead into registers that the tile loop, unrolled by PREFETCH, names statically
# (main: one tile ahead); and the 32-row, 64-row e4m3 and bf16 role-split forms prefetch the entries L2_AHEAD tiles
# past their fetch into L2 (no register waits on a prefetch). At its defaults (32-row PREFETCH 2, L2_AHEAD 0
# everywhere) only the 32-row form differs from main; PREFETCH 1, L2_AHEAD 0 is main's sm_90a SASS byte for byte.
#   call 1: bash data/results/h200/2026-12-04-e4m3-32-bound/index-fetch-ahead-run.sh            main, then the settings below, timing library
#   call 2: bash data/results/h200/2026-12-04-e4m3-32-bound/index-fetch-ahead-run.sh gates P A  the 32-row form's gates at PREFETCH P,
#           L2_AHEAD A (its fastest setting, where it beats main by more than 3% at B = 8, L = 200k): debug-wait e4m3
#           lab, the fp8 GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against SGLang),
#           the four sanitizers. (A faster 64-row or role-split setting needs its own gates: tests/test_gpu.py and
#           tests/test_gpu_graphs.py -k for its impl, and run_sanitizers on it.)
# Carry .whl-sglang.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-32-bound/index-fetch-ahead-run.sh $*"
P=data/results/h200/2026-12-04-e4m3-32-bound/index-fetch-ahead.patch; K=kernels/mma_sync
set_cfg() {  # PREFETCH of the 32-row form, L2_AHEAD of the 32-row, 64-row e4m3 and role-split forms
  sed -i "s/static constexpr int PREFETCH = [0-9]*;/static constexpr int PREFETCH = $1;/" $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr int L2_AHEAD = [0-9]*;/static constexpr int L2_AHEAD = $2;/" $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr int L2_AHEAD = [0-9]*;/static constexpr int L2_AHEAD = $3;/" $K/verify_sm120_e4m3.cuh \
    $K/verify_sm120_roles.cuh
}
time_shapes() {  # NAME: graph-replay medians of the three forms at their issue shapes -> $OUT/fetch-NAME.json
  echo "== $1"  # bench's own table follows (its progress bar left out)
  KDT_E4M3_TIMING=1 timeout 120 python3 -m kdtree_lab bench --out "$OUT/fetch-$1.json" \
    --shape 1,200000,4,8,fp8 --shape 8,200000,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 1,200000,16,8,fp8 \
    --shape 8,200000,16,8,fp8 --shape 1,200000,16,8 --shape 8,200000,16,8 \
    --impl cuda_sm120_e4m3_32,cuda_sm120_e4m3,cuda_sm120_roles 2>&1 | grep -v "shape/s"
}
if [ "${1:-}" = gates ]; then
  git apply $P && set_cfg "$2" "$3" 0 || exit 1
  KDT_DEBUG_WAITS=1 timeout 150 python3 scripts/e4m3_lab.py --out "$OUT/e4m3-lab-fetch.json" --random 40 \
    --impls cuda_sm120_e4m3_32 2>&1 | grep accuracy
  timeout 300 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3_32 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$OUT/gates-fetch.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  SANITIZE_TIMEOUT=40 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$OUT" -fetch
  exit 0
fi
time_shapes main
git apply $P || exit 1
for cfg in "2 0 0" "4 0 0" "1 8 8" "2 8 8"; do
  set_cfg $cfg; time_shapes "p${cfg// /-}"
done
