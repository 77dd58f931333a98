#!/usr/bin/env bash
# One device call (issue 18 / 52, fixed cost): partial output rows stored as bf16 (half the bytes the split kernels
# write and the combine reads), against main. scripts/fixed_cost.py on main, then the patch applied, rebuilt, smoked
# (edge grid + 40 random cases per configuration and pool), the GPU parity tests of every CUDA configuration (edge
# grid + 500 random against the fp64 oracle: the accuracy question), the error figures, and the same sweeps again.
# ~9 minutes. Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/bf16-partials-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/bf16-partials-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
fixed() {  # NAME: the fixed cost of the bf16 pool's default configurations at 1, 32 and 131 splits, then issue 52's
  # short fp8 calls (both e4m3 forms, N = 4 and 16, L = 128 and 4k) on the timing library (KDT_E4M3_TIMING=1: the
  # card's MMA count at an e4m3 rate; on 2026-12-05 the normal library's emulated MMAs made the 64-row form's prefix
  # CTAs longer, 23.5 us against 18.3 a call, which may hide what its epilogue costs)
  timeout 100 python3 scripts/fixed_cost.py --nsplit 1,32,131 --out "$R/fixed-cost-$1.json" 2>&1 | grep -E "floor|rror"
  KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 --drafts 4,16 \
    --lengths 128,4096 --nsplit 8 --repeat 10 --out "$R/fixed-cost-fp8-$1.json" 2>&1 | grep -E "^auto|rror" | cut -c1-200
  pack
}
fixed main
git apply docs/experiments/bf16-partials.patch || exit 1
python3 -m kdtree_lab build --json > "$R/build-patch.json"; echo "patched build rc=$?"
timeout 100 python3 scripts/kernel_profile.py --configs cuda_sm120,cuda_sm120_roles,cuda_wgmma,cuda_wgmma_v5 \
  --smoke 40 --shapes mem --nsplit 131 --out "$R/smoke-patch-bf16.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout 80 python3 scripts/kernel_profile.py --configs cuda_sm120,cuda_sm120_e4m3,cuda_sm120_e4m3_32,cuda_wgmma \
  --smoke 40 --kv-dtype fp8 --shapes mem --nsplit 131 --out "$R/smoke-patch-fp8.json" 2>&1 \
  | grep -E "^smoke|rror" | cut -c1-200
pack
timeout 330 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_gpu_wgmma.py -k "not triton" \
  --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -3
pack
for impl in cuda cuda_sm120; do  # the error figures: max relative L2 from the oracle (0.0017-0.0023 on main)
  timeout 60 python3 -m kdtree_lab parity --impl $impl --cases 100 --json > "$R/parity-$impl-patch.json" 2>&1
  echo "parity $impl rc=$?"
done
fixed patch
