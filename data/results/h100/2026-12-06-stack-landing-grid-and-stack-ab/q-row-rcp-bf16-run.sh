#!/usr/bin/env bash
# One device call (issue 52, the fixed cost), a check, not what the patch waits for: q-row-rcp-bf16.patch (q_row<true>
# in the bf16 role split's pvs_qk and the Q pass, node_head for pvs_pv's node index) against main with q-row-rcp.patch
# landed. main with it is the form measured on 2026-12-06 byte for byte in every kernel
# (data/results/cpu/2026-12-06-q-row-rcp/), so it lands on the whole suite's gates alone (landing-run.sh gates,
# gates2, gates3 with it in STACK: docs/experiments/README.md, queue item 2). This call times it again where a session
# wants the short calls over main as it is now: ab_patch (outputs of the role split and both e4m3 forms against
# main's, bit for bit; every short call and the headlines for main / patch / main), then a second patch step.
# ~5 minutes with .prebuilt holding both trees' libraries.
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/q-row-rcp-bf16-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/q-row-rcp-bf16-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/q-row-rcp-bf16.patch
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 all cuda_sm120_roles:bf16 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R"; kernels_restore
