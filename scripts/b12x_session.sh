#!/usr/bin/env bash
# Sourced at the start of each of the two back-to-back device calls that bring b12x onto a warm H200
# (scripts/fetch_b12x.sh makes .b12x-1/ and .b12x-2/; each call carries one, the second within the machine's 30 s of
# idle warmth): stages what the call carries in /tmp/b12x-stage (kept while the machine stays warm), installs
# pyelftools (the library build's), and once both parts are there, b12x and CuTe DSL 4.8.0 (cu13) into /tmp/site.
# B12X_READY=1 after it when b12x imports; returns 1, naming the missing part, when the second part arrives on a
# machine without the first (it went cold between the calls: carry .b12x-1, then .b12x-2, again).
#   call 1: source scripts/b12x_session.sh && python3 -m kdtree_lab build --json > $OUT/build.json
#   call 2: source scripts/b12x_session.sh && [ "$B12X_READY" = 1 ] && KDT_E4M3_TIMING=1 python3 -m kdtree_lab bench \
#           --preset b12x --out $OUT/bench-b12x.json   (600 s per call: --resume the partial JSON in a later call)
source scripts/session_lib.sh
stage=/tmp/b12x-stage; mkdir -p "$stage" "$OUT"
for d in .b12x-1 .b12x-2; do [ -d "$d" ] && cp --update=none "$d"/* "$stage"/; done
if [ ! -f /tmp/site/.elftools-installed ] && ls "$stage"/pyelftools-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$stage"/pyelftools-*.whl && touch /tmp/site/.elftools-installed
fi
if [ -d .b12x-2 ] && [ ! -f "$stage/ir.xz.part-aa" ]; then
  echo "b12x_session: part 1 (.b12x-1: ir.xz.part-aa) is not staged on this machine: it went cold between the two" \
       "calls; carry .b12x-1, then .b12x-2, again"
  return 1 2>/dev/null || exit 1
fi
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD B12X_COMPILE_CACHE_DIR=/tmp/b12x-cache
B12X_READY=0
unxz_to() { python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), open(sys.argv[1], 'wb'))" "$1"; }
if [ -f "$stage/ir.xz.part-aa" ] && [ -f "$stage/ir.xz.part-ab" ] && [ -f "$stage/rt.xz" ]; then
  if [ ! -f /tmp/site/.b12x-installed ]; then
    # the cutlass-dsl wheels share one folder: installed together into a folder of their own, then merged (pip
    # --target would replace or skip a folder /tmp/site already has), then the cu13 libraries unpacked into it
    rm -rf /tmp/b12x-pip && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target /tmp/b12x-pip "$stage"/b12x-*.whl "$stage"/nvidia_cutlass_dsl*.whl "$stage"/apache_tvm_ffi-*.whl \
      && mkdir -p /tmp/site && cp -a /tmp/b12x-pip/. /tmp/site/ && tar -C /tmp/site -xf "$stage/cu13-small.tar" \
      && cat "$stage"/ir.xz.part-* | unxz_to \
        /tmp/site/nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so \
      && unxz_to /tmp/site/nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so < "$stage/rt.xz" \
      && touch /tmp/site/.b12x-installed
  fi
  python3 -c "from kdtree_lab.checks import b12x; m, e = b12x.load(); print('b12x:', e or 'imports'); raise SystemExit(e is not None)" \
    && B12X_READY=1
fi
echo "b12x staged: $(ls "$stage" | tr '\n' ' ')"
