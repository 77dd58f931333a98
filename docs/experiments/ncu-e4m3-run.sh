#!/usr/bin/env bash
# One device call (issue 52, the fp8 headline and B = 8): Nsight Compute on the 64-row e4m3 form (timing library, what
# the grids time) on main, at the fp8 headline (B 1, L 200k, N 16, H 8: `headline`) and at B = 8 (`deploy`, the same
# shape eight requests wide); NCU_SHAPES picks others (`short`, B 1, L 4k, profiled on an H200 on 2026-12-06:
# data/results/h200/2026-12-06-ncu-e4m3/), NCU_IMPL another form: `NCU_IMPL=cuda_sm120_e4m3_32 NCU_SHAPES="mem
# chain8"` profiles the 32-row form at issue 52's ratio shapes at 200k (B = 1 and 8, N = 4, H = 8). Why B = 8: its tile takes what the headline's takes (0.9135 ms over 782
# tiles a CTA against 0.1265 ms over 97, both ~1.15 us a tile on the H100 of 2026-12-07), yet the refill's immediates
# bought the headline 2% and B = 8 0.4%, and the refill owned by warp (eight times the requests) cost B = 1 11-22% and
# B = 8 2.7-3.0x: the memory section (L1 and L2 requests, sectors a request, the stall reasons at the refill's copies)
# at both shapes says whether B = 8 waits on requests (or their translation: B = 8's pool is eight times the
# headline's) where the headline waits on issue. Read afterwards on the CPU machine: `python scripts/ncu_phases.py
# ncu-cuda_sm120_e4m3-fp8-deploy.source.csv.gz` (its phases), then `--instructions N` with a phase's execution count
# to list that loop. ~3 minutes warm.
# Carry .whl-sglang and .prebuilt (main's timing library: python scripts/prebuild.py main). Results in
# $OUT/results.tar.gz (pack, scripts/session_lib.sh).
# Predicted (written 2026-12-07, forty-eighth session, before any run): the headline within 3% of the H100 profile of
# 2026-12-06 (227,430 cycles, before the fourth ring slot: ~212,000 since, -6.7%); at B = 8 eight times the bytes in
# about 7.2x the headline's cycles, its long-scoreboard stalls (the PV warps' waits on the ring) at least twice the
# headline's share, its L2 hit rate lower (eight requests' rows, none shared between CTAs but a split's two row tiles).
# (The prediction of 2026-12-06, for the short shape and the headline: at the short shape the once-a-CTA phases >= 50%
# of the samples; at the headline the QK loop the largest phase, the QK warps' wait for the next K tile <= 7%.)
#   bash docs/experiments/ncu-e4m3-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/n  # the prologue empties it, then writes provenance.json and build.json there; pack tars it
N=$KDT_PACK_DIR
t0=$(date -u +%T)
source scripts/device_prologue.sh "NCU_IMPL=${NCU_IMPL:-cuda_sm120_e4m3} NCU_SHAPES='${NCU_SHAPES:-headline deploy}' bash docs/experiments/ncu-e4m3-run.sh" \
  > /tmp/ncu-prologue.txt 2>&1
mv /tmp/ncu-prologue.txt "$N/prologue.txt"
rc=0
for shape in ${NCU_SHAPES:-headline deploy}; do
  NCU_TIMEOUT=120 bash scripts/ncu_profile.sh "${NCU_IMPL:-cuda_sm120_e4m3}" fp8 $shape "$N" >> "$N/ncu-stdout.txt" \
    2>&1 || rc=$?
done
gzip -f "$N"/*.csv 2>/dev/null
rm -f "$N"/*.ncu-rep
nvidia-smi > "$N/nvidia-smi.txt" 2>&1
{ echo "start $t0 end $(date -u +%T) rc $rc"; cat "$N/ncu-stdout.txt"; ls "$N"; } > "$N/log.txt"
pack
cat "$N/log.txt"
exit $rc
