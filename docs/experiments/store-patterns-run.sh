#!/usr/bin/env bash
# One device call (issue 52, the fixed cost; ~1 minute): how fast one SM stores a CTA's 128 KB of partial rows, by
# store pattern, alone and with every SM storing at once (scripts/store_patterns.cu: the role split's float2
# fragments, the e4m3 forms' float4s, two coalesced forms, and the e4m3 forms' places in bf16). Whether the bytes or
# the pattern hold the 64-row forms' 2.4-4 us epilogue decides between bf16 partials and a transposed store.
# Carry .whl-sglang. Results in $OUT/results.tar.gz.
#   bash docs/experiments/store-patterns-run.sh
set -uo pipefail
WHEELS=${WHEELS:-.whl-sglang}
export KDT_PACK_DIR=/tmp/r  # results, packed into $OUT/results.tar.gz after each step (pack)
source scripts/device_prologue.sh "bash docs/experiments/store-patterns-run.sh"
R=$KDT_PACK_DIR  # the prologue wrote provenance.json and build.json there
step "store patterns"
timeout 240 python3 scripts/store_patterns.py --out "$R/store-patterns.json" 2>&1 | tail -20
pack
