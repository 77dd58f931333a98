#!/usr/bin/env bash
# One device call (issue 52), then the gates where it wins. The patch lets the PV warps of both e4m3 forms take tile
# t's V fragments and refill its slot before they wait for P(t) (V_FIRST: the QK group read tile t's K before it
# published P(t - 1), which the PV warps already hold), and gives the 32-row form a fifth ring slot (SLOTS 5,
# 95,456 B): each lengthens the time a refill has before the QK warps wait on it by about one tile.
#   call 1: bash data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first-run.sh           main, then (32-row SLOTS, V_FIRST; 64-row V_FIRST) at
#           "4 1 1", "5 0 0", "5 1 1" (timing library); then the debug-wait correctness of "5 1 1" (edge grid + 40
#           random fp8 cases per form)
#   call 2: bash data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first-run.sh gates S V W   the gates at the fastest setting
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first-run.sh $*"
P=data/results/h200/2026-12-04-e4m3-32-bound/pv-v-first.patch; K=kernels/mma_sync; R="$OUT/r"; mkdir -p "$R"; mv "$OUT"/*.json "$R/"
pack() { tar -C "$R" -czf "$OUT/results.tar.gz" .; }
set_cfg() {  # SLOTS and V_FIRST of the 32-row form, V_FIRST of the 64-row form
  sed -i "s/static constexpr int SLOTS = [0-9], DRAFT_PAIRS = 1;/static constexpr int SLOTS = $1, DRAFT_PAIRS = 1;/" \
    $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr bool V_FIRST = [a-z]*;/static constexpr bool V_FIRST = $([ "$2" = 1 ] && echo true || echo false);/" \
    $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr bool V_FIRST = [a-z]*;/static constexpr bool V_FIRST = $([ "$3" = 1 ] && echo true || echo false);/" \
    $K/verify_sm120_e4m3.cuh
}
time_shapes() {  # NAME: graph-replay medians of both e4m3 forms at their issue shapes, the bf16 pick beside them
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 120 python3 -m kdtree_lab bench --out "$R/vfirst-$1.json" \
    --shape 1,200000,4,8,fp8 --shape 8,200000,4,8,fp8 --shape 1,32768,4,8,fp8 --shape 8,32768,4,8,fp8 \
    --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 --shape 1,200000,4,8 --shape 8,200000,4,8 \
    --shape 8,32768,4,8 --impl cuda_sm120_e4m3_32,cuda_sm120_e4m3,cuda_sm120 2>&1 | grep -v "shape/s" | cut -c1-120
  pack
}
if [ "${1:-}" = gates ]; then
  git apply $P && set_cfg "$2" "$3" "$4" || exit 1
  timeout 330 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py \
    -k "e4m3 or fp8_pool or (sglang_on_the_gpu_grid and fp8)" --junitxml="$R/gates-vfirst.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  pack
  for impl in cuda_sm120_e4m3_32 cuda_sm120_e4m3; do
    SANITIZE_TIMEOUT=25 run_sanitizers "memcheck racecheck synccheck initcheck" $impl "$R" "-$impl"
    pack
  done
  exit 0
fi
time_shapes main
git apply $P || exit 1
for cfg in "4 1 1" "5 0 0" "5 1 1"; do
  set_cfg $cfg; time_shapes "s${cfg// /-}"
done
KDT_DEBUG_WAITS=1 timeout 200 python3 scripts/e4m3_lab.py --out "$R/e4m3-lab-vfirst.json" --random 40 \
  --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 2>&1 | grep -E "accuracy|NaN"
pack
