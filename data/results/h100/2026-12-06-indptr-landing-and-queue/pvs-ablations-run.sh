#!/usr/bin/env bash
# One device call (issue 52, the bf16 headline and the mma.sync share): what bounds the bf16 role split in its landed
# form (CfgPvs: the QK warps only multiply, the PV warps take the softmax), by ablation, as the first form was
# measured on 2026-12-05 (data/results/h200/2026-12-05-short-calls-and-ablations/call3-roles-ablations/).
# pvs-ablations.patch adds four switches to CfgPvs, all off (main's SASS then): Q the QK MMAs of the odd latent k16
# steps (32 of a QK warp's 72 a tile), W the PV group's barrier each tile, P half the PV MMAs and their V
# ldmatrix, R the refill loads after the first four tiles. Each setting is one library (prebuilt here:
# docs/experiments/README.md),
# timed at the bf16 headline (B = 1, L = 200k, N = 16, H = 8), at B = 8 and at a compute-bound shape of issue 52's
# grid that a call can time quickly (B = 1, L = 32k, N = 64, H = 16); main first and last (the call's spread).
# Results are wrong by design: only the times count. ~4 minutes with .prebuilt, ~8 without. Carry .whl-sglang and .prebuilt.
# Results in $OUT/results.tar.gz (packed after each setting).
#   bash docs/experiments/pvs-ablations-run.sh
#   bash docs/experiments/pvs-ablations-run.sh patches DIR   here, before the call: each setting's sources as a patch
#                                                           in DIR, for scripts/prebuild.py (no GPU, kernels/ restored)
set -uo pipefail
SETTINGS="W Q P R QP QR PR QPR"
F=kernels/mma_sync/verify_sm120_roles.cuh
ablate() {  # LETTERS (a subset of QWPR, or "main"): the patch with those switches on, the rest off
  kernels_restore
  [ "$1" = main ] && return 0
  git apply docs/experiments/pvs-ablations.patch || exit 1
  local x v
  for x in Q W P R; do
    v=false; [[ $1 == *$x* ]] && v=true
    sed -i "s/ABL_$x = [a-z]*/ABL_$x = $v/" $F
    grep -q "ABL_$x = $v" $F || { echo "ablate $1: no ABL_$x in $F"; exit 1; }
  done
}
if [ "${1:-}" = patches ]; then
  source scripts/session_lib.sh  # kernels_snapshot / kernels_restore
  [ -n "${2:-}" ] || { echo "pvs-ablations-run.sh patches: expected a folder, found nothing"; exit 2; }
  mkdir -p "$2"; kernels_snapshot; trap kernels_restore EXIT  # kernels/ as it was, however this ends
  for s in $SETTINGS; do ablate $s; git diff -- kernels > "$2/abl-$s.patch"; done
  echo "$(ls "$2"/abl-*.patch | wc -l) setting patches in $2"; exit 0
fi
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/pvs-ablations-run.sh"
R=$KDT_PACK_DIR
kernels_snapshot  # main's kernels/
time_pvs() {  # NAME
  echo "== $1"
  timeout 90 python3 -m kdtree_lab bench --out "$R/pvs-$1.json" --impl cuda_sm120_roles --shape 1,200000,16,8,bf16 \
    --shape 8,200000,16,8,bf16 --shape 1,32768,64,16,bf16 2>&1 | grep -E "^cuda|rror|Killed" | cut -c1-80
  pack
}
for s in main $SETTINGS; do ablate $s; time_pvs $s; done
ablate main; time_pvs main-again
kernels_restore
