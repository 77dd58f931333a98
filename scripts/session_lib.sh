# Shell pieces the device scripts share (sourced by h200_session.sh, fleet_session.sh, device_prologue.sh).
#   session_start: $OUT/work for results, the whole output also to $OUT/session.log, the run's environment
#   step "what": repack $OUT/results.tar.gz from $OUT/work (a call cut off by its time limit keeps the finished
#     steps; the device returns at most 8 loose files), then announce the next step
#   install_wheels: the carried wheels (${WHEELS:-.whl}) into /tmp/site, put on PYTHONPATH / PATH with the tree
#   write_provenance COMMAND FILE: kdtree_lab.provenance of COMMAND as JSON
OUT=${OUT:-/tmp/out}

session_start() {
  mkdir -p "$OUT/work"
  exec > >(tee -a "$OUT/session.log") 2>&1
  export PYTHONUNBUFFERED=1 MPLBACKEND=Agg TRITON_DEFAULT_FP_FUSION=1
}

pack() { tar -C "$OUT/work" -czf "$OUT/results.tar.gz.tmp" . && mv "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"; }

step() { pack 2>/dev/null; echo; echo "=== $(date -u +%H:%M:%S) $*"; }

install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${WHEELS:-.whl}"/*.whl || { echo "wheel install failed"; return 1; }
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
}

write_provenance() {
  python3 -c "import json, sys; from kdtree_lab.provenance import provenance; print(json.dumps(provenance(sys.argv[1]), indent=2))" \
    "$1" > "$2"
}
