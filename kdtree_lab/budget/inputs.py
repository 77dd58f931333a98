"""The deployment a budget is asked about (:class:`BudgetInputs`), the error that names an impossible input, and
the byte units the budget counts in."""

from __future__ import annotations

from dataclasses import dataclass, field

from .prefill_activations import DEFAULT_MARGIN

MIB = 1 << 20
GIB = 1 << 30


def mib(nbytes: float) -> float:
    """Bytes as MiB for a table: whole MiB from 100 up (a table prints 3 significant digits of a float)."""
    v = nbytes / MIB
    return round(v) if abs(v) >= 100 else round(v, 1)


class BudgetInputError(ValueError):
    """An impossible or unknown input; the message names it."""


@dataclass(frozen=True)
class BudgetInputs:
    """One deployment. ``context`` and ``concurrency``: the per-request context (tokens) wanted at that many
    concurrent requests. ``mem_fraction`` None = report the largest safe fraction as the choice."""

    gpu: str = "rtx-pro-6000"
    model: str = "kimi-k2"
    tp: int = 8
    quant: str = "int4"
    kv_dtype: str = "bf16"  # bf16 | fp8
    max_bs: int = 8  # largest verify batch captured (cuda-graph-max-bs / max-running-requests)
    draft_tokens: int = 16  # N (--speculative-num-draft-tokens)
    topk: int = 4  # --speculative-eagle-topk: > 1 drafts a tree, 1 a chain of spec_steps + 1 tokens
    spec_steps: int = 3  # --speculative-num-steps
    spec_algorithm: str = "EAGLE"  # EAGLE | EAGLE3 (trees or chains) | DFLASH (a chain: topk 1, one step)
    model_path: str = "MODEL_PATH"  # what the launch line passes to --model-path
    draft_model_path: str = "DRAFT_MODEL_PATH"  # ... and to --speculative-draft-model-path
    nsplit: int = 0  # the split count; 0 = the kernel's own rule (launch_plan.default_nsplit), as the hook runs it
    partial_bytes: int = 4  # fp32 split partials
    context: int = 200_000
    concurrency: int = 8
    chunked_prefill: int | None = None  # None: SGLang's default for the GPU
    mem_fraction: float | None = None
    context_overhead_mib: float | None = None  # CUDA context + NCCL before weights load; None: the GPU preset's
    # (calibrate: G)
    graph_pool_mib_per_size: float = 64.0  # CUDA-graph pool per captured size (estimate; calibrate)
    margin_mib: float = 1024.0
    deep_ep: bool = False
    # what the activation line (chunked prefill) follows: "measured" (the committed H200 measurement of these
    # shapes, else the model, labelled so), "modelled", or "sglang-reserve" (SGLang's 1.5 MiB per token)
    activation_model: str = "measured"
    activation_margin: float = DEFAULT_MARGIN  # over the measured / modelled peak (fraction)
    cuda_graphs: bool = True  # False: --disable-cuda-graph (no graph-time buffers, no graph pool)
    verify_kernel: bool = True  # False: stock SGLang verify (no kdtree workspace, plain sglang.launch_server)
    measured: dict[str, float] = field(default_factory=dict)  # calibration: name -> bytes (G, weights,
    # draft_weights, workspace, graph_pool)
