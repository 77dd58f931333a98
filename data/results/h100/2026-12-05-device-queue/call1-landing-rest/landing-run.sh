#!/usr/bin/env bash
# Device calls (issue 52): the gates of the measured changes that wait to land, passed once for all of them together.
# Each change below was timed on 2026-12-05 against main in the same call (data/results/h200/
# 2026-12-05-short-calls-and-ablations/: the 64-row e4m3 form's V-first refill -4 to -5% at the fp8 headline; prefix
# splits of at least 64 tokens 1.2-3.2 us less per call at L = 128). Gated one by one they would take a V-first call
# and three short-split calls (~36 device-minutes, more than a session holds); together, three calls (~27 minutes).
# The short splits move every CUDA configuration's split ranges, v5's on the H200 too, so the gates are the whole
# GPU suite:
#   bash docs/experiments/landing-run.sh gates     the parity and graph tests (edge grid + 500 random, 23 capture
#                                                  sizes x 100 replays, calls back to back)
#   bash docs/experiments/landing-run.sh gates2    the hook against SGLang and the wgmma tests
#   bash docs/experiments/landing-run.sh gates3    the four sanitizers over every configuration this GPU launches
#   bash docs/experiments/landing-run.sh rest      the 11 tests of gates that the 2026-12-05 call (gates and gates2 in
#                                                  four pytest-xdist workers, cut off at 520 s) did not reach: every
#                                                  fp8 pool's edge grid + 500 random and 23 sizes x 100 replays, the
#                                                  bf16 v4 calls back to back (~4 minutes serially)
# (run_gates, scripts/session_lib.sh; each ~9 minutes serially). On 2026-12-05 every test of gates and gates2 but
# rest's 11 passed, and gates3 was clean (data/results/h100/2026-12-05-landing-gates/). Where rest passes too: git
# apply each patch of STACK in its order, commit, move the patches and their run scripts to the results folder, then regenerate the issue-fp8 grid
# in a call of its own (KDT_E4M3_TIMING=1 python3 -m kdtree_lab bench --preset issue-fp8), scripts/readme_tables.py
# and the docs ("early refill", "MIN_SPLIT_TOKENS").
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step). tests/test_experiments.py builds STACK
# applied together, in this order.
STACK=(e4m3-64-vfirst.patch short-splits.patch)
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
for p in "${STACK[@]}"; do
  git apply "docs/experiments/$p" || { echo "landing-run.sh: docs/experiments/$p does not apply"; exit 1; }
done
grep -q "constexpr int MIN_SPLIT_TOKENS = 64;" kernels/common/frame.cuh || { echo "MIN_SPLIT_TOKENS is not 64"; exit 1; }
source scripts/device_prologue.sh "bash docs/experiments/landing-run.sh $* (STACK: ${STACK[*]})"
R=$KDT_PACK_DIR; mkdir -p $R; mv "$OUT"/*.json $R/
case "${1:-}" in
  gates|gates2|gates3) run_gates "$1" landing "$R" ;;
  rest) gate_tests "$R/rest-landing" "tests/test_gpu.py::test_fp8_pool_edge_grid_and_500_random" \
          "tests/test_gpu_graphs.py::test_fp8_pool_all_23_sizes_capture_and_replay_without_mismatch" \
          "tests/test_gpu_graphs.py::test_calls_back_to_back_in_one_graph_share_the_workspace_safely[cuda-bf16]"
        pack ;;
  *) echo "landing-run.sh: expected gates, gates2, gates3 or rest, found '${1:-}'"; exit 2 ;;
esac
