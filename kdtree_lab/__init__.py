"""kdtree-lab: tree-verify attention for MLA models (DeepSeek-V3, Kimi K2) on GPUs no vendor kernel serves.

Modules, one idea each:

- ``contract`` / ``audit``: SGLang's target-verify buffer contract and the audit against it.
- ``tree``: DDTree / EAGLE draft trees.  ``batch``: verify batches in SGLang's layout.
- ``oracle``: the fp64 reference.  ``build`` / ``loader``: the CUDA kernel's build, checks and loading.
- ``triton_verify`` / ``triton_aot``: the Triton twin and its ahead-of-time compile.  ``parity``: vs the oracle.
- ``capture_audit`` / ``graphs``: capture safety and CUDA graphs.  ``bench``: timings against SGLang.
- ``budget`` / ``budget_widget``: the mem-fraction calculator.  ``sglang_hook``: the verify slot in SGLang.
- ``doctor`` / ``profiles`` / ``runner`` / ``record``: environment, profiles, papermill runner, results.
"""

__version__ = "0.1.0"
