#!/usr/bin/env bash
# Device calls (issue 52, the fp8 headline): the 64-row e4m3 form's QK warps accumulate Q's two e4m3 terms in their
# own accumulators (e4m3-64-chains8.patch): eight chains of 18 dependent MMAs a tile instead of four of 36, summed at
# the softmax. Not bit for bit main's (the two terms' partial sums are added once, not interleaved); within the e4m3
# configuration's tolerance, which the smoke checks against the fp64 oracle on the normal library (the H200 emulates
# e4m3 there) before the timing library times it.
#   call 1: bash docs/experiments/e4m3-64-chains8-run.sh          the smoke (40 random + the edge cases, fp8 pool),
#           then main and the patch three times each in alternation at the 64-row form's shapes (timing library; the
#           build cache holds every library, so a switch costs no build) (~6 minutes)
#   call 2: bash docs/experiments/e4m3-64-chains8-run.sh gates    where all three pairs agree in sign at the headline:
#           the fp8 and e4m3 parity and graph tests (edge grid + 500 random, 23 capture sizes x 100 replays, calls
#           back to back), the hook against SGLang over fp8 (~9 minutes); gates-sanitize: the four sanitizers on
#           cuda_sm120_e4m3 (~1 minute). Then land it (git apply), and regenerate the issue-fp8 grid in a call of its
#           own (KDT_E4M3_TIMING=1 python3 -m kdtree_lab bench --preset issue-fp8), readme tables, docs.
# Applies to main with or without e4m3-64-vfirst.patch (their hunks are apart). Carry .whl-sglang. Results in
# $OUT/results.tar.gz (packed after each step).
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/e4m3-64-chains8-run.sh $*"
P=docs/experiments/e4m3-64-chains8.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P chains8 "$R"; exit $? ;; esac
kernels_snapshot
git apply $P || exit 1
python3 -m kdtree_lab build --json > "$R/build-chains8.json"; echo "patched build rc=$?"
timeout 150 python3 scripts/kernel_profile.py --configs cuda_sm120_e4m3 --smoke 40 --kv-dtype fp8 --shapes mem \
  --nsplit 131 --out "$R/smoke-chains8.json" 2>&1 | grep -E "^smoke|rror" | cut -c1-200
pack
# a smoke with failures (or none written) ends the call: a wrong kernel's times are not worth the device time
python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['smoke']; sys.exit(not d or any(v['failed'] for v in d.values()))" \
  "$R/smoke-chains8.json" || { echo "smoke failed or missing: no timing"; kernels_restore; exit 1; }
for i in 1 2 3; do
  kernels_restore; time_e4m3_64 "$R/chains8-main-$i.json"
  git apply $P || exit 1; time_e4m3_64 "$R/chains8-chains8-$i.json"
done
kernels_restore
