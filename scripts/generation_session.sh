#!/usr/bin/env bash
# One device call for the generation check (docs/generation.md): install the carried wheels (WHEELS=.whl-gpu:
# SGLang 0.5.23's kernels; the image has torch, triton and transformers), build the library, then each
# `kdtree-lab generate` run named in RUNS ("name|args;name|args"), each writing $OUT/work/<name>/generation.json
# and its log. results.tar.gz is repacked before each run, so a call cut off keeps the runs that finished.
# Usage (device): RUNS='h8-1k|--profile gpu --contexts 1024' bash scripts/generation_session.sh
set -uo pipefail
source scripts/session_lib.sh
session_start
step "install carried wheels"
WHEELS=${WHEELS:-.whl-gpu} install_wheels || exit 1
write_provenance "RUNS='${RUNS:-}' bash scripts/generation_session.sh" "$OUT/work/provenance.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
step "build"
python3 -m kdtree_lab build --json > "$OUT/work/build.json"; echo "build rc=$?"
IFS=';' read -ra runs <<< "${RUNS:-}"
for item in "${runs[@]}"; do
  name=${item%%|*}; args=${item#*|}
  [ -n "$name" ] || continue
  step "generate $name: $args"
  mkdir -p "$OUT/work/$name"
  echo "python3 -m kdtree_lab generate $args --out $OUT/work/$name" > "$OUT/work/$name/command.txt"
  KDTREE_TRACEBACK=1 python3 -m kdtree_lab generate $args --out "$OUT/work/$name" 2>&1 | tee "$OUT/work/$name/log.txt"
  echo "generate $name rc=${PIPESTATUS[0]}"
done
step "pack"
rm -rf "$OUT/work"
ls -la "$OUT"
