"""Memory budget for SGLang 0.5.23 with the kdtree verify kernel: which ``--mem-fraction-static`` to pass.

SGLang's model (shared/research/sglang_contract.md section 6): ``G`` = free memory before weights load;
``mem_fraction_static`` (mfs) = (weights + KV pool) / G; the KV pool gets ``G*mfs - weights`` bytes, i.e.
``floor((G*mfs - weights) / cell)`` tokens with ``cell = 576 * (layers + draft_layers) * kv_dtype_bytes``. Everything
else must fit in the slack ``G*(1 - mfs)``: the Triton backend's graph-time buffers, our workspace, the CUDA-graph
pool, activations (chunked prefill), communication buffers, and a margin. SGLang's own default fraction is computed
before the speculative settings apply and knows nothing of our workspace; this module says what it should be.

All sizes are bytes unless a name says MiB / GiB; token counts are tokens.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field, replace

import yaml

from .contract import sglang_capture_sizes
from .launch_plan import plan
from .paths import DATA

MIB = 1 << 20
GIB = 1 << 30
MLA_MAX_KV_SPLITS = 256  # Triton backend's max_kv_splits for MLA on >= 132-SM parts at long context
LEAN_BLOCK_M = 16  # rows per program of the Triton backend's lean decode partials (decode_attention._LEAN_BLOCK_M)


class BudgetInputError(ValueError):
    """An impossible or unknown input; the message names it."""


@dataclass(frozen=True)
class ModelPreset:
    name: str
    label: str
    layers: int
    heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    draft_layers: int
    weights_gib: dict[str, float]
    sources: dict[str, str]


@dataclass(frozen=True)
class GpuPreset:
    name: str
    label: str
    memory_mib: int
    sms: int
    bandwidth_gbps: float
    row_tile: int  # rows per CTA of the kernel configuration this GPU selects (kdtree_verify_select_config)
    sources: dict[str, str]
    mma_sync_tflops: float | None = None  # bf16 mma.sync m16n8k16 rate, fp32 accumulate (for predictions)


def models() -> dict[str, ModelPreset]:
    raw = yaml.safe_load((DATA / "presets" / "models.yaml").read_text())["models"]
    return {k: ModelPreset(name=k, **v) for k, v in raw.items()}


def gpus() -> dict[str, GpuPreset]:
    raw = yaml.safe_load((DATA / "presets" / "gpus.yaml").read_text())["gpus"]
    return {k: GpuPreset(name=k, **v) for k, v in raw.items()}


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
    nsplit: int = 0  # prefix splits; 0 = the kernel's own rule (loader.default_nsplit), as the SGLang hook runs it
    partial_bytes: int = 4  # fp32 split partials
    context: int = 200_000
    concurrency: int = 8
    chunked_prefill: int | None = None  # None: SGLang's default for the GPU
    mem_fraction: float | None = None
    context_overhead_mib: float = 1024.0  # CUDA context + NCCL before weights load (calibrate: G)
    graph_pool_mib_per_size: float = 64.0  # CUDA-graph pool per captured size (estimate; calibrate)
    margin_mib: float = 1024.0
    deep_ep: bool = False
    measured: dict[str, float] = field(default_factory=dict)  # calibration: name -> bytes


@dataclass(frozen=True)
class Consumer:
    name: str
    bytes: int
    where: str  # "pool" (inside mfs) or "slack" (must fit in G*(1-mfs))
    source: str  # sglang-formula | kdtree | estimate | measured | preset
    # the SGLang tensors this item stands for: (phase, attribute name) as scripts/sglang_graph_state.py records them
    sglang: tuple[tuple[str, str], ...] = ()


@dataclass
class BudgetResult:
    inputs: BudgetInputs
    gpu_bytes: int
    g_bytes: int  # free memory before weights (SGLang's G)
    weights_bytes: int
    cell_bytes: int  # KV bytes per token (all layers)
    consumers: list[Consumer]
    slack_needed_bytes: int
    safe_fraction: float  # the largest mfs whose slack holds every non-pool consumer
    sglang_default_fraction: float
    fraction: float  # the one evaluated (inputs.mem_fraction or safe_fraction)
    kv_tokens: int
    max_context_per_request: int  # at inputs.concurrency requests
    launch_line: str  # empty when the deployment is impossible
    warnings: list[str] = field(default_factory=list)
    impossible: str | None = None  # why no fraction leaves room for a KV pool (then no launch line)

    @property
    def kv_pool_bytes(self) -> int:
        return self.kv_tokens * self.cell_bytes

    def table(self) -> list[dict]:
        rows = [{"consumer": c.name, "MiB": round(c.bytes / MIB, 1), "where": c.where, "source": c.source}
                for c in self.consumers]
        rows.append({"consumer": "KV pool", "MiB": round(self.kv_pool_bytes / MIB, 1), "where": "pool",
                     "source": "sglang-formula"})
        return rows


def kv_cell_bytes(m: ModelPreset, kv_dtype: str) -> int:
    """KV bytes per token over all layers: 576 x (layers + draft layers) x dtype bytes (SGLang's cell size)."""
    elem = {"bf16": 2, "fp8": 1}.get(kv_dtype)
    if elem is None:
        raise BudgetInputError(f"kv_dtype: expected bf16 or fp8, got {kv_dtype!r}")
    return (m.kv_lora_rank + m.qk_rope_head_dim) * (m.layers + m.draft_layers) * elem


def sglang_defaults(memory_mib: int, tp: int) -> tuple[int, int]:
    """SGLang 0.5.23's (chunked_prefill_size, decode cuda-graph max_bs) defaults by GPU memory in MiB
    (arg_groups/memory_hook.py, before speculative settings); pinned by data/contracts/sglang-0.5.23-memory-defaults.json."""
    gib = memory_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 4096, 48 if tp < 4 else 160
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 90:
        return 8192, 256 if tp < 4 else 512
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def sglang_default_fraction(memory_mib: int, tp: int, chunked_prefill: int | None = None, pp: int = 1,
                            mla: bool = True, deep_ep: bool = False, prefill_graphs: bool = False) -> float:
    """SGLang 0.5.23's default ``mem_fraction_static`` (arg_groups/memory_hook.py handle_gpu_memory_settings): the
    GPU's MiB less 512 + 1.5 x activation tokens + TP x PP / 8 GiB + the graph reserve (2 MiB per decode graph
    size, and 1.5 GiB for MLA only when prefill CUDA graphs are on, which they are not by default), at least
    10 GiB above 60 GiB; pinned by data/contracts/sglang-0.5.23-memory-defaults.json."""
    default_chunk, decode_max_bs = sglang_defaults(memory_mib, tp)
    activation_tokens = max(chunked_prefill or default_chunk, 2048)
    reserve_for_graph_mb = decode_max_bs * 2 + (1.5 * 1024 if mla and prefill_graphs else 0)
    reserved = 512 + 1.5 * activation_tokens + tp * pp / 8 * 1024 + reserve_for_graph_mb + (2048 if deep_ep else 0)
    if memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((memory_mib - reserved) / memory_mib, 3)


def triton_graph_buffers(heads: int, max_bs: int, draft_tokens: int, topk: int, steps: int, context: int,
                         sms: int, max_kv_splits: int = MLA_MAX_KV_SPLITS) -> list[Consumer]:
    """The Triton backend's graph-time buffers (target verify, draft decode, draft extend), per section 6.3 and
    as SGLang 0.5.23's own classes allocate them (data/results/h200/*-sglang-graph-state/)."""
    n, s = draft_tokens, max_kv_splits
    backends = 1 + (steps - 1) + 1  # target, one per draft decode step but the last, draft extend
    lean = sms * LEAN_BLOCK_M * (512 + 2) * 4 + sms * 4  # Mp, Lp, Op (fp32) and the locks (int32), per backend
    out = [
        Consumer("target attn_logits (split-K decode partials, unused by verify)", max_bs * n * heads * s * 512 * 4,
                 "slack", "sglang-formula", (("target_verify", "cuda_graph_attn_logits"),)),
        Consumer("target attn_lse", max_bs * n * heads * s * 4, "slack", "sglang-formula",
                 (("target_verify", "cuda_graph_attn_lse"),)),
        Consumer("target cuda_graph_kv_indices", max_bs * n * context * 8, "slack", "sglang-formula",
                 (("target_verify", "cuda_graph_kv_indices"),)),
        Consumer("target verify mask (uint8)", max_bs * n * (context + n), "slack", "sglang-formula",
                 (("target_verify", "_verify_mask.buffer"),)),
    ]
    if steps > 1:
        out.append(Consumer("draft decode attn_logits + lse", (steps - 1) * max_bs * topk * heads * s * (512 + 1) * 4,
                            "slack", "sglang-formula", (("draft_decode", "cuda_graph_attn_logits"),
                                                        ("draft_decode", "cuda_graph_attn_lse"))))
    out.append(Consumer("draft decode kv_indices", steps * max_bs * topk * context * 8, "slack", "sglang-formula",
                        (("draft_decode", "cuda_graph_kv_indices"),)))
    out.append(Consumer("draft extend attn_logits + lse + kv_indices",
                        max_bs * n * heads * s * (512 + 1) * 4 + max_bs * n * context * 8, "slack", "sglang-formula",
                        (("draft_extend", "cuda_graph_attn_logits"), ("draft_extend", "cuda_graph_attn_lse"),
                         ("draft_extend", "cuda_graph_kv_indices"))))
    out.append(Consumer(f"lean decode partials ({backends} backends x {sms} programs)", backends * lean, "slack",
                        "sglang-formula", tuple((ph, f"cuda_graph_lean_{k}") for ph in
                                                ("target_verify", "draft_decode", "draft_extend")
                                                for k in ("Mp", "Lp", "Op", "locks"))))
    return out


def sglang_state_rows(state: dict) -> list[dict]:
    """The budget's graph-time line items beside what SGLang's own classes allocated for the same deployment
    (``state``: the JSON of scripts/sglang_graph_state.py). One row per line item (ratio = SGLang / budget), one for
    SGLang's tensors no item stands for, and the totals. Bytes."""
    inp, widths = state["inputs"], state["widths"]
    if widths["target_verify"] != inp["draft_tokens"] or widths["draft_extend"] != inp["draft_tokens"]:
        raise ValueError(f"widths: the budget sizes verify and draft extend by draft_tokens={inp['draft_tokens']}, "
                         f"SGLang captured {widths}")
    heads = models()[inp["model"]].heads // inp["tp"]
    items = triton_graph_buffers(heads, inp["max_bs"], inp["draft_tokens"], inp["topk"], inp["spec_steps"],
                                 inp["context"], state["sms"], state["phases"][0]["max_kv_splits"])
    held = [(ph["phase"], t) for ph in state["phases"] for t in ph["tensors"]]
    used: set[int] = set()
    rows = []
    for item in items:
        got = [i for i, (ph, t) in enumerate(held)
               if any(ph == want_ph and want in (t["name"], t["name"].split(".", 1)[-1])
                      for want_ph, want in item.sglang)]
        used.update(got)
        sglang_bytes = sum(held[i][1]["bytes"] for i in got)
        rows.append({"item": item.name, "budget": item.bytes, "sglang": sglang_bytes,
                     "ratio": round(sglang_bytes / item.bytes, 4) if item.bytes else None})
    rest = sum(t["bytes"] for i, (_, t) in enumerate(held) if i not in used)
    rows.append({"item": "SGLang tensors no line item stands for", "budget": 0, "sglang": rest, "ratio": None})
    total_budget, total_sglang = sum(r["budget"] for r in rows), sum(r["sglang"] for r in rows)
    rows.append({"item": "total", "budget": total_budget, "sglang": total_sglang,
                 "ratio": round(total_sglang / total_budget, 4)})
    allocated = [ph["allocated_bytes"] for ph in state["phases"]]
    if all(a is not None for a in allocated):
        rows.append({"item": "total as torch's allocator counted it", "budget": total_budget,
                     "sglang": sum(allocated), "ratio": round(sum(allocated) / total_budget, 4)})
    return rows


def compute(inp: BudgetInputs) -> BudgetResult:
    """The whole budget for one deployment; raises BudgetInputError naming an impossible input."""
    ms, gs = models(), gpus()
    if inp.model not in ms:
        raise BudgetInputError(f"model: unknown preset {inp.model!r}; known: {sorted(ms)}")
    if inp.gpu not in gs:
        raise BudgetInputError(f"gpu: unknown preset {inp.gpu!r}; known: {sorted(gs)}")
    m, g = ms[inp.model], gs[inp.gpu]
    if inp.quant not in m.weights_gib:
        raise BudgetInputError(f"quant: {inp.model} has weights for {sorted(m.weights_gib)}, not {inp.quant!r}")
    for name in ("tp", "max_bs", "draft_tokens", "topk", "spec_steps", "context", "concurrency"):
        if getattr(inp, name) < 1:
            raise BudgetInputError(f"{name}: must be >= 1, got {getattr(inp, name)}")
    if inp.nsplit < 0:
        raise BudgetInputError(f"nsplit: must be >= 1, or 0 for the kernel's own split rule, got {inp.nsplit}")
    problem = speculative_problem(inp.spec_algorithm, inp.spec_steps, inp.topk, inp.draft_tokens)
    if problem:
        raise BudgetInputError(problem)
    for name in ("context_overhead_mib", "graph_pool_mib_per_size", "margin_mib"):
        if getattr(inp, name) < 0:
            raise BudgetInputError(f"{name}: a reserve cannot be negative, got {getattr(inp, name)}")
    if m.heads % inp.tp:
        raise BudgetInputError(f"tp: {m.heads} heads do not divide over tp={inp.tp}")
    if inp.mem_fraction is not None and not 0.0 < inp.mem_fraction < 1.0:
        raise BudgetInputError(f"mem_fraction: expected a value in (0, 1), got {inp.mem_fraction}")
    heads = m.heads // inp.tp
    gpu_bytes = g.memory_mib * MIB
    g_bytes = int(inp.measured.get("G", gpu_bytes - inp.context_overhead_mib * MIB))
    weights = int(inp.measured.get("weights", m.weights_gib[inp.quant] * GIB / inp.tp))
    if weights >= g_bytes:
        raise BudgetInputError(f"weights: {weights / GIB:.1f} GiB per GPU ({m.label}, {inp.quant}, tp={inp.tp}) do "
                               f"not fit in {g_bytes / GIB:.1f} GiB free on {g.label}")
    cell = kv_cell_bytes(m, inp.kv_dtype)
    default_chunk, _ = sglang_defaults(g.memory_mib, inp.tp)
    chunk = inp.chunked_prefill or default_chunk
    capture_sizes = sglang_capture_sizes(inp.max_bs)
    consumers = [Consumer("weights (per GPU)", weights, "pool", "measured" if "weights" in inp.measured else "preset")]
    consumers += triton_graph_buffers(heads, inp.max_bs, inp.draft_tokens, inp.topk, inp.spec_steps, inp.context,
                                      g.sms)
    # the workspace the SGLang hook allocates: batch sizes 1..max_bs at the kernel's own split counts
    ws = int(inp.measured.get("workspace", plan(range(1, inp.max_bs + 1), inp.draft_tokens, heads, g.sms, g.row_tile,
                                                inp.nsplit, inp.partial_bytes).workspace_bytes))
    consumers.append(Consumer("kdtree verify workspace", ws, "slack",
                              "measured" if "workspace" in inp.measured else "kdtree"))
    pool = int(inp.measured.get("graph_pool", len(capture_sizes) * inp.graph_pool_mib_per_size * MIB))
    consumers.append(Consumer(f"CUDA-graph pool ({len(capture_sizes)} sizes)", pool, "slack",
                              "measured" if "graph_pool" in inp.measured else "estimate"))
    consumers.append(Consumer(f"activations (chunked prefill {chunk} tokens x 1.5 MiB)", int(1.5 * chunk * MIB),
                              "slack", "sglang-formula"))
    consumers.append(Consumer("communication (NCCL, custom all-reduce)", int(inp.tp / 8 * 1024 * MIB) +
                              (2048 * MIB if inp.deep_ep else 0), "slack", "sglang-formula"))
    consumers.append(Consumer("req_to_token (int32)", (inp.max_bs + 1) * inp.context * 4, "slack", "sglang-formula"))
    consumers.append(Consumer("safety margin", int(inp.margin_mib * MIB), "slack", "estimate"))
    slack = sum(c.bytes for c in consumers if c.where == "slack")
    safe = math.floor((1 - slack / g_bytes) * 1000) / 1000
    default = sglang_default_fraction(g.memory_mib, inp.tp, inp.chunked_prefill, deep_ep=inp.deep_ep)
    frac = inp.mem_fraction if inp.mem_fraction is not None else safe
    rest = g_bytes * frac - weights
    tokens = max(0, int(rest // cell))
    # the smallest fraction whose KV pool holds one request of the full context
    need = math.ceil((weights + inp.context * cell) / g_bytes * 1000) / 1000
    warnings, impossible = [], None
    if safe <= 0 or safe * g_bytes <= weights:
        impossible = (f"no fraction fits: the slack consumers ({slack / GIB:.1f} GiB) and the weights "
                      f"({weights / GIB:.1f} GiB) leave no room for a KV pool in {g_bytes / GIB:.1f} GiB; lower "
                      f"max_bs, context or the split count, raise tp, quantise"
                      + (", or use fp8 KV" if inp.kv_dtype != "fp8" else ""))
    else:
        if rest <= 0:
            warnings.append(f"start-up OOM: weights ({weights / GIB:.1f} GiB) exceed G x fraction "
                            f"({g_bytes * frac / GIB:.1f} GiB); raise --mem-fraction-static, at most to {safe:.3f}")
        elif frac < need <= safe:
            warnings.append(f"fraction {frac:.3f} leaves {tokens} KV tokens, less than one {inp.context}-token "
                            f"request: raise --mem-fraction-static to between {need:.3f} and {safe:.3f}")
        if frac > safe:
            warnings.append(f"run-time OOM risk: fraction {frac:.3f} leaves {g_bytes * (1 - frac) / GIB:.2f} GiB of "
                            f"slack but {slack / GIB:.2f} GiB is needed; lower --mem-fraction-static to {safe:.3f}")
        if inp.mem_fraction is None and default > safe:  # only when the user left the fraction to us
            warnings.append(f"SGLang's default fraction {default:.3f} leaves too little slack for the verify "
                            f"workspace and graphs: pass --mem-fraction-static {safe:.3f}")
    max_ctx = tokens // inp.concurrency
    if impossible is None and max_ctx < inp.context and not frac < need <= safe:
        warnings.append(f"KV pool holds {tokens} tokens: {max_ctx} per request at {inp.concurrency} concurrent, "
                        f"below the {inp.context}-token context; lower concurrency or context"
                        + (", or use fp8 KV" if inp.kv_dtype != "fp8" else ""))
    launch = launch_line(inp, frac)
    if impossible:
        launch = ""
    return BudgetResult(inp, gpu_bytes, g_bytes, weights, cell, consumers, slack, safe, default, frac, tokens,
                        max_ctx, launch, warnings, impossible)


SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")


def kv_dtype_rows(inp: BudgetInputs) -> list[dict]:
    """The same deployment over each KV pool (bf16, fp8): bytes per token, KV tokens and the context each of
    ``inp.concurrency`` requests gets, at the fraction each one's budget picks (or ``inp.mem_fraction``)."""
    from dataclasses import replace

    rows = []
    for kv in ("bf16", "fp8"):
        r = compute(replace(inp, kv_dtype=kv))
        rows.append({"KV cache": kv, "bytes per token": r.cell_bytes, "fraction": round(r.fraction, 3),
                     "KV tokens": r.kv_tokens, "context per request": r.max_context_per_request,
                     "launch flag": "--kv-cache-dtype fp8_e4m3" if kv == "fp8" else "(default)"})
    return rows


def speculative_problem(algorithm: str, steps: int, topk: int, draft_tokens: int) -> str | None:
    """Why SGLang 0.5.23 would not run these speculative settings as given, or None. Its rules: top-k 1 drafts a
    chain and resets the draft tokens to steps + 1 (arg_groups/speculative_hook.py); a top-k > 1 tree picks
    N - 1 of topk + (steps - 1) x topk^2 scored candidates (speculative/eagle_utils.py organize_draft_results);
    DFLASH drafts one block, top-k 1, one step."""
    if algorithm not in SPEC_ALGORITHMS:
        return f"spec_algorithm: expected one of {', '.join(SPEC_ALGORITHMS)}, got {algorithm!r}"
    if algorithm == "DFLASH" and (topk != 1 or steps != 1):
        return (f"topk/spec_steps: DFLASH drafts a chain of draft_tokens (its block size) with topk 1 and one step; "
                f"got topk={topk}, spec_steps={steps}")
    if topk == 1 and algorithm != "DFLASH" and draft_tokens != steps + 1:
        return (f"draft_tokens: with topk 1 SGLang drafts a chain of spec_steps + 1 = {steps + 1} tokens, got "
                f"draft_tokens={draft_tokens} (for a tree set topk > 1)")
    if topk > 1:
        most = 1 + topk + (steps - 1) * topk * topk
        if not 2 <= draft_tokens <= most:
            return (f"draft_tokens: a topk={topk}, spec_steps={steps} tree has at most {most} tokens (the root and "
                    f"topk + (steps - 1) x topk^2 candidates), got {draft_tokens}")
    return None


def launch_args(inp: BudgetInputs, fraction: float) -> list[str]:
    """SGLang 0.5.23 server arguments for this deployment (what ``python -m kdtree_lab.serve`` passes on)."""
    args = ["--model-path", inp.model_path, "--tp", str(inp.tp), "--attention-backend", "triton",
            "--speculative-algorithm", inp.spec_algorithm, "--speculative-draft-model-path", inp.draft_model_path,
            "--speculative-num-steps", str(inp.spec_steps), "--speculative-eagle-topk", str(inp.topk),
            "--speculative-num-draft-tokens", str(inp.draft_tokens),
            "--cuda-graph-max-bs-decode", str(inp.max_bs), "--max-running-requests", str(inp.max_bs),
            "--context-length", str(inp.context), "--mem-fraction-static", f"{fraction:.3f}"]
    if inp.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if inp.chunked_prefill:
        args += ["--chunked-prefill-size", str(inp.chunked_prefill)]
    return args


def launch_line(inp: BudgetInputs, fraction: float) -> str:
    """The shell command that starts SGLang with the verify hook installed in every rank (kdtree_lab.serve)."""
    return "KDTREE_VERIFY=on python -m kdtree_lab.serve " + shlex.join(launch_args(inp, fraction))


_LOG_PATTERNS = {
    "G": r"Memory baseline taken.*?avail mem=([\d.]+) GB",
    "after_weights_avail": r"Load weight end.*?avail mem=([\d.]+) GB",
    "weights": r"Load weight end.*?mem usage=([\d.]+) GB",
    "kv_tokens": r"KV Cache is allocated\. #tokens: (\d+)",
    "after_pool_avail": r"Memory pool end.*?avail mem=([\d.]+) GB",
    "graph_pool": r"Capture cuda graph end.*?mem usage=([\d.]+) GB",
}


def parse_sglang_log(text: str) -> dict[str, float]:
    """Calibration numbers from SGLang's start-up log (bytes; kv_tokens in tokens). Missing lines are left out."""
    out: dict[str, float] = {}
    for key, pattern in _LOG_PATTERNS.items():
        found = re.findall(pattern, text)
        if found:
            value = float(found[-1])
            out[key] = value if key == "kv_tokens" else value * GIB
    return out


def calibrate(inp: BudgetInputs, measured: dict[str, float]) -> BudgetInputs:
    """Replace estimates by measurements (keys: G, weights, workspace, graph_pool; bytes)."""
    keep = {k: v for k, v in measured.items() if k in ("G", "weights", "workspace", "graph_pool")}
    return replace(inp, measured={**inp.measured, **keep})


def predicted_kernel_graph_memory(max_bs: int, draft_tokens: int, heads: int, sms: int, block_m: int = 64) -> dict:
    """What the graph notebook should measure for the kernel alone: the workspace the graph runner allocates (the
    largest over SGLang's capture sizes with the default split count) and the graph pool, which the kernel does not
    add to beyond one 2 MiB allocator segment (it allocates nothing during capture). Bytes."""
    ws = plan(sglang_capture_sizes(max_bs), draft_tokens, heads, sms, block_m).workspace_bytes
    return {"workspace": ws, "graph_pool": 2 * MIB}


def calibration_rows(graph_results: dict) -> list[dict]:
    """Predicted vs measured workspace and graph-pool bytes for the kernel-only graphs of notebook 05's results
    (``05_cuda_graphs.json``); ratio = measured / predicted. The SM count and row tile come from the results
    (files written before they were recorded ran on the 132-SM H200 with 64-row tiles: data/results/h200)."""
    measured = graph_results["enablement"]
    cfg = measured["config"]
    predicted = predicted_kernel_graph_memory(cfg["max_bs"], cfg["num_draft"], cfg["num_heads"],
                                              sms=measured.get("sms", 132), block_m=measured.get("block_m", 64))
    return [{"quantity": k, "predicted": predicted[k], "measured": measured[m],
             "ratio": round(measured[m] / predicted[k], 3)}
            for k, m in (("workspace", "workspace_bytes"), ("graph_pool", "graph_pool_bytes_total"))]
