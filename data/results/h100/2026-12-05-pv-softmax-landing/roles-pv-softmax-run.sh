#!/usr/bin/env bash
# Device calls (issue 52, the bf16 headline): the role split with the softmax in the PV group
# (roles-pv-softmax.patch: CfgPvs in kernels/mma_sync/verify_sm120_roles.cuh; the QK warps only multiply and hand
# their partial scores over, the PV warps sum them, take the softmax of 8 rows each and share P behind one named
# barrier per tile). Its arithmetic is main's value for value, so its outputs must be main's bit for bit.
#   call 1: bash docs/experiments/roles-pv-softmax-run.sh     main's output digests (edge grid + 60 random cases of
#           the GPU grid, cuda_sm120_roles), the patch's, compared (exit status and "identical" line); the smoke
#           against the fp64 oracle (40 random cases); then main and the patch twice each in alternation at the bf16
#           headline (B = 1 / 8, L = 200k, N = 16, H = 8) (the build cache holds both libraries, so a switch costs no
#           build) (~6-7 minutes; PAIRS=1, one pair: ~5)
#   call 2: bash docs/experiments/roles-pv-softmax-run.sh sanitize    memcheck, racecheck, synccheck, initcheck over
#           cuda_sm120_roles with the patch, at once (the hand-offs are new: S_FULL / S_EMPTY, one PV barrier) (~3 min)
# If both hold and the headline is faster in both pairs: the whole suite's gates (run_gates; its draft block is the
# e4m3 form's too only once that form moves to it, which this patch does not do).
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/roles-pv-softmax-run.sh $*"
P=docs/experiments/roles-pv-softmax.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
if [ "${1:-}" = sanitize ]; then
  git apply $P || exit 1
  python3 -m kdtree_lab build --json > "$R/build-pvs.json"; echo "patched build rc=$?"
  SANITIZE_PARALLEL=1 SANITIZE_TIMEOUT=150 run_sanitizers "memcheck racecheck synccheck initcheck" cuda_sm120_roles \
    "$R" "-pvs"
  pack
  exit 0
fi
kernels_snapshot
timeout 120 python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_roles --cases 60 --out "$R/digest-main.json"
pack
git apply $P || exit 1
python3 -m kdtree_lab build --json > "$R/build-pvs.json"; echo "patched build rc=$?"
grep -A3 "verify_sm120_roles_kernel" build/*.ptxas.log | grep -E "spill" | sort | uniq -c
timeout 120 python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_roles --cases 60 --out "$R/digest-pvs.json"
python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main.json" "$R/digest-pvs.json" | tail -4
timeout 100 python3 scripts/kernel_profile.py --configs cuda_sm120_roles --smoke 40 --shapes mem --nsplit 131 \
  --out "$R/smoke-pvs.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
pack
time_roles() {  # NAME
  echo "== $1"
  timeout 90 python3 -m kdtree_lab bench --out "$R/roles-$1.json" --impl cuda_sm120_roles \
    --shape 1,200000,16,8,bf16 --shape 8,200000,16,8,bf16 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}
for i in $(seq 1 "${PAIRS:-2}"); do  # PAIRS=1: one pair, where a session has ~5 device-minutes
  kernels_restore; time_roles main-$i
  git apply $P || exit 1; time_roles pvs-$i
done
kernels_restore
