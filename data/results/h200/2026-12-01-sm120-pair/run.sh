#!/usr/bin/env bash
# One device call (issue 15 experiments): the 2-CTA cluster variant of the sm_120 kernel (config 4) beside the
# committed one (config 1), then bf16 split partials (frame.cuh's BF16_PARTIALS flipped on the device's copy).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c "import json, sys; from kdtree_lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=1))" \
  "bash data/results/h200/2026-12-01-sm120-pair/run.sh" > "$OUT/provenance.json"
python3 -m kdtree_lab build --json > "$OUT/build-pair.json"; echo "build rc=$?"
timeout 330 python3 scripts/kernel_profile.py --configs 1,4 --smoke-configs 4 --smoke 60 \
  --shapes headline,big,mem,deploy,b48 --out "$OUT/profile-pair.json" 2>&1 | grep -E "smoke|headline|Error|error" | cut -c1-300
echo "pair rc=${PIPESTATUS[0]}"
sed -i 's/constexpr bool BF16_PARTIALS = false;/constexpr bool BF16_PARTIALS = true;/' kernels/common/frame.cuh
python3 -m kdtree_lab build --json > "$OUT/build-bf16.json"; echo "build rc=$?"
timeout 150 python3 scripts/kernel_profile.py --configs 1 --smoke-configs 1 --smoke 20 \
  --shapes headline,mem,deploy,b48 --out "$OUT/profile-bf16-partials.json" 2>&1 | grep -E "smoke|headline|Error|error" | cut -c1-300
echo "bf16 rc=${PIPESTATUS[0]}"
