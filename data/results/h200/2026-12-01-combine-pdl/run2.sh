#!/usr/bin/env bash
# Second device call (issue 18, part 1): the combine with eight independent loads per warp; correctness smoke of
# the sm_120 kernel and v4 with it, split/combine times without PDL, and the quick bench with and without PDL.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c "import json, sys; from kdtree_lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=1))" \
  "bash data/results/h200/2026-12-01-combine-pdl/run2.sh" > "$OUT/provenance-run2.json"
python3 -m kdtree_lab build --json > "$OUT/build-run2.json"; echo "build rc=$?"
KDT_NO_PDL=1 timeout 120 python3 scripts/kernel_profile.py --configs 1,3 --smoke 20 --shapes headline,mem,deploy,b48 \
  --out "$OUT/profile-combine-run2-nopdl.json" 2>&1 | grep -E "smoke|rror" | cut -c1-200; echo "profile rc=${PIPESTATUS[0]}"
python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --timing graph --out "$OUT/bench-quick-run2-pdl.json" > /dev/null 2>&1; echo "bench pdl rc=$?"
KDT_NO_PDL=1 python3 -m kdtree_lab bench --preset quick --impl cuda,cuda_sm120 --timing graph --out "$OUT/bench-quick-run2-nopdl.json" > /dev/null 2>&1; echo "bench nopdl rc=$?"
