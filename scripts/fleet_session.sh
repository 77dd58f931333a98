#!/usr/bin/env bash
# One device call on a machine with several GPUs (issue 19's acceptance, e.g. nvidia-h200-x2): every GPU runs the
# notebook sequence under the h200 profile in parallel (one Dask worker per GPU), then the quick benchmark is
# sharded over all GPUs and, for comparison, run on GPU 0 alone. results.tar.gz is rewritten after every step.
# Usage (repo root on the device): NOTEBOOKS=03 bash scripts/fleet_session.sh     (a subset keeps a call < 600 s:
# 03 alone takes ~250 s per GPU, 00,01,02,04,05,06 together ~230 s; BENCH=0 skips the two benchmark runs).
set -uo pipefail
source scripts/session_lib.sh
session_start

step "install carried wheels and the project"
install_wheels || exit 1
python3 -m ipykernel install --user --name python3 >/dev/null || exit 1

step "doctor, provenance, build"
python3 -m kdtree_lab doctor --json > "$OUT/work/doctor.json"
write_provenance "NOTEBOOKS=${NOTEBOOKS:-all} bash scripts/fleet_session.sh" "$OUT/work/provenance.json"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/work/gpus.csv"
python3 -m kdtree_lab build --json > "$OUT/work/build.json"; echo "build rc=$?"

step "the notebook sequence on every GPU"
python3 -m kdtree_lab run --profile h200 --gpus all ${NOTEBOOKS:+--only "$NOTEBOOKS"} --out "$OUT/work/run" --no-progress
echo "run rc=$?"

if [ "${BENCH:-1}" != 0 ]; then
  step "quick benchmark sharded over every GPU"
  python3 -m kdtree_lab bench --preset quick --gpus all --out "$OUT/work/bench-quick-all.json" > /dev/null; echo "bench rc=$?"
  step "quick benchmark on GPU 0 alone"
  python3 -m kdtree_lab bench --preset quick --out "$OUT/work/bench-quick-gpu0.json" > /dev/null; echo "bench rc=$?"
fi

step "pack"
rm -rf "$OUT/work"
ls -la "$OUT"
