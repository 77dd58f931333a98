#!/usr/bin/env bash
# One device call (issue 52, the fixed cost and the fp8 headline): Nsight Compute on the 64-row e4m3 form (timing
# library, what the grids time) at its fixed-cost shape (B 1, L 4k, N 16, H 8: `short`), never profiled, and at the
# fp8 headline (B 1, L 200k, N 16, H 8), on main. The headline's last profile is an H100's of the same kernel sources
# (data/results/h100/2026-12-06-ncu-and-refill-first/call2-ncu/: 227,430 cycles); on an H200 this one adds its
# memory, on an H100 it repeats that one (the spread between calls). Read afterwards on the CPU machine:
# `python scripts/ncu_phases.py ncu-cuda_sm120_e4m3-fp8-short.source.csv.gz` (its phases), then `--instructions N`
# with a phase's execution count to list that loop. ~2 minutes warm.
# Carry .whl-sglang and .prebuilt (main's timing library: python scripts/prebuild.py main). Results in
# $OUT/results.tar.gz (pack, scripts/session_lib.sh).
# Predicted (written 2026-12-06, before any run; its call was refused that session): at the short shape the
# once-a-CTA phases (prologue, epilogue, the draft block) >= 50% of the samples, the two-tile loops under half; at the
# headline within 3% of 227,430 cycles on an H100 (210-227k on an H200), the QK loop the largest phase, the QK warps'
# wait for the next K tile <= 7% of their samples.
#   bash docs/experiments/ncu-e4m3-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/n  # the prologue empties it, then writes provenance.json and build.json there; pack tars it
N=$KDT_PACK_DIR
t0=$(date -u +%T)
source scripts/device_prologue.sh "bash docs/experiments/ncu-e4m3-run.sh" > /tmp/ncu-prologue.txt 2>&1
mv /tmp/ncu-prologue.txt "$N/prologue.txt"
rc=0
for shape in short headline; do
  NCU_TIMEOUT=120 bash scripts/ncu_profile.sh cuda_sm120_e4m3 fp8 $shape "$N" >> "$N/ncu-stdout.txt" 2>&1 || rc=$?
done
gzip -f "$N"/*.csv 2>/dev/null
rm -f "$N"/*.ncu-rep
nvidia-smi > "$N/nvidia-smi.txt" 2>&1
{ echo "start $t0 end $(date -u +%T) rc $rc"; cat "$N/ncu-stdout.txt"; ls "$N"; } > "$N/log.txt"
pack
cat "$N/log.txt"
exit $rc
