#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): a fourth ring slot for the 64-row e4m3 form inside sm_120's 99 KB,
# paid for with Q's second e4m3 term on 10 of its 18 steps (e4m3-ring4-q10.patch: the second term's shared memory
# 36,864 -> 20,480 B, the ring 55,296 -> 73,728; the prefix CTA 99,424 B, under the 99,432 the launch already gives).
# On 2026-12-07 (H100, data/results/h100/2026-12-07-refill-loop/) a fourth slot alone (past 99 KB) took the fp8
# headline -4.2%, B = 8 -6.3%, bits identical, and 4 steps in one term on top of it a further -2.4%; the CPU model of
# the rounding (data/results/cpu/2026-12-06-second-term-share/) puts 6 steps at ~0.67-0.72 of SGLang's error at the
# median on the GPU's scale, against the configuration gate's 0.7 (p90 <= 1.0). This call measures what the team
# would trade: the fresh draw on main and on the patch with one seed (60 cases), the patch's smoke and parity tests,
# then main (A) against the patch (B) interleaved (timing libraries).
# Predicted (written 2026-12-07 before the run): the headline -8 to -11%, B = 8 -8 to -10%, 1 x 32k -7 to -10%, 1 x 4k
# within 0.5 us; the draw's median 0.38 -> 0.70-0.80 of SGLang's (the gate's 0.7 at best just met), p90 0.71 ->
# 0.85-0.95; the parity tests pass (their bounds are SGLang's own rounding's).
# Built here first: the patch's builds fail their resource check with an 8-byte stack (sm_120a: a 64-bit value kept
# across setmaxnreg, reloaded outside the MMA loops; sm_90a timing: also one LDL a QK-loop pass), so its build steps
# below print rc=1 and the libraries are used as built; a kernel that lands must not spill.
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-ring4-q10.patch).
# Results in $OUT/results.tar.gz. ~5 minutes.
#   bash docs/experiments/e4m3-ring4-q10-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-ring4-q10-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-ring4-q10.patch
SEED=${KDT_FRESH_SEED:-$(python3 -c "import os; print(int.from_bytes(os.urandom(4), 'little'))")}
fresh() {  # fresh TAG: the draw of $SEED on the tree as it is now, unless SKIP_FRESH
  [ -n "${SKIP_FRESH:-}" ] || timeout 120 python3 scripts/fp8_accuracy.py --fresh 60 --seed "$SEED" \
    --impls cuda_sm120_e4m3 --out "$R/fp8-fresh-$1.json" 2>&1 | tail -3
}
kernels_snapshot  # the patch touches kernels/ only, so kernels_restore undoes it
step "libraries, main"
build_libs main "$R"
step "fresh draw, main (seed $SEED)"
fresh main
pack
git apply $P || exit 1
step "libraries, patch"
build_libs patch "$R"
step "smoke and parity, patch"
timeout 60 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3 --smoke 40 --kv-dtype fp8 --shapes mem \
  --nsplit 131 --out "$R/smoke-patch-fp8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
[ -n "${SKIP_PARITY:-}" ] || timeout -s INT 150 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "fp8_pool_edge and e4m3 and not e4m3_32" --junitxml="$R/gpu-parity-patch.xml" -p no:cacheprovider 2>&1 | tail -2
step "fresh draw, patch (seed $SEED)"
fresh patch
pack
kernels_restore
step "interleaved A/B: main (A) and the patch (B), timing libraries"
timeout 150 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 8,200000,16,8,fp8 \
  --shape 1,32768,16,8,fp8 --shape 1,4096,16,8,fp8 --rounds 8 --out "$R/ab-interleave-e4m3.json" 2>&1 | tail -5
pack
