# Sourced at the start of a one-off device call (kernel experiments; scripts/h200_session.sh has its own steps):
# installs the carried wheels (${WHEELS:-.whl}) into /tmp/site and puts them on the path, writes the provenance of
# the calling command ($1) to $OUT/provenance.json, and builds the library (its checks to $OUT/build.json).
#   source scripts/device_prologue.sh "bash docs/experiments/NAME-run.sh"
source scripts/session_lib.sh
mkdir -p "$OUT"
install_wheels || exit 1
write_provenance "$1" "$OUT/provenance.json"
python3 -m kdtree_lab build --json > "$OUT/build.json"; echo "build rc=$?"
