#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): what the combine and its launch add to a short call, without the
# profiler (the anatomy call of short-splits-run.sh traces the graph with CUPTI; a call that ran it first never
# returned). call-halves.patch adds a timing knob to the launcher, KDT_SPLIT_ONLY=1 (read once per process): the
# split kernel runs and the combine is not launched (results wrong). scripts/fixed_cost.py, each row's end-to-end
# time and its marginal cost inside a graph of ten calls, at B = 1, L = 128 and 4k, N = 4 and 16, H = 8, fp8, both
# e4m3 forms (timing library), in five processes: the whole call, the split kernel alone, the whole call without
# programmatic dependent launch (KDT_NO_PDL=1), the whole call with one preferred shared-memory carveout for every
# kernel (KDT_CARVEOUT=100, the patch's second knob: an SM then keeps its L1 / shared split between the two), and the
# whole call again for the spread between processes. ~6 minutes (each process ~15 s; the rest is the prologue).
# Carry .whl-sglang. Results in $OUT/results.tar.gz.
#   bash docs/experiments/call-halves-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/call-halves-run.sh"
R=$KDT_PACK_DIR; mkdir -p $R; mv "$OUT"/*.json $R/
git apply docs/experiments/call-halves.patch || exit 1
fixed() {  # NAME [VAR=1]: scripts/fixed_cost.py in a process of its own, VAR set in its environment
  echo "== $1"
  env ${2:-} KDT_E4M3_TIMING=1 timeout 150 python3 scripts/fixed_cost.py --kv fp8 \
    --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 --drafts 4,16 --lengths 128,4096 --nsplit 131 --repeat 10 \
    --out $R/halves-$1.json 2>&1 | grep -E "floor|rror|^auto " | cut -c1-400
  pack
}
fixed whole
fixed split-only KDT_SPLIT_ONLY=1
fixed no-pdl KDT_NO_PDL=1
fixed carveout KDT_CARVEOUT=100
fixed whole-again
python3 scripts/fixed_cost_compare.py $R/halves-whole.json $R/halves-split-only.json $R/halves-no-pdl.json \
  $R/halves-carveout.json $R/halves-whole-again.json  # per row: us, and each process less the whole call
