#!/usr/bin/env bash
# Two device calls (issue 52). The patch adds, as constants of each configuration: the 32-row e4m3 form's PV warps
# fetch kv_indices PREFETCH tiles ahead into registers that the tile loop, unrolled by PREFETCH, names statically
# (main: one tile ahead); and the 32-row, 64-row e4m3 and bf16 role-split forms prefetch the entries L2_AHEAD tiles
# past their fetch into L2 (no register waits on a prefetch). At its defaults (32-row PREFETCH 2, L2_AHEAD 0
# everywhere) only the 32-row form differs from main; PREFETCH 1, L2_AHEAD 0 is main's sm_90a SASS byte for byte.
#   call 1: bash docs/experiments/index-fetch-ahead-run.sh            main, then the settings below, timing library
#   call 2: bash docs/experiments/index-fetch-ahead-run.sh gates P A  the 32-row form's gates at PREFETCH P,
#           L2_AHEAD A (its fastest setting, where it beats main by more than 3% at B = 8, L = 200k): debug-wait e4m3
#           lab, the fp8 GPU tests (edge grid + 500 random, 23 capture sizes x 100 replays, the hook against SGLang),
#           the four sanitizers. (A faster 64-row or role-split setting needs its own gates: tests/test_gpu.py and
#           tests/test_gpu_graphs.py -k for its impl, and run_sanitizers on it.)
# Carry .whl-sglang.
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
source scripts/device_prologue.sh "bash docs/experiments/index-fetch-ahead-run.sh $*"
P=docs/experiments/index-fetch-ahead.patch; K=kernels/mma_sync
set_cfg() {  # PREFETCH of the 32-row form, L2_AHEAD of the 32-row, 64-row e4m3 and role-split forms
  sed -i "s/static constexpr int PREFETCH = [0-9]*;/static constexpr int PREFETCH = $1;/" $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr int L2_AHEAD = [0-9]*;/static constexpr int L2_AHEAD = $2;/" $K/verify_sm120_e4m3_32.cuh
  sed -i "s/static constexpr int L2_AHEAD = [0-9]*;/static constexpr int L2_AHEAD = $3;/" $K/verify_sm120_e4m3.cuh \
    $K/verify_sm120_roles.cuh
}
time_shapes() {  # NAME: graph-replay medians of the three forms at their issue shapes -> $OUT/fetch-NAME.json
  KDT_E4M3_TIMING=1 timeout 100 python3 - "$1" "$OUT/fetch-$1.json" <<'PY' 2>&1 | grep "B="
import json, sys
from kdtree_lab.checks.bench import run_grid
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings
name, out = sys.argv[1:]
c = measure_ceilings()
runs = [run_grid([Shape(1, 200_000, 4, 8, kv="fp8"), Shape(8, 200_000, 4, 8, kv="fp8"), Shape(1, 32_768, 4, 8, kv="fp8")],
                 ["cuda_sm120_e4m3_32"], c, progress=False),
        run_grid([Shape(1, 200_000, 16, 8, kv="fp8"), Shape(8, 200_000, 16, 8, kv="fp8")], ["cuda_sm120_e4m3"], c,
                 progress=False),
        run_grid([Shape(1, 200_000, 16, 8), Shape(8, 200_000, 16, 8)], ["cuda_sm120_roles"], c, progress=False)]
rows = [r for run in runs for r in run["rows"]]
json.dump({**runs[0], "rows": rows, "setting": name}, open(out, "w"), indent=1)
for r in rows:
    print(f"{name:12s} {r['impl']:20s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} {r['ms']:.4f} ms", flush=True)
PY
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
