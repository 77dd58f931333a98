#!/usr/bin/env bash
# Device call (issue 52, the fixed cost): the 64-row e4m3 form's Q prologue with six 32-dim steps a pass in its two
# term loops (e4m3-64-q-prologue.patch) instead of one, so that a pass keeps up to 24 loads in flight instead of
# waiting on four at a time. The same arithmetic: main's outputs bit for bit (digests over the fp8 GPU grid, normal
# library). Then the short calls' marginal cost in a graph of ten (scripts/fixed_cost.py, the 64-row form at N = 16,
# L = 128 and 4k; timing library) for main and the patch, each under the driver's carveout and under
# KDT_CARVEOUT=100 (an H200 SM then keeps ~28 KB of L1 beside the 99 KB of shared memory, as an sm_120 card does),
# in alternation (the build cache holds every library, so a switch costs no build) (~7 minutes; PAIRS=2 twice).
#   bash docs/experiments/e4m3-64-q-prologue-run.sh
#   bash docs/experiments/e4m3-64-q-prologue-run.sh gates            where the patch is >= 1 us faster under 100:
#   bash docs/experiments/e4m3-64-q-prologue-run.sh gates-sanitize   as e4m3-64-vfirst-run.sh's (scripts/session_lib.sh)
# Applies with or without e4m3-64-vfirst.patch and e4m3-64-chains8.patch. Carry .whl-sglang. Results in
# $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-64-q-prologue-run.sh $*"
P=docs/experiments/e4m3-64-q-prologue.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P qprologue "$R"; exit $? ;; esac
kernels_snapshot
timeout 150 python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_e4m3 --kv fp8 --cases 40 \
  --out "$R/digest-main.json"
git apply $P || exit 1
python3 -m kdtree_lab build --json > "$R/build-qprologue.json"; echo "patched build rc=$?"
timeout 150 python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_e4m3 --kv fp8 --cases 40 \
  --out "$R/digest-qprologue.json"
python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main.json" "$R/digest-qprologue.json" | tail -3 \
  || { echo "outputs differ (or a digest is missing): no timing"; pack; kernels_restore; exit 1; }
pack
fixed64() {  # NAME [CARVEOUT]: the 64-row form's short calls, marginal in a graph of ten (timing library)
  echo "== $1"
  local cv=(-u KDT_CARVEOUT); [ -n "${2:-}" ] && cv=(KDT_CARVEOUT=$2)  # the driver's carveout: none inherited
  env "${cv[@]}" KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3 \
    --drafts 16 --lengths 128,4096 --nsplit 8 --repeat 10 --out "$R/fixed-$1.json" 2>&1 | grep -E "^auto|rror" | cut -c1-200
  pack
}
for i in $(seq 1 "${PAIRS:-1}"); do  # PAIRS=2 where ~10 minutes are left
  kernels_restore; fixed64 main-$i; fixed64 main-l1-$i 100
  git apply $P || exit 1; fixed64 qprologue-$i; fixed64 qprologue-l1-$i 100
done
kernels_restore
