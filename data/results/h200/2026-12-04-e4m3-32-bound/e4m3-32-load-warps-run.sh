#!/usr/bin/env bash
# Two device calls (issue 52, the 32-row fp8 target). The patch gives the 32-row e4m3 form a load warpgroup: warps
# 8-11 fetch kv_indices (PREFETCH tiles ahead, in registers an unrolled loop names statically) and issue every
# cp.async of the ring, each slot once the PV warps released it (an EMPTY mbarrier per slot), so no QK or PV warp
# issues a global load; 384 threads with setmaxnreg (QK 248, PV 200, loads 40); the draft block in the first 256
# threads (sm120_cta with its block barriers counted over them).
#   call 1: bash data/results/h200/2026-12-04-e4m3-32-bound/e4m3-32-load-warps-run.sh          main, then the patch: timing library at the
#           32-row shapes and 128 rows; the patch's correctness (debug-wait build, edge grid + 40 random fp8 cases)
#   call 2: bash data/results/h200/2026-12-04-e4m3-32-bound/e4m3-32-load-warps-run.sh gates    the gates, where call 1 beat main by 3% at B = 8,
#           L = 200k: the fp8 GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against
#           SGLang) and the four sanitizers
# Carry .whl-sglang.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-32-bound/e4m3-32-load-warps-run.sh $*"
P=data/results/h200/2026-12-04-e4m3-32-bound/e4m3-32-load-warps.patch
time_shapes() {  # OUT.json: the 32-row form at its shapes and 128 rows, the bf16 pick (cuda_sm120) beside it
  KDT_E4M3_TIMING=1 timeout 150 python3 -m kdtree_lab bench --out "$1" --impl cuda_sm120_e4m3_32,cuda_sm120 \
    --shape 1,200000,4,8,fp8 --shape 8,200000,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 8,32768,4,8,fp8 \
    --shape 1,200000,16,8,fp8 --shape 1,200000,4,8 --shape 8,200000,4,8 --shape 1,32768,4,8 2>&1 | grep -v "shape/s"
}  # bench's own table (its progress bar left out)
if [ "${1:-}" = gates ]; then
  git apply $P || exit 1
  timeout 320 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3_32 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$OUT/gates-load-warps.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  SANITIZE_TIMEOUT=50 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_e4m3_32 "$OUT" -load-warps
  exit 0
fi
time_shapes "$OUT/load-warps-main.json"
git apply $P || exit 1
time_shapes "$OUT/load-warps-patch.json"
KDT_DEBUG_WAITS=1 timeout 200 python3 scripts/e4m3_lab.py --out "$OUT/e4m3-lab-load-warps.json" --random 40 \
  --impls cuda_sm120_e4m3_32 2>&1 | grep -E "accuracy|NaN"
