# Sourced at the start of a one-off device call (kernel experiments; scripts/h200_session.sh has its own steps):
# installs the carried wheels (${WHEELS:-.whl}) into /tmp/site and puts them on the path, writes the provenance of
# the calling command ($1) to $OUT/provenance.json, and builds the library (its checks to $OUT/build.json).
#   source scripts/device_prologue.sh "bash docs/experiments/NAME-run.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${WHEELS:-.whl}"/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c "import json, sys; from kdtree_lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=1))" \
  "$1" > "$OUT/provenance.json"
python3 -m kdtree_lab build --json > "$OUT/build.json"; echo "build rc=$?"
