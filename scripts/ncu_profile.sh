#!/usr/bin/env bash
# Nsight Compute on one forced configuration at one shape of scripts/kernel_profile.py (device machine; the project
# built and importable). Usage: bash scripts/ncu_profile.sh IMPL KV SHAPE [OUTDIR]
#   IMPL: a forced implementation (cuda_wgmma_v5, cuda_sm120_e4m3, ...), KV: bf16 | fp8, SHAPE: headline, deploy, ...
# Writes OUTDIR/ncu-IMPL-KV-SHAPE.{ncu-rep, txt (the details page), raw.csv (every metric, the stall reasons among
# them), source.csv (SASS with its warp-stall samples)}. The sm_120 e4m3 configuration runs the timing library
# (KDT_E4M3_TIMING=1) so its instruction stream is sm_120a's. ncu locks the SM clock (about 1.38 GHz on the H200):
# compare cycles, not microseconds, with graph-replay times.
set -uo pipefail
impl=$1 kv=$2 shape=$3 out=${4:-$OUT}
name="$out/ncu-$impl-$kv-$shape"
timing=""
[[ $impl == *e4m3* ]] && timing=1
KDT_E4M3_TIMING=$timing timeout "${NCU_TIMEOUT:-240}" ncu --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section InstructionStats \
  --section SourceCounters --section LaunchStats --section Occupancy -k regex:'verify_(sm120|wgmma)' --launch-count 1 \
  -f -o "$name" python3 scripts/kernel_profile.py --out /tmp/kernel-profile --smoke 0 --plain 2 --configs "$impl" \
  --kv-dtype "$kv" --shapes "$shape" > "$name.log" 2>&1
rc=$?
echo "ncu $impl $kv $shape rc=$rc"
[ -f "$name.ncu-rep" ] || exit 1
ncu --import "$name.ncu-rep" --page details > "$name.txt" 2>&1
ncu --import "$name.ncu-rep" --page raw --csv > "$name.raw.csv" 2>&1
ncu --import "$name.ncu-rep" --page source --csv --print-source sass > "$name.source.csv" 2>&1
exit $rc
