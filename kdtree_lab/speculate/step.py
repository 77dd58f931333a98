"""A model of one decode step of an MLA MoE target on one GPU of a tensor-parallel group (times in ms).

A step of B requests, each verifying a tree of N nodes (N = 1 without speculation) over a prefix of L tokens, costs:

- attention: ``layers`` x the per-layer call time of the kernel (``kernel_times``): SGLang's one-token decode
  without speculation; with speculation our verify kernel, SGLang's Triton verify, or one-token decode rows of
  batch B x N (how vLLM's TRITON_MLA and b12x run verify: each draft token reads the KV again);
- weights: every weight group the B x N tokens touch, as a roofline (the larger of its bytes at the GPU's weight
  bandwidth and its FLOPs at the tensor rate): the attention projections (q_a / kv_a replicated on every GPU, the
  rest split over TP), the dense MLP of the first layers, the routed experts the tokens select (``experts_touched``:
  T tokens with top-k routing touch E (1 - (1 - k/E)^T) experts if routed independently and uniformly, an upper
  bound for a tree's similar tokens) and the router, the shared experts, the LM head (split over TP); each split
  weight 1 / TP per GPU;
- communication: two all-reduces of T x hidden bf16 per layer at TP > 1;
- the draft: one cost per step, an input (``presets.draft_costs``, cited, or the user's);
- a fixed part: what the model does not see (launch gaps, sampling, the scheduler, imperfect kernels), set from a
  measured one-token step time when there is one (``fixed_from``) and 0 otherwise (then the step is a lower bound).

Every part carries its source; a ``Step`` is a model, not a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget.presets import GpuPreset, ModelPreset, gpus, models
from .kernel_times import KernelTable
from .presets import Architecture, architectures, rates

MODEL_LABEL = "model, not a measurement"
VERIFY_KERNELS = ("ours", "ours-fp8", "sglang", "decode rows")  # how a tree's verify attention runs


class StepInputError(ValueError):
    """An input the step model cannot use; the message names it."""


@dataclass(frozen=True)
class Part:
    name: str
    ms: float
    source: str


@dataclass(frozen=True)
class Target:
    """One GPU of a deployment: the model (its presets), the GPU, TP, the checkpoint's quantisation and the rates
    the non-attention part runs at, each with its source."""

    model: ModelPreset
    arch: Architecture
    gpu: GpuPreset
    tp: int
    quant: str
    weights_gbps: float
    tensor_tflops: float
    allreduce_latency_us: float
    allreduce_gbps: float
    sources: dict[str, str]

    @property
    def heads(self) -> int:
        """Query heads on one GPU (attention heads split over TP)."""
        return self.model.heads // self.tp

    @property
    def moe_layers(self) -> int:
        return self.model.layers - self.arch.dense_layers


def target(gpu: str, model: str, tp: int, quant: str, ceilings: dict | None = None) -> Target:
    """The ``Target`` for these presets; ``ceilings`` (a benchmark run's) supply the rates a GPU's preset marks
    as measured. Raises StepInputError naming a bad input."""
    g, m, a, r = gpus(), models(), architectures(), rates()
    if gpu not in g:
        raise StepInputError(f"gpu: expected one of {', '.join(sorted(g))}, found {gpu!r}")
    if gpu not in r:
        raise StepInputError(f"gpu: no step-model rates for {gpu!r} in data/presets/speculation.yaml (known: "
                             f"{sorted(r)})")
    if model not in m or model not in a:
        raise StepInputError(f"model: expected one of {', '.join(sorted(set(m) & set(a)))}, found {model!r}")
    if tp < 1 or m[model].heads % tp:
        raise StepInputError(f"tp: expected a divisor of the model's {m[model].heads} heads, found {tp}")
    if quant not in a[model].weight_bytes:
        raise StepInputError(f"quant: expected one of {', '.join(sorted(a[model].weight_bytes))} for {model}, found {quant!r}")
    rate = r[gpu]
    src = dict(rate.sources)
    weights, tensor = rate.weights_gbps, rate.tensor_tflops
    if weights is None or tensor is None:
        if not ceilings:
            raise StepInputError(f"gpu {gpu}: its rates are the kernel-time run's measured ceilings; none given")
        weights = ceilings["copy_gbps"] if weights is None else weights
        tensor = ceilings["gemm_tflops"] if tensor is None else tensor
    return Target(m[model], a[model], g[gpu], tp, quant, float(weights), float(tensor), rate.allreduce_latency_us,
                  rate.allreduce_gbps, src | {"architecture": a[model].sources["shapes"],
                                               "weight_bytes": a[model].sources["weight_bytes"]})


def experts_touched(tokens: float, experts: int, per_token: int) -> float:
    """Expected distinct experts selected by ``tokens`` tokens routed to ``per_token`` of ``experts`` each,
    independently and uniformly."""
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


def _roofline(name: str, params_read: float, bytes_per_param: float, flops: float, t: Target, what: str,
              efficiency: float = 1.0) -> Part:
    """The larger of the bytes at ``efficiency`` of the weight bandwidth and the FLOPs at the tensor rate."""
    t_mem = params_read * bytes_per_param / (efficiency * t.weights_gbps * 1e9)
    t_cmp = flops / (t.tensor_tflops * 1e12)
    bound = "bytes" if t_mem >= t_cmp else "FLOPs"
    return Part(name, max(t_mem, t_cmp) * 1e3,
                f"{what}; {params_read / 1e6:.0f}M params at {bytes_per_param:g} B over "
                f"{t.weights_gbps:.0f} GB/s{f' x {efficiency:.3g}' if efficiency != 1.0 else ''}, "
                f"{flops / 1e9:.0f} GFLOP at {t.tensor_tflops:.0f} TFLOP/s ({bound}-bound)")


def weight_parts(t: Target, tokens: float, moe_efficiency: float = 1.0) -> list[Part]:
    """The weight groups ``tokens`` tokens (B x N) read on one GPU per step, as rooflines; the routed experts'
    bytes at ``moe_efficiency`` of the bandwidth (today's fused MoE at a few tokens; 1: the roofline)."""
    a, m, tp, wb = t.arch, t.model, t.tp, t.arch.weight_bytes[t.quant]
    heads, rope = m.heads, m.qk_rope_head_dim
    q_head = a.qk_nope_head_dim + rope
    replicated = a.hidden * (a.q_lora_rank + m.kv_lora_rank + rope) if a.q_lora_rank else \
        a.hidden * (m.kv_lora_rank + rope)
    split = (a.q_lora_rank or a.hidden) * heads * q_head + m.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim) \
        + heads * a.v_head_dim * a.hidden
    attn = m.layers * (replicated + split / tp)
    mlp = 3 * a.hidden  # gate, up and down projections per intermediate unit
    dense = a.dense_layers * mlp * a.dense_intermediate / tp
    touched = experts_touched(tokens, a.experts, a.experts_per_token)
    routed = t.moe_layers * touched * mlp * a.moe_intermediate / tp
    router = t.moe_layers * a.experts * a.hidden
    shared = t.moe_layers * a.shared_experts * mlp * a.moe_intermediate / tp
    head = a.vocab * a.hidden / tp
    active_routed = t.moe_layers * a.experts_per_token * mlp * a.moe_intermediate / tp
    return [
        _roofline("weights: attention projections", attn, wb["attention"], 2 * tokens * attn, t,
                  f"{m.layers} layers, q_a/kv_a on every GPU, q_b/kv_b/o split over TP {tp}"),
        _roofline("weights: dense MLP", dense, wb["dense"], 2 * tokens * dense, t, f"{a.dense_layers} dense layers"),
        _roofline("weights: routed experts", routed, wb["experts"], 2 * tokens * active_routed, t,
                  f"{tokens:g} tokens select {touched:.1f} of {a.experts} experts per layer (top-{a.experts_per_token}"
                  f", independent uniform routing) x {t.moe_layers} layers", moe_efficiency),
        _roofline("weights: router", router, 2.0, 2 * tokens * router, t,
                  f"bf16 gate over {a.experts} experts on every GPU, {t.moe_layers} layers"),
        _roofline("weights: shared experts", shared, wb["shared"], 2 * tokens * shared, t,
                  f"{a.shared_experts} per layer x {t.moe_layers} layers"),
        _roofline("weights: LM head", head, wb["lm_head"], 2 * tokens * head, t, f"vocabulary {a.vocab} split over TP"),
    ]


def allreduce_part(t: Target, tokens: float) -> Part:
    """Two all-reduces of the hidden state per layer at TP > 1."""
    if t.tp == 1:
        return Part("tensor-parallel all-reduce", 0.0, "TP 1: none")
    nbytes = tokens * t.arch.hidden * 2
    one = t.allreduce_latency_us * 1e-3 + nbytes * 2 * (t.tp - 1) / t.tp / (t.allreduce_gbps * 1e9) * 1e3
    return Part("tensor-parallel all-reduce", 2 * t.model.layers * one,
                f"2 x {t.model.layers} all-reduces of {nbytes / 1e3:.0f} KB, {t.allreduce_latency_us:g} us + bytes at "
                f"{t.allreduce_gbps:g} GB/s each ({t.sources['allreduce']})")


def attention_part(t: Target, tables: dict[str, KernelTable], kernel: str | None, context: int, batch: int,
                   nodes: int, today=None) -> tuple[Part, bool]:
    """The attention of one step over ``t.model.layers`` layers and whether a kernel time was extrapolated.
    ``kernel`` None: no speculation (one-token decode: vLLM's as today runs it when ``today`` (a ``today.Today``) is
    given, else SGLang's); "decode rows": the verify as B x N one-token decode rows (likewise)."""
    layers, h = t.model.layers, t.heads
    if today is not None and kernel in (None, "decode rows"):
        return today.attention(batch, 1 if kernel is None else nodes, context), False
    if kernel is None:
        tab, args, what = tables["decode"], (batch, context, 1, h), "one-token decode"
    elif kernel == "decode rows":
        tab, args, what = tables["decode"], (batch * nodes, context, 1, h), f"verify as {batch * nodes} decode rows"
    elif kernel in tables and kernel != "decode":
        tab, args, what = tables[kernel], (batch, context, nodes, h), f"{kernel} verify of {nodes} nodes"
    else:
        raise StepInputError(f"kernel: expected one of {VERIFY_KERNELS} or None, found {kernel!r}")
    ms, extra = tab.lookup(*args)
    return Part(f"attention ({what})", layers * ms,
                f"{layers} x {ms:.4f} ms per layer call: {tab.label}{'; extrapolated in L' if extra else ''}"), extra


@dataclass(frozen=True)
class Step:
    """One modelled step. ``tokens`` per request per step (1 without speculation); ``parts`` in ms."""

    kind: str  # "no speculation", "chain" or "tree"
    kernel: str  # "decode" without speculation, else a VERIFY_KERNELS name
    context: int
    batch: int
    nodes: int
    tokens: float
    parts: tuple[Part, ...]
    extrapolated: bool
    label: str = MODEL_LABEL

    @property
    def ms(self) -> float:
        return sum(p.ms for p in self.parts)

    @property
    def tokens_per_s(self) -> float:
        """Per request (one stream's decode speed)."""
        return self.tokens / self.ms * 1e3

    @property
    def aggregate_tokens_per_s(self) -> float:
        return self.batch * self.tokens_per_s


def step(t: Target, tables: dict[str, KernelTable], context: int, batch: int, fixed: Part,
         kernel: str | None = None, nodes: int = 1, tokens: float = 1.0, draft: Part | None = None,
         kind: str | None = None, today=None) -> Step:
    """A step without speculation (``kernel`` None) or verifying ``nodes``-node trees with ``kernel``, committing
    ``tokens`` per request, with the draft's cost ``draft``; ``today`` (a ``today.Today``): the deployment as today's
    best runs it (vLLM's decode for no speculation and decode rows, its MoE efficiency)."""
    if context < 1 or batch < 1 or nodes < 1:
        raise StepInputError(f"context, batch, nodes: expected >= 1, found {context}, {batch}, {nodes}")
    if kernel is None and (nodes != 1 or tokens != 1.0):
        raise StepInputError("a step without speculation verifies 1 node and commits 1 token")
    att, extra = attention_part(t, tables, kernel, context, batch, nodes, today)
    eff = 1.0 if today is None else today.moe_efficiency
    parts = [att, *weight_parts(t, batch * nodes, eff), allreduce_part(t, batch * nodes)]
    if kernel is not None:
        if draft is None:
            raise StepInputError("draft: a speculative step needs the draft's cost")
        parts.append(draft)
    parts.append(fixed)
    return Step(kind or ("no speculation" if kernel is None else "tree"), kernel or "decode", context, batch, nodes,
                tokens, tuple(parts), extra)


NO_FIXED = Part("fixed per step", 0.0, "0: no measured step time given, so every step is a lower bound")


def fixed_from(t: Target, tables: dict[str, KernelTable], step_ms: float, context: int, batch: int,
               source: str, today=None) -> Part:
    """The fixed part that makes the modelled one-token step at ``context`` equal a measured ``step_ms``; 0 (and
    said so) when the model already exceeds it."""
    if step_ms <= 0:
        raise StepInputError(f"step_ms: expected a measured step time > 0 ms, found {step_ms}")
    bare = step(t, tables, context, batch, Part("fixed", 0.0, ""), today=today)
    rest = step_ms - bare.ms
    if rest < 0:
        return Part("fixed per step", 0.0, f"0: the modelled step ({bare.ms:.2f} ms) already exceeds the measured "
                                           f"{step_ms:g} ms at {context} tokens ({source})")
    return Part("fixed per step", rest, f"measured one-token step {step_ms:g} ms at {context} tokens, batch {batch} "
                                        f"({source}) minus the modelled parts ({bare.ms:.2f} ms)")
