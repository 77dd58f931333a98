#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): the 64-row e4m3 form's draft block reads its Q rows' addresses from a
# table (draft-q-table.patch). After q-row-rcp.patch (node_head, no branch) its QK warps still spent 520 sm_90a / 374
# sm_120a instructions before their first barrier, most of them ten rows' node, head and 64-bit address a lane; here
# the kernel's first 64 threads write the 64 rows' addresses to shared memory (CfgRoles::O_QROWS: 512 B of the swap
# buffer, first written after the QK warps' prologue barrier) before the barrier that follows the mbarriers' init,
# and roles_qk reads them: 329 / 168 (the patch over main with q-row-rcp.patch landed: only the table).
# The same addresses, so the same outputs. ab_patch (outputs of both e4m3 forms against main's, bit for bit; their
# short calls and the fp8 headlines for main / patch / main), a second patch step, then the phase clocks of the 64-row
# form's short calls for main and the patch (the draft block's prologue and end). ~6 minutes with .prebuilt holding
# both trees' libraries; its gates: gates (the 64-row form's parity, graph and hook tests, ~9 minutes), gates-sanitize.
# Carry .whl-sglang and .prebuilt. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/draft-q-table-run.sh [gates|gates-sanitize]
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/draft-q-table-run.sh $*"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
P=docs/experiments/draft-q-table.patch
case "${1:-}" in gates|gates-sanitize) e4m3_64_gates "$1" $P qtable "$R"; exit $? ;; esac
kernels_snapshot  # main's kernels/; the patch touches kernels/ only
ab_patch $P "$R" 40 fp8 cuda_sm120_e4m3:fp8 cuda_sm120_e4m3_32:fp8 || exit 1
git apply $P || exit 1; time_short_calls patch-2 "$R" fp8; kernels_restore
phase_ab $P "$R" "draft|split|^=="
