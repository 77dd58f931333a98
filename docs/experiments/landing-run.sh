#!/usr/bin/env bash
# Device calls (issue 52): the whole suite's gates of the patches in STACK (empty since 2026-12-06, when
# draft-wave.patch passed them and landed; indptr-loads-first.patch next: docs/experiments/README.md, queue item 1),
# then issue 52's figures from one run (with an empty STACK, main's):
#   bash docs/experiments/landing-run.sh gates        the parity and graph tests (edge grid + 500 random, 23 capture
#                                                     sizes x 100 replays, calls back to back; 232 and 509 s on two H100s on 2026-12-06)
#   bash docs/experiments/landing-run.sh gates-parity / gates-graphs   the same tests in two calls (test_gpu.py, then
#                                                     test_gpu_graphs.py), where one call does not hold them
#   bash docs/experiments/landing-run.sh gates2 grid  the hook against SGLang and the wgmma tests (~3-4 minutes), then
#                                                     the timings (grid below) in what the call has left
#   bash docs/experiments/landing-run.sh gates3       the four sanitizers over every configuration this GPU launches
#   bash docs/experiments/landing-run.sh fresh        a fresh fp8 draw (60 cases) over every fp8 configuration, to
#                                                     fp8-fresh.json: after a change that moves the e4m3 error, what
#                                                     the docs' fp8 error sentence is generated from (~2.5 minutes)
#   bash docs/experiments/landing-run.sh grid         issue 52's figures from one run: `bench --preset card-floor`
#                                                     (timing library) and the fixed cost (scripts/fixed_cost.py)
#                                                     under the driver's carveout and under KDT_CARVEOUT=100
#   bash docs/experiments/landing-run.sh record       on an H200 only (elsewhere it says so and runs nothing): the grid,
#                                                     then the issue-fp8 grid (`bench --preset issue-fp8`, timing
#                                                     library, SGLang's kernels beside ours): issue 52's run of record
#                                                     (~2 minutes warm with main's libraries prebuilt)
# (run_gates, scripts/session_lib.sh). Where gates, gates2 and gates3 pass: git apply each patch of STACK in its
# order, commit, move the patches and their run scripts to the results folder, then regenerate the tables
# (scripts/readme_tables.py).
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step). tests/test_experiments.py builds STACK
# applied together, in this order.
STACK=()
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
MODES="gates, gates-parity, gates-graphs, gates2, gates3, fresh, grid or record"
for m in "$@"; do
  case "$m" in gates|gates-parity|gates-graphs|gates2|gates3|fresh|grid|record) ;;
    *) echo "landing-run.sh: expected $MODES, found '$m'"; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "landing-run.sh: expected $MODES, found nothing"; exit 2; }
if [[ " $* " == *" record "* ]]; then  # before the prologue: a lent H100 spends nothing on a record not its to make
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [[ "$gpu" != *H200* ]]; then
    echo "landing-run.sh record: the run of record is an H200's, found '${gpu:-no GPU}': nothing run"; exit 0
  fi
fi
for p in "${STACK[@]}"; do
  p=${p#docs/experiments/}  # a name, or the path from the repository's root (an edit made on the way to a call)
  git apply "docs/experiments/$p" || { echo "landing-run.sh: docs/experiments/$p does not apply"; exit 1; }
done
source scripts/device_prologue.sh "bash docs/experiments/landing-run.sh $* (STACK: ${STACK[*]})"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
grid() {  # the stack's issue-52 figures: the card-floor grid, then the fixed cost under both carveouts
  step "card-floor grid"
  KDT_E4M3_TIMING=1 timeout ${GRID_TIMEOUT:-300} python3 -m kdtree_lab bench --preset card-floor \
    --out "$R/bench-card-floor.json" 2>&1 | grep -E "^cuda|rror|Killed|nterrupt" | cut -c1-120
  for cv in driver 100; do
    step "fixed cost, carveout $cv"
    local env_cv=(-u KDT_CARVEOUT); [ $cv = 100 ] && env_cv=(KDT_CARVEOUT=100)
    env "${env_cv[@]}" KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 \
      --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 \
      --out "$R/fixed-cost-$cv.json" 2>&1 | grep -E "^auto|rror" | cut -c1-200
  done
  pack
}
for m in "$@"; do
  case "$m" in
    gates|gates-parity|gates-graphs|gates2|gates3) step "$m"; run_gates "$m" landing "$R" ;;
    grid) grid ;;
    record) grid
            step "issue-fp8 grid"
            KDT_E4M3_TIMING=1 timeout 200 python3 -m kdtree_lab bench --preset issue-fp8 \
              --out "$R/bench-issue-fp8.json" 2>&1 | grep -E "^cuda|rror|Killed|nterrupt" | cut -c1-120
            pack ;;
    fresh) step "fresh fp8 draw"
           timeout 240 python3 scripts/fp8_accuracy.py --fresh 60 --out "$R/fp8-fresh.json" 2>&1 \
             | grep -E "KDT_FRESH_SEED|ours / SGLang|FAIL|rror" | cut -c1-200
           pack ;;
  esac
done
