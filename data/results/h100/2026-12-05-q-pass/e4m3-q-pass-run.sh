#!/usr/bin/env bash
# Device call (issue 52, the fixed cost): the e4m3 forms' Q converted once per call by a small kernel before the split
# kernel (e4m3-q-pass.patch: kernels/mma_sync/e4m3_q_pass.cuh; the split kernel its PDL dependent, its QK warps
# loading ready A fragments after pdl_wait instead of converting Q themselves in every prefix CTA; the workspace grows
# by the terms, 1,156 B a row). The same arithmetic: main's outputs bit for bit (digests over the fp8 GPU grid, both
# e4m3 forms, normal library). Then the short calls' marginal cost in a graph of ten (scripts/fixed_cost.py, timing
# library, both forms at L = 128 and 4k) and the fp8 headline shapes (bench, timing library) for main and the patch
# in alternation (the build cache holds both libraries) (~8 minutes).
#   bash docs/experiments/e4m3-q-pass-run.sh
#   bash docs/experiments/e4m3-q-pass-run.sh phase      the phase clocks of both forms with the patch (where the Q
#                                                       pass leaves the QK warps' prologue), then the sanitizers on
#                                                       both e4m3 forms
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-q-pass-run.sh $*"
P=docs/experiments/e4m3-q-pass.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
if [ "${1:-}" = phase ]; then
  git apply $P || exit 1
  KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-phase.json"; echo "phase build rc=$?"
  for f in "cuda_sm120_e4m3_32 1,128,4,8 1,4096,4,8" "cuda_sm120_e4m3 1,128,16,8 1,4096,16,8"; do
    set -- $f; impl=$1; shift
    KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 timeout 120 python3 -m kdtree_lab.checks.phase_clocks --impl $impl \
      $(printf -- "--shape %s " "$@") --out "$R/phase-$impl.json" 2>&1 | tail -24
    pack
  done
  python3 -m kdtree_lab build --json > "$R/build-qpass.json"; echo "patched build rc=$?"
  SANITIZE_PARALLEL=1 SANITIZE_TIMEOUT=150 run_sanitizers "memcheck racecheck synccheck initcheck" \
    cuda_sm120_e4m3,cuda_sm120_e4m3_32 "$R" "-qpass"
  pack
  exit 0
fi
kernels_snapshot
cp kdtree_lab/kernels/launch_plan.py /tmp/launch_plan0.py
restore() { kernels_restore; cp /tmp/launch_plan0.py kdtree_lab/kernels/launch_plan.py; }
ident() {  # NAME: digests of both e4m3 forms over the fp8 grid
  for impl in cuda_sm120_e4m3 cuda_sm120_e4m3_32; do
    timeout 120 python3 -m kdtree_lab.checks.output_identity --impl $impl --kv fp8 --cases 40 \
      --out "$R/digest-$1-$impl.json" 2>&1 | tail -2
  done
}
ident main
git apply $P || exit 1
python3 -m kdtree_lab build --json > "$R/build-qpass.json"; echo "patched build rc=$?"
ident qpass
for impl in cuda_sm120_e4m3 cuda_sm120_e4m3_32; do
  python3 -m kdtree_lab.checks.output_identity --compare "$R/digest-main-$impl.json" "$R/digest-qpass-$impl.json" \
    | tail -3 || { echo "outputs differ (or a digest is missing): no timing"; pack; restore; exit 1; }
done
pack
timed() {  # NAME: the short calls' marginal cost and the fp8 headline shapes (timing library)
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --out "$R/fixed-$1.json" 2>&1 | grep -E "^auto|rror" \
    | cut -c1-200
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/bench64-$1.json" --impl cuda_sm120_e4m3 \
    --shape 1,200000,16,8,fp8 --shape 1,32768,16,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  KDT_E4M3_TIMING=1 timeout 60 python3 -m kdtree_lab bench --out "$R/bench32-$1.json" --impl cuda_sm120_e4m3_32 \
    --shape 1,32768,4,8,fp8 --shape 8,200000,4,8,fp8 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-100
  pack
}
for i in $(seq 1 "${PAIRS:-1}"); do  # PAIRS=2 where ~10 minutes are left
  restore; timed main-$i
  git apply $P || exit 1; timed qpass-$i
done
restore
