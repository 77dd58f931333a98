#!/usr/bin/env bash
# One device call on the H200: install the carried wheels, build, GPU tests, compute-sanitizer, the notebook
# sequence under the h200 profile; everything lands in $OUT (results.tar.gz + session.log).
# Usage (from the repo root on the device machine): bash scripts/h200_session.sh [pytest -k expression]
# Switches: SKIP_GPU_TESTS=1, GPU_TESTS="tests/...", SANITIZERS="memcheck racecheck synccheck initcheck" ("" for none),
# SANITIZE_IMPLS=cuda,cuda_sm120 (all: every configuration this GPU launches), SANITIZE_TIMEOUT=240 (seconds per tool), SKIP_NOTEBOOKS=1, NOTEBOOKS=00,05 (a subset),
# NB_PARAMS='key=value;key=value' (notebook parameters passed to `kdtree_lab run -p`, ';'-separated: a value may hold
# commas, e.g. NB_PARAMS='impls=["cuda_sm120_roles","triton"];impl=cuda_sm120_roles'),
# BENCH=quick|issue, BENCH_IMPLS=cuda,..., BENCH_TIMING=graph|eager,
# EXTRA='command' (run after the benchmark, before packing; write under $OUT/work), WHEELS=.whl (the carried wheel
# folder; without notebooks a smaller set does: sglang and what kdtree_lab imports, no Jupyter stack).
# The GPU tests print one line per test (a call cut off mid-suite still shows what passed); the default list takes
# about 11 minutes on the H200 (2026-12-02: 108 tests in ~8.5 min, test_gpu_graphs.py 2.6 min), more than one
# device call: split it with GPU_TESTS (e.g. the graphs file alone).
# results.tar.gz is rewritten at the start of every step, so a call cut off by its time limit still returns
# everything the finished steps wrote (the device returns at most 8 loose files).
set -uo pipefail
source scripts/session_lib.sh
session_start

step "install carried wheels and the project"
install_wheels || exit 1
[ -n "${SKIP_NOTEBOOKS:-}" ] || python3 -m ipykernel install --user --name python3 >/dev/null || exit 1

step "doctor and provenance"
python3 -m kdtree_lab doctor --json | tee "$OUT/work/doctor.json"
write_provenance "bash scripts/h200_session.sh $*" "$OUT/work/provenance.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

step "build"
python3 -m kdtree_lab build --json > "$OUT/work/build.json"; echo "build rc=$?"

step "GPU tests"
[ -n "${SKIP_GPU_TESTS:-}" ] || python3 -m pytest -q -m gpu ${GPU_TESTS:-tests/test_gpu.py tests/test_gpu_wgmma.py tests/test_gpu_graphs.py tests/test_gpu_sglang_hook.py} ${1:+-k "$1"} --junitxml="$OUT/work/gpu-tests.xml" -p no:cacheprovider -v --durations=15 2>&1

step "compute-sanitizer on small cases"
run_sanitizers "${SANITIZERS-memcheck racecheck synccheck initcheck}" "${SANITIZE_IMPLS:-}" "$OUT/work"

step "notebooks under the h200 profile"
nb_params=()
IFS=';' read -ra nb_pairs <<< "${NB_PARAMS:-}"
for pair in "${nb_pairs[@]}"; do [ -n "$pair" ] && nb_params+=(-p "$pair"); done
[ -n "${SKIP_NOTEBOOKS:-}" ] || python3 -m kdtree_lab run --profile h200 ${NOTEBOOKS:+--only "$NOTEBOOKS"} "${nb_params[@]}" \
  --out "$OUT/work/run" --no-progress; echo "run rc=$?"

if [ -n "${BENCH:-}" ]; then
  step "benchmark preset $BENCH"
  python3 -m kdtree_lab bench --preset "$BENCH" ${BENCH_IMPLS:+--impl "$BENCH_IMPLS"} --timing "${BENCH_TIMING:-graph}" \
    --out "$OUT/work/bench-$BENCH.json"
  echo "bench rc=$?"
fi

if [ -n "${EXTRA:-}" ]; then
  step "extra: $EXTRA"
  bash -c "$EXTRA"; echo "extra rc=$?"
fi

step "pack"
rm -rf "$OUT/work"
ls -la "$OUT"
