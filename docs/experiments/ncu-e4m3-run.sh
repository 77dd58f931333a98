#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline and the fixed cost): Nsight Compute on the 64-row e4m3 form (timing
# library, what the grids time) at the fp8 headline (B 1, L 200k, N 16, H 8) and at its fixed-cost shape (B 1, L 4k,
# N 16, H 8: `short`), on main. The last profile of this form on its timing library is the H200's of 2026-12-02,
# before the Q pass, the V-first refill, the 64-token splits and the stacks of 2026-12-05/06 (the H100's of
# 2026-12-06 ran the normal library, whose e4m3 MMAs are emulated). Read afterwards on the CPU machine:
# `python scripts/ncu_phases.py ncu-cuda_sm120_e4m3-fp8-headline.source.csv.gz` (its phases), then `--instructions N`
# with a phase's execution count (the QK loop's, for one) to list that loop. ~2 minutes warm.
# Carry .whl-sglang and .prebuilt (main's timing library: python scripts/prebuild.py main). Results in
# $OUT/ncu.tar.gz.
# Predicted (written 2026-12-06 22:00 UTC, before any run; the call was refused that session): at the headline
# 200-225k cycles (the 2026-12-02 profile: 244,131; the grid moved 0.149 -> 0.136 ms since, -9%), the QK warps'
# HMMA >= 50% of their samples, their wait for the next K tile <= 7%, the PV warps' wait for P ~20%, the QK loop the
# largest phase; at the short shape the once-a-CTA phases (prologue, epilogue) >= 50% of the samples.
#   bash docs/experiments/ncu-e4m3-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/n  # the prologue empties it, then writes provenance.json and build.json there
N=$KDT_PACK_DIR
t0=$(date -u +%T)
source scripts/device_prologue.sh "bash docs/experiments/ncu-e4m3-run.sh" > /tmp/ncu-prologue.txt 2>&1
mv /tmp/ncu-prologue.txt "$N/prologue.txt"
rc=0
for shape in headline short; do
  NCU_TIMEOUT=120 bash scripts/ncu_profile.sh cuda_sm120_e4m3 fp8 $shape "$N" >> "$N/ncu-stdout.txt" 2>&1 || rc=$?
done
gzip -f "$N"/*.csv 2>/dev/null
rm -f "$N"/*.ncu-rep
nvidia-smi > "$N/nvidia-smi.txt" 2>&1
{ echo "start $t0 end $(date -u +%T) rc $rc"; cat "$N/ncu-stdout.txt"; ls "$N"; } > "$N/log.txt"
tar czf "$OUT/ncu.tar.gz" -C "$N" .
cat "$N/log.txt"
exit $rc
