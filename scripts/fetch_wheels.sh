#!/usr/bin/env bash
# Download the wheels the lent H200 needs (Python 3.12, no network there) into .whl/ (git-ignored; add
# `/.whl/` to .git/info/exclude). The image already has torch, triton, numpy, matplotlib, pyyaml, requests, rich,
# tqdm, aiohttp, anyio, pytest, hypothesis; these are the rest: the notebook stack (nbconvert for the run's
# index.html), pyelftools, SGLang 0.5.23
# with the small packages its attention kernels import, and Dask distributed for --gpus (the fleet extra).
#
# The SGLang wheel is rewritten without its Rust server extensions and multimodal generator
# (scripts/slim_sglang_wheel.py: 39 -> 15 MB). --sglang-state: instead, the wheels scripts/sglang_graph_state.py needs there (SGLang's Triton attention backend
# imports its server stack: openai, tvm-ffi, ...; the image's transformers 5.17 serves it), into .whl-sglang/ (add
# `/.whl-sglang/` to .git/info/exclude); it stays under the 64 MiB a device call carries, so carry it instead of .whl/.
#
# --kernel: the one wheel the library's build and checks need there (pyelftools) into .whl-kernel/ (add `/.whl-kernel/`
# to .git/info/exclude): for kernel calls that need no SGLang (bits, interleaved timings, parity, sanitizers), where
# .whl-sglang (28 MB) beside the tracked tree (30 MB in bytes, 36 MB as the disk counts its 2,600 files) leaves room for
# about 4 prebuilt libraries in the 64 MiB carry (8 were refused for size on 2026-12-07).
#
# --flashmla: the sgl-flash-mla 1.0.0 wheel (FlashMLA, the benchmark's Hopper peer: kdtree-lab bench --preset chain)
# into .whl-flashmla/ (add `/.whl-flashmla/` to .git/info/exclude; 9.9 MB, carried beside .whl-sglang). Install it
# on the device with --no-deps into a folder of its own (its metadata asks for torch >= 2.14.1; the benchmark
# records the exact load error where it does not load).
set -euo pipefail
cd "$(dirname "$0")/.."
PLATFORMS=(--python-version 3.12 --implementation cp --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform any)
if [ "${1:-}" = "--flashmla" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl-flashmla sgl-flash-mla==1.0.0
  du -sh .whl-flashmla
  exit 0
fi
if [ "${1:-}" = "--kernel" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: "${PLATFORMS[@]}" -d .whl-kernel pyelftools \
    || { ls .whl-sglang/pyelftools-*.whl >/dev/null 2>&1 && mkdir -p .whl-kernel \
         && cp .whl-sglang/pyelftools-*.whl .whl-kernel/; }
  ls .whl-kernel/pyelftools-*.whl >/dev/null || exit 1
  du -sh .whl-kernel
  exit 0
fi
if [ "${1:-}" = "--sglang-state" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: "${PLATFORMS[@]}" -d .whl-sglang \
    sglang==0.5.23 pyelftools orjson pybase64 starlette msgspec pydantic pydantic_core annotated_types typing_inspection pyzmq \
    ipython traitlets pexpect ptyprocess prompt_toolkit wcwidth stack_data asttokens executing pure_eval \
    ipython_pygments_lexers matplotlib-inline openai==3.57.0 httpx2 httpcore2 jiter truststore sniffio \
    partial-json-parser dill loguru gguf compressed-tensors==0.18.0 apache-tvm-ffi==0.1.11
  python3 scripts/slim_sglang_wheel.py .whl-sglang/sglang-*.whl
  du -sh .whl-sglang
  exit 0
fi
IMAGE_HAS=(torch triton numpy matplotlib pyyaml requests rich tqdm aiohttp anyio pytest hypothesis)  # the device image's
PKGS=(papermill nbclient nbformat ipykernel ipython jupyter_client jupyter_core traitlets pyzmq tornado comm
      debugpy matplotlib-inline nest-asyncio2 jedi parso pexpect ptyprocess prompt_toolkit wcwidth stack_data
      asttokens executing pure_eval ipython_pygments_lexers fastjsonschema jsonschema jsonschema-specifications
      referencing rpds-py platformdirs entrypoints tenacity pyelftools tzdata ipywidgets widgetsnbextension
      jupyterlab_widgets
      sglang==0.5.23 orjson pybase64 starlette msgspec pydantic pydantic_core annotated_types typing_inspection
      dask distributed cloudpickle toolz partd fsspec locket msgpack sortedcontainers tblib zict click jinja2
      markupsafe nbconvert mistune bleach webencodings tinycss2 pandocfilters defusedxml jupyterlab_pygments
      beautifulsoup4 soupsieve)
python3 -m pip download -q --no-deps --only-binary=:all: "${PLATFORMS[@]}" -d .whl "${PKGS[@]}"
python3 scripts/slim_sglang_wheel.py .whl/sglang-*.whl
# .whl-gpu (add `/.whl-gpu/` to .git/info/exclude): the same without Dask (the fleet extra) and the classic-notebook
# widget extension, what a single-GPU call carries beside the tree
rm -rf .whl-gpu && mkdir .whl-gpu && cp .whl/*.whl .whl-gpu/
for p in dask distributed cloudpickle toolz partd fsspec locket msgpack sortedcontainers tblib zict click \
         widgetsnbextension; do rm -f .whl-gpu/"$p"-*.whl; done
du -sh .whl .whl-gpu
