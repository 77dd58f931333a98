#!/usr/bin/env bash
# One device call (issue 52, the bf16 targets): the two steps docs/performance.md plans after the 2026-12-06 profile,
# measured alone and together. pair-sum.patch: the QK pair sums its own scores, two score buffers, the QK group up to
# two tiles ahead. pair-sum-pipelined.patch (a whole diff against main: pair-sum.patch with the pipelined PV order of
# data/results/h100/2026-12-06-pv-pipelined/pv-pipelined-refill-first.patch on it): each PV warp takes the softmax of
# tile t + 1 before its MMAs of tile t, P, factors and flags in three buffers behind P_FULL mbarriers, each ring slot
# released on an EMPTY mbarrier, no per-tile barrier; launch 99,432 -> 101,280 B (the planner's line too). That order
# was 1.6-4.4% slower on main because its wait for S(t + 1) sat before the MMAs of t; with two score buffers the QK
# group can have S(t + 1) written by then. The arithmetic is main's in its order, so both must give main's bits. For
# each patch (the combined one first): both libraries, the role split's smoke (a hang shows here, under a short
# timeout), its parity tests (edge grid + 500 random, the corrupt-indptr flag) and racecheck / synccheck, then main
# (A) against it (B) by kdtree_lab.checks.ab_interleave at the ablations' five shapes (pair-sum's in pair-sum/).
# ~6 minutes with .prebuilt. Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main
# docs/experiments/pair-sum.patch docs/experiments/pair-sum-pipelined.patch). Results in $OUT/results.tar.gz.
# Predicted (written 2026-12-06 before any run): outputs identical for both; pair-sum alone 0 to -1.5% at the four
# long shapes; the pair with the pipelined order -2 to -6% at the compute-bound long shapes (the barrier's 7-10% in
# the ablation, less the P_FULL and EMPTY waits that replace it), the memory-bound shape 0 to -2%, the 4k call within
# 0.5 us.
#   bash docs/experiments/pair-sum-pipelined-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pair-sum-pipelined-run.sh"
R=$KDT_PACK_DIR
step "libraries"
build_libs main "$R"
for name in pair-sum-pipelined pair-sum; do
  D=$R; [ $name = pair-sum ] && { D=$R/pair-sum; mkdir -p "$D"; cp "$R/build-main.json" "$R/build-timing-main.json" "$D/"; }
  step "$name"
  # scripts/session_lib.sh: the patch's libraries, smoke, parity, racecheck / synccheck, reverted (the planner's line
  # too), then main (A) against it (B)
  roles_patch docs/experiments/$name.patch "$D" || exit 1
done
