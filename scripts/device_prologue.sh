# Sourced at the start of a one-off device call (kernel experiments; scripts/h200_session.sh has its own steps):
# installs the carried wheels (${WHEELS:-.whl}) into /tmp/site and puts them on the path, writes the provenance of
# the calling command ($1) to provenance.json, and builds the library (its checks to build.json), both in the call's
# results folder, KDT_PACK_DIR (what pack tars), else $OUT. A results folder under /tmp starts empty: a warm machine
# keeps /tmp between calls, and pack would otherwise ship an earlier call's files in this call's tarball.
#   source scripts/device_prologue.sh "bash docs/experiments/NAME-run.sh"
source scripts/session_lib.sh
mkdir -p "$OUT"
case "${KDT_PACK_DIR:-}" in  # emptied only where named, and resolved, as a folder under /tmp
  /tmp/?*) case "$(realpath -m -- "$KDT_PACK_DIR")" in
             /tmp/?*) rm -rf -- "$KDT_PACK_DIR" && mkdir -p -- "$KDT_PACK_DIR" ;;
           esac ;;
esac
RESULTS=${KDT_PACK_DIR:-$OUT}
mkdir -p -- "$RESULTS"
install_wheels || exit 1
# libraries built before the call (scripts/prebuild.py, carried as .prebuilt or .prebuilt-NAME, several of which a
# checkout may keep for its calls): into build/, where the builds find them by name
for d in .prebuilt .prebuilt-*; do [ -d "$d" ] && python3 scripts/prebuild.py --unpack "$d"; done
write_provenance "$1" "$RESULTS/provenance.json"
python3 -m kdtree_lab build --json > "$RESULTS/build.json"; echo "build rc=$?"
