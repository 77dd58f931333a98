#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline): why the QK warp's 16 fewer MMAs a tile (e4m3-one-term-steps.patch)
# bought -6.9% at B = 8 and -0.6% at the headline (B = 1) in the same interleaved run (H100, 2026-12-07, forty-fourth
# session: data/results/h100/2026-12-07-mma-issue-and-one-term/). A tile takes about as long at both shapes (97
# tiles a CTA at B = 1, 782 at B = 8, one CTA a SM), so the difference is in what holds a tile, not in the fixed cost.
# Steps: main against the patch interleaved at B = 1, 2, 4, 8 (L 200k, N 16, H 8) and B = 1, L 32k (where between
# 1 and 8 the saving appears); then Nsight Compute (scripts/ncu_profile.sh, timing libraries, one launch, locked clock)
# on main and on the patch at the headline and at B = 8 (`deploy`): cycles and where the QK warps wait.
# Predicted (written 2026-12-07 before the run): the ncu cycles move as the graph replays did (headline -0 to -2%,
# B = 8 -5 to -7%), so the clock is not the cause; the saving grows with B (B = 2 -1 to -3%, B = 4 -3 to -6%); at
# the headline the patch's QK warps wait longer at the loop head (the next K tile or a free P buffer: the PV warps'
# refill path the bound there, 2026-12-04's ablation), at B = 8 not.
# Revised the same day, still before the run (its arithmetic corrected before any run too): per tile B = 1 takes
# ~1.15 us (its 4k call's 24.5 us taken off) and B = 8 ~1.27, less than the patch's B = 8 tile (1.18). A 1 ms call of MMAs back to back may hold a lower SM clock
# (power) than a 136 us one: then B = 8's tile is the scheduler's issue in cycles at a lower clock, and B = 1's,
# at a higher clock, falls to a path that does not scale with the clock (the ring's DRAM refill, ~1.15 us a tile), which
# the patch does not shorten. If so, nvidia-smi's SM clock during the A/B reads lower at B = 8 than at B = 1, and under
# ncu's locked clock both shapes take the same cycles a tile and the patch cuts both by 4-7%.
# Read afterwards here: `python scripts/ncu_phases.py FILE.source.csv.gz` (phases), then `--mma-split N` with N the
# QK loop's execution count from its phase table (50,000 at the headline on 2026-12-06).
# Carry .whl-sglang and .prebuilt (python scripts/prebuild.py main docs/experiments/e4m3-one-term-steps.patch).
# Results in $OUT/results.tar.gz. ~6 minutes.
#   bash docs/experiments/e4m3-one-term-ncu-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r
source scripts/device_prologue.sh "bash docs/experiments/e4m3-one-term-ncu-run.sh"
R=$KDT_PACK_DIR; P=docs/experiments/e4m3-one-term-steps.patch
kernels_snapshot
step "libraries, main"
build_libs main "$R"
git apply $P || exit 1
step "libraries, patch"
build_libs patch "$R"
kernels_restore
step "interleaved A/B: main (A) and the patch (B) by batch (nvidia-smi samples the clocks meanwhile)"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv -lms 50 > "$R/clocks-ab.csv" 2>&1 &
SMI=$!; echo "$(date -u +%T.%3N) start" > "$R/ab-by-batch.txt"
timeout 200 python3 -m kdtree_lab.checks.ab_interleave --lib-a "$R/build-timing-main.json" \
  --lib-b "$R/build-timing-patch.json" --impl cuda_sm120_e4m3 --shape 1,200000,16,8,fp8 --shape 2,200000,16,8,fp8 \
  --shape 4,200000,16,8,fp8 --shape 8,200000,16,8,fp8 --shape 1,32768,16,8,fp8 --rounds 8 \
  --out "$R/ab-interleave-by-batch.json" 2>&1 | while IFS= read -r l; do echo "$(date -u +%T.%3N) $l"; done \
  | tee -a "$R/ab-by-batch.txt"  # each shape's line stamped as it ends: its clock samples lie since the one before
kill $SMI 2>/dev/null
pack
profile() {  # SHAPE TAG: ncu at one shape on the tree as it is now
  NCU_TIMEOUT=150 bash scripts/ncu_profile.sh cuda_sm120_e4m3 fp8 $1 "$R" 2>&1 | tail -1
  for f in "$R"/ncu-cuda_sm120_e4m3-fp8-$1.*; do mv "$f" "${f/fp8-$1/fp8-$1-$2}"; done
  grep -E "^ +(Elapsed Cycles|SM Frequency|Duration) " "$R/ncu-cuda_sm120_e4m3-fp8-$1-$2.txt" | head -3
  gzip -f "$R"/*.csv 2>/dev/null; rm -f "$R"/*.ncu-rep
  pack
}
for shape in headline deploy; do  # the headline's pair first: a call cut short keeps a whole pair
  step "ncu $shape, main"
  profile $shape main
  git apply $P || exit 1
  step "ncu $shape, patch"
  profile $shape patch
  kernels_restore
done
pack
