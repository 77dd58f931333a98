"""kdtree-lab: tree-verify attention for MLA models (DeepSeek-V3, Kimi K2) on GPUs no vendor kernel serves.

Subpackages by role, lowest first (``LAYERS``); a module imports only from its own subpackage and the ones
below it, never from one above, and no import cycle exists (tests/test_imports.py derives both from the source):

- ``core``: MLA widths, KV dtypes, draft trees, paths, the CUDA tools, runtime choices, text display.
- ``contract``: SGLang's target-verify buffer contract and the audit against it.
- ``kernels``: the C ABI, build, loader, implementation registry, launch plan, dispatch, the Triton twin.
- ``checks``: oracle, batch builder, parity, benchmark, CUDA graphs, capture audit, sanitizer cases.
- ``sglang``: the verify hook for SGLang's Triton backend, the launcher and plugin that install it.
- ``generate``: speculative decoding on a small MLA model (transformers' DeepSeek-V3 classes) over the paged latent
  pool, every verify path in the same loop, every token checked against greedy decoding.
- ``budget``: the memory budget and its widget (torch-free).
- ``speculate``: what speculation buys end to end: acceptance, the step model, tokens per second by context.
- ``lab``: the notebook runner, profiles, records, provenance, doctor, figures, the GPU fleet, the proof that
  SGLang's own backend drives the hook.
- ``cli``: the ``kdtree-lab`` command, one module per command.

The public API for an engine (SGLang's hook uses it too): ``kdtree_lab.VerifyAttention``, the plan/run object of
``kernels.attention``, imported on first use so that ``import kdtree_lab.budget...`` stays torch-free.
"""

__version__ = "0.1.0"
__all__ = ["VerifyAttention"]

LAYERS = ("core", "contract", "kernels", "checks", "sglang", "generate", "budget", "speculate", "lab", "cli")


def __getattr__(name: str):
    if name == "VerifyAttention":
        from .kernels.attention import VerifyAttention

        return VerifyAttention
    raise AttributeError(f"module 'kdtree_lab' has no attribute {name!r}")
