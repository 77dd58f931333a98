#!/usr/bin/env bash
# Device calls (issue 52, the fixed cost): prefix splits shorter than 128 tokens, and where a short call's time goes
# inside a graph. The patch sets MIN_SPLIT_TOKENS (kernels/common/frame.cuh) to 64; the script also runs 32.
#   call 1: bash docs/experiments/short-splits-run.sh      scripts/fixed_cost.py on main, then at MIN_SPLIT_TOKENS 64
#           and 32 (timing library): B = 1, L = 128 and 4k, N = 4 and 16, H = 8, fp8, both e4m3 forms; each
#           automatic-split row also as the marginal cost of one call among ten in a graph (~6 min)
#   call 2: bash docs/experiments/short-splits-run.sh anatomy   the same rows on main with --anatomy: from the
#           profiler's record of that graph's replays, each kernel's duration and the gaps between them (~3 min). The
#           twenty-second session's call that ran this first never returned (the machine stopped answering after ~10
#           minutes); whether the profiler had a part in it is not known, so it runs alone, in a call of its own
#   calls 3-5: bash docs/experiments/short-splits-run.sh gates M / gates2 M / gates3 M    the gates at
#           MIN_SPLIT_TOKENS M, where call 1 found a setting 1 us or more below main at L = 128 or 4k. The change
#           moves every CUDA configuration's split ranges, v5 (the H200's default) too, so the gates are the whole
#           GPU suite: gates, the parity and graph tests (edge grid + 500 random, 23 capture sizes x 100 replays);
#           gates2, the hook against SGLang and the wgmma tests; gates3, the four sanitizers over every
#           configuration this GPU launches (sanitize_cases --impl all) (each ~9 min)
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step; the device returns at most 8 files).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/short-splits-run.sh $*"
R=$KDT_PACK_DIR; mkdir -p $R; mv "$OUT"/*.json $R/
set_min() {  # MIN_SPLIT_TOKENS in kernels/common/frame.cuh; stops the call where the line is not there
  sed -i "s/constexpr int MIN_SPLIT_TOKENS = [0-9]*;/constexpr int MIN_SPLIT_TOKENS = $1;/" kernels/common/frame.cuh
  grep -q "constexpr int MIN_SPLIT_TOKENS = $1;" kernels/common/frame.cuh || { echo "set_min $1: no match"; exit 1; }
}
case "${1:-}" in
  gates|gates2|gates3) set_min "${2:?usage: short-splits-run.sh $1 MIN}"; run_gates "$1" "min$2" "$R"; exit 0 ;;
esac
sweep() {  # MIN [--anatomy]: the fixed cost at MIN_SPLIT_TOKENS = MIN
  set_min "$1"; echo "== MIN_SPLIT_TOKENS $1 ${2:-}"
  KDT_E4M3_TIMING=1 timeout 150 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 ${2:-} --out $R/fixed-cost-min$1${2:+-anatomy}.json \
    2>&1 | grep -E "floor|rror|^auto " | cut -c1-400
  pack
}
if [ "${1:-}" = anatomy ]; then
  sweep 128 --anatomy
  exit 0
fi
sweep 128; sweep 64; sweep 32
set_min 128
