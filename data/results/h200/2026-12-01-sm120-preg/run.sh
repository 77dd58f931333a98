#!/usr/bin/env bash
# One device call (issue 15): the P-in-registers variant of the sm_120 kernel (config 4) beside the committed one
# (config 1): build, 78-case smoke of config 4 against the fp64 oracle, split + combine GPU time on five shapes.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c "import json, sys; from kdtree_lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=1))" \
  "bash data/results/h200/2026-12-01-sm120-preg/run.sh" > "$OUT/provenance.json"
python3 -m kdtree_lab build --json > "$OUT/build.json"; echo "build rc=$?"
timeout 400 python3 scripts/kernel_profile.py --configs 1,4 --smoke-configs 4 --smoke 60 \
  --shapes headline,big,mem,deploy,b48 --out "$OUT/profile-preg.json" 2>&1 | grep -E "smoke|Error|error" | cut -c1-300
echo "preg rc=${PIPESTATUS[0]}"
