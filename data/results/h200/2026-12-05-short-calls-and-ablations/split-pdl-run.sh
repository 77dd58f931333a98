#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the split kernel launched by programmatic dependent launch too
# (split-pdl.patch): every split kernel waits (griddepcontrol.wait) at the start of setup_work before it touches
# global memory, the combine triggers its dependents at its start, and the launcher starts the split kernel with
# programmatic stream serialization (KDT_NO_PDL=1 now turns both off). Inside a graph of calls back to back, the next
# call's split kernel then launches while the previous call's combine runs, as the combine does behind the split
# kernel since the eighth session (which hid a ~4 us gap there). Steps: the chained-calls test on main and on the
# patch (normal library: five calls back to back in one graph through one workspace, every configuration this GPU
# runs, both pools: bit for bit as each call alone and within the oracle's tolerance), then scripts/fixed_cost.py on
# main and the patch twice each in alternation (timing library; the build cache holds both), B = 1, L = 128 and 4k,
# N = 4 and 16, H = 8, over fp8 (both e4m3 forms) and bf16 (the role split, v5), each automatic-split row also as
# the marginal cost of one call among ten in a graph. ~8 minutes. Carry .whl-sglang. Results in
# $OUT/results.tar.gz.
#   bash docs/experiments/split-pdl-run.sh
#   bash docs/experiments/split-pdl-run.sh gates / gates2 / gates3    then, where both alternations found 1 us or
#     more below main: the gates (session_lib.sh run_gates: every GPU test, the hook against SGLang and the wgmma
#     tests, the four sanitizers over every configuration; each ~9 minutes)
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/split-pdl-run.sh $*"
P=docs/experiments/split-pdl.patch; R=$KDT_PACK_DIR
mkdir -p $R; mv "$OUT"/*.json $R/
case "${1:-}" in  # the gates, in three calls of their own, where both alternations found 1 us or more
  gates|gates2|gates3) git apply $P || exit 1; run_gates "$1" pdl "$R"; exit 0 ;;
esac
kernels_snapshot
chained() {  # NAME: the chained-calls test (normal library), every configuration this GPU runs, both pools
  echo "== chained $1"
  timeout 240 python3 -m pytest -m gpu -q tests/test_gpu_graphs.py -k back_to_back --junitxml="$R/chained-$1.xml" \
    -p no:cacheprovider 2>&1 | tail -1
  pack
}
chained main
git apply $P || exit 1
chained pdl
fixed() {  # NAME: the fixed cost over both pools (timing library)
  echo "== $1"
  KDT_E4M3_TIMING=1 timeout 150 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
    --drafts 4,16 --lengths 128,4096 --nsplit 131 --repeat 10 --out $R/fixed-fp8-$1.json 2>&1 \
    | grep -E "floor|rror|^auto " | cut -c1-400
  KDT_E4M3_TIMING=1 timeout 150 python3 scripts/fixed_cost.py --kv bf16 --impls cuda_sm120_roles,cuda_wgmma_v5 \
    --drafts 4,16 --lengths 128,4096 --nsplit 131 --repeat 10 --out $R/fixed-bf16-$1.json 2>&1 \
    | grep -E "rror|^auto " | cut -c1-400
  pack
}
for i in 1 2; do
  kernels_restore; fixed main-$i
  git apply $P || exit 1; fixed pdl-$i
done
kernels_restore
for kv in fp8 bf16; do  # per row: each run's end-to-end and marginal us, and each run less main-1
  python3 scripts/fixed_cost_compare.py $R/fixed-$kv-main-1.json $R/fixed-$kv-pdl-1.json $R/fixed-$kv-main-2.json \
    $R/fixed-$kv-pdl-2.json
done
