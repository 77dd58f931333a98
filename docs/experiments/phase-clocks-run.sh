#!/usr/bin/env bash
# One device call (issue 52, the fixed cost): where a short call's ~13 us of split kernel go inside its CTAs. The
# phase library (KDT_PHASE_CLOCKS=1: kernels/common/phase.cuh) stamps each warp's SM cycles and the global timer at
# its CTA's entry, after setup_work, after the mbarriers, after its prologue (QK: Q's two e4m3 terms in registers;
# PV: the first ring tiles issued), at its first tile, after tile 0, after the loop and after its last write, and the
# combine's at its entry, after its PDL wait and at its end, the e4m3 Q pass's at its entry and end;
# kdtree_lab.checks.phase_clocks reads five replays of one captured call per shape and prints the medians. Both e4m3
# forms (timing library) at B = 1, H = 8: the 32-row form at N = 4 over L = 128, 4k and 32k; the 64-row form at N = 16 over 128, 4k and the headline's 200k, and its two short calls again
# under KDT_CARVEOUT=100 (a card's ~28 KB of L1); the bf16 role split over a bf16 pool at N = 16, L = 4k and 200k
# (since the twenty-ninth session its warps stamp too, and so the 64-row e4m3 form's draft block by role). Then the
# normal library's fixed cost at the same short shapes (scripts/fixed_cost.py), the time the stamps' split is read
# against. ~5-6 min.
# Carry .whl-sglang. Results in $OUT/results.tar.gz (packed after each step).
#   bash docs/experiments/phase-clocks-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/phase-clocks-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
# the phase timing library; its checks report sm_120a's 32-row form spilling 4 B in this build (rc 1, expected: the
# H200 runs the sm_90a code, data/results/cpu/2026-12-05-phase-clocks-identity/), and the normal timing library the
# fixed cost below loads, built now so that its build does not eat that step's time limit
KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-phase.json"; echo "phase build rc=$?"
KDT_E4M3_TIMING=1 python3 -m kdtree_lab build --json > "$R/build-timing.json"; echo "timing build rc=$?"
phase() {  # IMPL NAME SHAPES... (CARVEOUT in the environment: KDT_CARVEOUT for this run only; KV: the pool, fp8)
  local impl=$1 name=$2; shift 2
  local cv=(-u KDT_CARVEOUT); [ -n "${CARVEOUT:-}" ] && cv=(KDT_CARVEOUT=$CARVEOUT)
  env "${cv[@]}" KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1 timeout 120 python3 -m kdtree_lab.checks.phase_clocks \
    --impl "$impl" --kv "${KV:-fp8}" $(printf -- "--shape %s " "$@") --out "$R/phase-$name.json" 2>&1 | tail -40
  pack
}
phase cuda_sm120_e4m3_32 e4m3-32 1,128,4,8 1,4096,4,8 1,32768,4,8
phase cuda_sm120_e4m3 e4m3-64 1,128,16,8 1,4096,16,8 1,200000,16,8
# the 64-row form's short calls with an sm_120 card's L1 (~28 KB): where its 5 us under KDT_CARVEOUT=100 go
CARVEOUT=100 phase cuda_sm120_e4m3 e4m3-64-l1 1,128,16,8 1,4096,16,8
# the bf16 role split (its draft block is the 64-row e4m3 form's): a short call and the bf16 headline
KV=bf16 phase cuda_sm120_roles roles 1,4096,16,8 1,200000,16,8
KDT_E4M3_TIMING=1 timeout 100 python3 scripts/fixed_cost.py --kv fp8 --impls cuda_sm120_e4m3_32,cuda_sm120_e4m3 \
  --drafts 4,16 --lengths 128,4096 --nsplit 8 --repeat 10 --out $R/fixed-cost.json 2>&1 | grep -E "floor|rror|^auto " \
  | cut -c1-400
pack
