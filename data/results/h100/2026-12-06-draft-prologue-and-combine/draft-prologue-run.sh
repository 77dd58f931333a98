#!/usr/bin/env bash
# One device call (issue 52, the fixed cost) for the two patches aimed at the draft block's Q prologue, where one call
# is all the session may get: e4m3-64-q-early.patch (the 64-row e4m3 form's Q loads ahead of its first waits) and
# q-row-rcp.patch (the role-split kernels' Q rows addressed without an integer division), which stack (STACK below,
# built together by tests/test_experiments.py). ab_patch with both applied ("patch"): outputs of the three
# configurations they touch against main's, bit for bit, then the short calls and headlines for main / patch / main;
# then q-early alone ("qearly", fp8: its only kernel), both again, the phase clocks of the 64-row e4m3 form's short
# calls for main, q-early and both, and q-early alone again last (the step a time limit would cut). Each patch's own
# run script and rule in docs/experiments/README.md read these steps: q-early's from qearly-* against main-*, q-row-rcp's
# from patch-* against qearly-*. ~8-9 minutes with .prebuilt holding the trees' libraries.
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/draft-prologue-run.sh
STACK=(e4m3-64-q-early.patch q-row-rcp.patch)
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/draft-prologue-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
A=docs/experiments/${STACK[0]}; BOTH=/tmp/draft-prologue-both.patch
kernels_snapshot  # main's kernels/; both patches touch kernels/ only
for p in "${STACK[@]}"; do cat "docs/experiments/$p"; done > $BOTH  # git apply takes the two in turn
ab_patch $BOTH "$R" 40 all cuda_sm120_roles:bf16 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 || exit 1
git apply $A || exit 1; build_libs qearly "$R"; time_short_calls qearly-1 "$R" fp8; kernels_restore
git apply $BOTH || exit 1; time_short_calls patch-2 "$R"; kernels_restore
phase_clocks_of main "$R" "draft|split|^=="
git apply $A || exit 1; phase_clocks_of qearly "$R" "draft|split|^=="; kernels_restore
git apply $BOTH || exit 1; phase_clocks_of patch "$R" "draft|split|^=="; kernels_restore
git apply $A || exit 1; time_short_calls qearly-2 "$R" fp8; kernels_restore
