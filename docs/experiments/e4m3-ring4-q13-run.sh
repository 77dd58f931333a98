#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline; before e4m3-ring4-q11.patch lands): q11's gate margin against
# e4m3-ring4-q13.patch. q11 (the fourth ring slot inside 99 KB, 7 of Q's 18 32-dim steps in one e4m3 term) measured
# 0.68-0.69 of SGLang's error on three seeds (2026-12-07, data/results/h100/2026-12-07-refill-loop/, call 8); a
# bootstrap of those 180 cases puts a fresh draw's median above the configuration gate's 0.7 in 9.5% of draws: a flaky
# GPU test. q13 is q11 with three more steps' second term held in the QK lanes' registers (12 of the 15 registers
# sm_120a left free at 168; shared memory as q11's, 100,968 B), so 4 steps in one term.
# Prediction (before the run; the fit ratio^2 ~ 0.13 + 0.048 x one-term steps): q13's draw median 0.57 (0.55-0.60) on
# each seed, p90 <= 0.8; 12 more MMAs a QK tile (128 of 144): the headline -7% against main (q11 -9%), q13 - q11
# +1 to +3% at the headline and B = 8.
# Rule (written before the run): q13 replaces q11 as the candidate where its three medians are all <= 0.62, the
# gate's miss rate of its 180 pooled ratios (kdtree_lab.checks.fp8_fresh.gate_miss_rate; q11's 0.095) below 0.01, and
# its headline at least 5% faster than main's; else q11 stays the candidate and the gate's margin goes to the team.
# Steps: the libraries (prebuilt), the fresh draw (60 cases) of q11 and of q13 on three seeds, q13's smoke, its
# fp8-pool parity and the 1-8-tile split test, then main (A) against q13 (B) at four shapes and q11 (A) against q13 (B)
# at the headline and B = 8, interleaved (timing libraries).
# Prebuild: python scripts/prebuild.py main docs/experiments/e4m3-ring4-q11.patch docs/experiments/e4m3-ring4-q13.patch
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz. ~7 minutes.
#   bash docs/experiments/e4m3-ring4-q13-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-ring4-q13-run.sh"
R=$KDT_PACK_DIR; Q11=docs/experiments/e4m3-ring4-q11.patch; Q13=docs/experiments/e4m3-ring4-q13.patch
SEEDS=${SEEDS:-$(python3 -c "import os; print(' '.join(str(int.from_bytes(os.urandom(4), 'little')) for _ in range(3)))")}
fresh() {  # TAG SEED: the draw on the tree as it is now
  timeout 120 python3 scripts/fp8_accuracy.py --fresh 60 --seed "$2" --impls cuda_sm120_e4m3 \
    --out "$R/fp8-fresh-$1-$2.json" 2>&1 | grep -E "ours / SGLang|FAIL" | cut -c1-200
}
snapshot() { rm -rf /tmp/tree0 && mkdir -p /tmp/tree0 && git diff > /tmp/tree0/dirty.patch; }
restore() { git checkout -q -- . && { [ ! -s /tmp/tree0/dirty.patch ] || git apply /tmp/tree0/dirty.patch; }; }
snapshot
step "libraries, main"; build_libs main "$R"
git apply $Q11 || exit 1
step "libraries, q11"; build_libs q11 "$R"
step "fresh draws, q11 (seeds $SEEDS)"
for s in $SEEDS; do fresh q11 $s; done
restore; git apply $Q13 || exit 1
step "libraries, q13"; build_libs q13 "$R"
step "fresh draws, q13 (seeds $SEEDS)"
for s in $SEEDS; do fresh q13 $s; done
step "smoke and parity, q13"
timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3 --smoke 40 --kv-dtype fp8 --shapes mem \
  --nsplit 131 --out "$R/smoke-q13-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
timeout -s INT 150 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "(fp8_pool_edge and e4m3 and not e4m3_32) or (splits_of_one and e4m3 and not e4m3_32)" \
  --junitxml="$R/gpu-parity-q13.xml" -p no:cacheprovider 2>&1 | tail -2
restore
step "interleaved A/B: main (A) and q13 (B), timing libraries"
timeout 170 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-q13.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --shape 1,32768,16,8,fp8 --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-main-q13.json" 2>&1 \
  | grep -E "^cuda|rror" | cut -c1-200
step "interleaved A/B: q11 (A) and q13 (B), timing libraries"
timeout 100 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-q11.json" \
  --lib-b "$R/build-timing-q13.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --rounds 6 --out "$R/ab-interleave-q11-q13.json" 2>&1 | grep -E "^cuda|rror" | cut -c1-200
pack
