"""kdtree-lab: tree-verify attention for MLA models (DeepSeek-V3, Kimi K2) on GPUs no vendor kernel serves.

Modules, one idea each:

- ``contract`` / ``audit``: SGLang's target-verify buffer contract and the audit against it.
- ``tree``: DDTree / EAGLE draft trees.  ``batch``: verify batches in SGLang's layout.
- ``oracle``: the fp64 reference.  ``build`` / ``loader``: the CUDA kernel's build, checks and loading.
- ``triton_verify``: the Triton twin.  ``parity``: kernel-vs-oracle harness.
- ``doctor`` / ``profiles`` / ``runner`` / ``record``: environment, profiles, papermill runner, results.
"""

__version__ = "0.1.0"
