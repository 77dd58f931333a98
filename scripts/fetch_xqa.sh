#!/usr/bin/env bash
# NVIDIA's XQA MLA sources for scripts/xqa_peer.py, on a machine with network (the GPU machine has none): pip
# downloads the pinned flashinfer-python wheel with --require-hashes (the sha256 in scripts/xqa_source.py is PyPI's
# listing), only its flashinfer/data/csrc/xqa/ goes into .xqa/ (git-ignored) with MANIFEST.json, and pyelftools
# (the one wheel the peer run needs that the H200 image lacks) into .xqa/wheels/. The ~100 MB wheel is deleted;
# .xqa is ~1 MB, so a GPU call can carry it (the whole wheel is more than the 64 MiB a call takes along).
# Usage: bash scripts/fetch_xqa.sh [--wheel PATH]   (PATH: a wheel already downloaded; checked against the same pin)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
wheel=""
case "${1:-}" in
  --wheel) wheel=${2:?--wheel needs a path}; [ $# -eq 2 ] || { echo "usage: $0 [--wheel PATH]" >&2; exit 2; } ;;
  "") ;;
  *) echo "usage: $0 [--wheel PATH]" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$wheel" ]; then
  "$PY" scripts/xqa_source.py requirement > "$tmp/requirements.txt"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$tmp/requirements.txt" -d "$tmp"
  wheel=$(ls "$tmp"/*.whl)
fi
"$PY" scripts/xqa_source.py extract "$wheel" .xqa
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .xqa/wheels pyelftools
du -sh .xqa
