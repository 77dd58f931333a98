#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): every split kernel loads its request's qo_indptr and kv_indptr entries
# together at its start (indptr-loads-first.patch, kernels/common/frame.cuh setup_work), where main loads kv_indptr
# only after qo_indptr's value is compared (the status flag's atomic sits between them): one round trip less before
# a CTA can fetch its kv_indices. Main and the patch twice each in alternation (the build cache holds both
# libraries): scripts/fixed_cost.py at B = 1, L = 128 and 4k, N = 4, H = 8, fp8, both e4m3 forms (timing library),
# each automatic-split row also as the marginal cost of one call among ten in a graph; then the bf16 and fp8
# headlines once each, the check that the kernels' loops (register allocation moved, their sm_120a schedules did
# not) are not slower. ~5 minutes. Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/indptr-loads-first-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/indptr-loads-first-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
kernels_snapshot
fixed() {  # NAME
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4 --lengths 128,4096 --nsplit 8 --repeat 10 --out $R/fixed-$1.json 2>&1 | grep -E "floor|rror|^auto " | cut -c1-400
  pack
}
heads() {  # NAME: the headlines (bf16 role split; fp8 64-row form, timing library)
  KDT_E4M3_TIMING=1 timeout 90 python3 -m kdtree_lab bench --out "$R/heads-$1.json" \
    --impl cuda_sm120_roles,cuda_sm120_e4m3 --shape 1,200000,16,8,bf16 --shape 1,200000,16,8,fp8 2>&1 \
    | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}
for i in 1 2; do
  kernels_restore; fixed main-$i
  git apply docs/experiments/indptr-loads-first.patch || exit 1; fixed early-$i
done
heads early
kernels_restore; heads main
