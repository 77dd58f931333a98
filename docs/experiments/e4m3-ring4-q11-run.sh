#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): the fourth ring slot inside 99 KB with Q's second e4m3 term on 11 of
# its 18 steps (e4m3-ring4-q11.patch: the last 7 in one term, the row statistics moved into a ring slot no tile uses
# once the QK warps leave their loop, RoleCtx::stats; the prefix CTA 100,968 B of sm_120's 101,376). On 2026-12-07
# (H100, data/results/h100/2026-12-07-refill-loop/) 8 steps in one term (e4m3-ring4-q10.patch) took the fp8 headline
# -9.1% and B = 8 -11.3% at 0.71-0.72 of SGLang's error on three seeds, the configuration gate's 0.7 missed; the fit
# ratio^2 ~ 0.13 + 0.048 x steps puts 7 at ~0.68. Steps: the fresh draw (60 cases) on main for three seeds, the
# patch's smoke and parity tests, the draw on the patch for the same seeds, then main (A) against the patch (B)
# interleaved (timing libraries).
# Measured 2026-12-07 (H100, data/results/h100/2026-12-07-refill-loop/, call 8, the patch then without its register
# split): the draws' medians 0.68-0.69 on three seeds (the gate met), the headline -9.1%, B = 8 -11.8%. Since then
# the patch gives its prefix warps 168 registers each (QK 153 used on sm_120a, PV more than the draft block's 160: at
# 160 sm_120a kept a full-barrier address in local memory), so no build spills and prebuild.py builds it. Run again
# before its gates: the same bits as measured (the arithmetic did not change), the timing within call 8's spread.
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-ring4-q11.patch. Carry .whl-sglang and .prebuilt.
# Results in $OUT/results.tar.gz. ~5 minutes.
#   bash docs/experiments/e4m3-ring4-q11-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-ring4-q11-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-ring4-q11.patch
SEEDS=${SEEDS:-$(python3 -c "import os; print(' '.join(str(int.from_bytes(os.urandom(4), 'little')) for _ in range(3)))")}
fresh() {  # TAG SEED: the draw on the tree as it is now
  timeout 120 python3 scripts/fp8_accuracy.py --fresh 60 --seed "$2" --impls cuda_sm120_e4m3 \
    --out "$R/fp8-fresh-$1-$2.json" 2>&1 | grep -E "ours / SGLang|FAIL" | cut -c1-200
}
kernels_snapshot
step "libraries, main"; build_libs main "$R"
step "fresh draws, main (seeds $SEEDS)"
for s in $SEEDS; do fresh main $s; done
pack
git apply $P || exit 1
step "libraries, patch"; build_libs patch "$R"
step "smoke and parity, patch"
timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3 --smoke 40 --kv-dtype fp8 --shapes mem \
  --nsplit 131 --out "$R/smoke-patch-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout -s INT 150 python3 -m pytest -q -m gpu tests/test_gpu.py -k "fp8_pool_edge and e4m3 and not e4m3_32" \
  --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -2
step "fresh draws, patch (seeds $SEEDS)"
for s in $SEEDS; do fresh patch $s; done
pack
kernels_restore
step "interleaved A/B: main (A) and the patch (B), timing libraries"
timeout 150 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --shape 1,32768,16,8,fp8 --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3.json" 2>&1 \
  | grep -E "^cuda|rror" | cut -c1-200
pack
