#!/usr/bin/env bash
# b12x (the sm_120 dense-MLA peer, kdtree_lab/checks/b12x.py) for the lent H200, in two parts that each fit one device
# call's 64 MiB beside the tree: its CuTe DSL libraries (nvidia-cutlass-dsl-libs-cu13 4.8.0, the image's CUDA 13) are
# 92 MB zipped, 235 MB unpacked. .b12x-1/: pyelftools (the library build's; from .whl-gpu, scripts/fetch_wheels.sh)
# and the first part of the xz'd MLIR library; .b12x-2/: the rest, the xz'd CuTe DSL runtime, its small files, and the
# b12x 1.5.1 / cutlass-dsl / tvm-ffi wheels (b12x asks for torch >= 2.12: installed --no-deps beside the image's 2.11).
# SGLang does not travel with them (no room): a b12x call times ours and b12x, not SGLang's kernels. Both folders are
# in .gitignore. On the device: scripts/b12x_session.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
PLAT=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_24_x86_64 --platform any)
python3 -m pip download -q "${PLAT[@]}" -d "$tmp" b12x==1.5.1 nvidia-cutlass-dsl==4.8.0 \
  nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0 \
  apache-tvm-ffi==0.1.9
rm -rf .b12x-1 .b12x-2 && mkdir -p .b12x-1 .b12x-2 "$tmp/cu13"
cp .whl-gpu/pyelftools-[0-9]*.whl .b12x-1/
(cd "$tmp/cu13" && python3 -m zipfile -e "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl .)
lib=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
xz -9e -T0 -c "$tmp/cu13/$lib" > "$tmp/ir.xz"  # xz: the device unpacks it with Python's lzma
(cd "$tmp" && split -b 31000000 ir.xz ir.xz.part-)
mv "$tmp/ir.xz.part-aa" .b12x-1/ && mv "$tmp/ir.xz.part-ab" .b12x-2/
xz -9e -T0 -c "$tmp/cu13/nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so" > .b12x-2/rt.xz
(cd "$tmp/cu13" && tar --exclude='*.so' -cf - .) > .b12x-2/cu13-small.tar
mv "$tmp"/b12x-*.whl "$tmp"/nvidia_cutlass_dsl-*.whl "$tmp"/nvidia_cutlass_dsl_libs_base-*.whl \
   "$tmp"/nvidia_cutlass_dsl_libs_core-*.whl "$tmp"/apache_tvm_ffi-*.whl .b12x-2/
du -sh .b12x-1 .b12x-2
