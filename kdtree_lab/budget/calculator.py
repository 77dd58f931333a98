"""The memory budget for one deployment: which ``--mem-fraction-static`` to pass to SGLang 0.5.23 with the verify
kernel. Every consumer of GPU memory is a line item (``sglang_memory``); the weights are computed from the model's
architecture under SGLang's sharding (``weights``); everything but the weights and the KV pool must fit in the slack
``G*(1 - mfs)``: the Triton backend's graph-time buffers, our workspace, the CUDA-graph
pool, activations (the chunked-prefill peak: ``prefill_activations``), communication buffers, and a margin.
SGLang's own default fraction is computed before the speculative settings apply, reserves 1.5 MiB per prefill
token for activations and knows nothing of our workspace; this module says what it should be, and (``proposals``)
what to change when the deployment asked about cannot hold its context.

All sizes are bytes unless a name says MiB / GiB; token counts are tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..contract.spec import sglang_capture_sizes
from ..kernels.launch_plan import MAX_NSPLIT, NoConfiguration, plan
from .inputs import GIB, MIB, BudgetInputError, BudgetInputs, mib
from .launch import launch_line, speculative_problem
from .prefill_activations import ACTIVATION_MODELS, ActivationInputError, activation_lines, load_measurement
from .presets import gpus, models
from .sglang_memory import (
    Consumer,
    eager_decode_partials,
    kv_cell_bytes,
    kv_pool_tokens,
    mm_reserve_bytes,
    sglang_default_fraction,
    sglang_defaults,
    triton_graph_buffers,
)
from .weights import LoadedWeights, WeightsInputError, loaded, moe_runner_for


def fraction_text(f: float) -> str:
    """A fraction as the budget prints it: three decimals, or as many as it has below that (0.0001)."""
    return f"{f:.3f}" if abs(f - round(f, 3)) < 1e-12 else f"{f:.10g}"


@lru_cache(maxsize=None)
def _capture_sizes(max_bs: int) -> tuple[int, ...]:
    return tuple(sglang_capture_sizes(max_bs))


@dataclass
class BudgetResult:
    inputs: BudgetInputs
    gpu_bytes: int
    g_bytes: int  # free memory before weights (SGLang's G)
    weights_bytes: int  # the target's weights on one GPU, with what the caching allocator holds beyond them
    cell_bytes: int  # KV bytes per token (all layers)
    consumers: list[Consumer]
    slack_needed_bytes: int
    safe_fraction: float  # the largest mfs whose slack holds every non-pool consumer
    sglang_default_fraction: float
    fraction: float  # the one evaluated (inputs.mem_fraction or safe_fraction)
    kv_tokens: int
    max_context_per_request: int  # at inputs.concurrency requests
    launch_line: str  # empty when the deployment is impossible or the fraction not safe
    warnings: list[str] = field(default_factory=list)
    impossible: str | None = None  # why no fraction is safe (then no launch line)
    activation: str = "measured"  # the estimate the activation line took: measured | modelled | sglang-reserve
    safe_fractions: dict[str, float] = field(default_factory=dict)  # the largest safe fraction per activation model
    proposals: list = field(default_factory=list)  # proposals.Proposal (proposals.with_proposals fills it)
    draft_weights_bytes: int = 0  # the draft model's weights, counted inside the fraction (SGLang 0.5.23)
    reserve_bytes: int = 0  # SGLang's multimodal reserve out of the KV budget (models with a vision tower)
    start_fraction: float = 0.0  # the smallest fraction at which SGLang starts (a KV pool of at least one token)
    serve_fraction: float = 0.0  # the smallest whose KV pool holds one request of the full context
    weights: LoadedWeights | None = None  # the computed per-GPU weights, term by term (None when measured)

    @property
    def kv_pool_bytes(self) -> int:
        return self.kv_tokens * self.cell_bytes

    @property
    def loaded_bytes(self) -> int:
        """Everything the KV pool shares G x fraction with: target and draft weights and the multimodal reserve."""
        return self.weights_bytes + self.draft_weights_bytes + self.reserve_bytes

    @property
    def holds_context(self) -> bool:
        """Whether the KV pool holds ``context`` tokens for each of ``concurrency`` requests at this fraction."""
        return self.impossible is None and self.max_context_per_request >= self.inputs.context

    @property
    def holds_context_at_safe_fraction(self) -> bool:
        """Whether it would at its largest safe fraction (what decides if anything needs proposing)."""
        if self.impossible:
            return False
        return kv_pool_tokens(self.g_bytes, self.safe_fraction, self.loaded_bytes, self.cell_bytes) \
            // self.inputs.concurrency >= self.inputs.context

    @property
    def starts(self) -> bool:
        """Whether SGLang starts at the evaluated fraction: the weights leave a KV pool of at least one token."""
        return self.kv_tokens > 0

    @property
    def fraction_is_safe(self) -> bool:
        """Whether the evaluated fraction is safe: the server starts, its pool holds one request of the full
        context, and the slack holds every non-pool consumer (no launch line otherwise)."""
        return (self.impossible is None and self.fraction >= self.serve_fraction
                and self.g_bytes * (1 - self.fraction) >= self.slack_needed_bytes)

    def _why(self) -> str:
        """The verdict after the fraction: "is safe: ...", "cannot start: ...", "is not safe: ...; use a to b"."""
        ctx = f"{self.inputs.context:,}"
        slack = self.g_bytes * (1 - self.fraction)
        act = next((c for c in self.consumers if c.where == "slack" and c.name.startswith("activations")), None)
        leaves = (f"leaves {slack / GIB:.2f} GiB of slack for {self.slack_needed_bytes / GIB:.2f} GiB of consumers"
                  + (f" (activations {act.bytes / GIB:.2f} GiB, {self.activation})" if act else ""))
        use = f"use {self.serve_fraction:.3f} to {self.safe_fraction:.3f}"
        if not self.starts:
            return (f"cannot start: the weights and what loading adds ({self.loaded_bytes / GIB:.2f} GiB per GPU) "
                    f"leave no KV pool in G x fraction ({self.g_bytes * self.fraction / GIB:.2f} GiB); the smallest "
                    f"fraction that starts is {self.start_fraction:.3f}, the largest safe one {self.safe_fraction:.3f} "
                    f"(one {ctx}-token request needs {self.serve_fraction:.3f})")
        if self.fraction < self.serve_fraction:
            return (f"is not safe: its KV pool holds {self.kv_tokens:,} tokens, less than one {ctx}-token request; "
                    f"{use}")
        if not self.fraction_is_safe:
            return f"is not safe: {leaves}; {use}"
        return f"is safe: {leaves}"

    def verdict(self) -> str:
        """Whether the evaluated fraction is safe, and why, in one line; an unsafe one names the fractions to use
        (the smallest that starts and the largest safe one when it cannot start)."""
        if self.impossible:
            return f"no fraction is safe: {self.impossible}"
        return f"fraction {fraction_text(self.fraction)} {self._why()}"

    def refusal(self) -> str | None:
        """The one line a front end refuses an unsafe deployment with (None when the fraction is safe)."""
        if self.fraction_is_safe:
            return None
        if self.impossible:
            return f"impossible deployment: {self.impossible}"
        return f"--mem-fraction {fraction_text(self.fraction)} {self._why()}"

    def launch_text(self) -> str:
        """The launch lines to paste (a first start with KDTREE_VERIFY=validate: SGLang's kernel writes the output,
        ours is checked against it; then KDTREE_VERIFY=on), one plain line for SGLang's own verify, or why there is
        none."""
        if not self.fraction_is_safe:
            return f"no launch line: {self.refusal()}"
        if not self.inputs.verify_kernel:
            return "launch line (SGLang's own verify):\n" + self.launch_line
        return ("launch line, first start (KDTREE_VERIFY=validate: SGLang's kernel writes the output, ours is checked "
                "against it on every step):\n" + launch_line(self.inputs, self.fraction, mode="validate")
                + "\nlaunch line, after a clean first session (KDTREE_VERIFY=on: our kernel writes the output):\n"
                + self.launch_line)

    def weight_rows(self) -> list[dict]:
        """The per-GPU weights term by term (module, shape on one rank, dtype, sharding, SGLang rule), or a note when
        a log's measurement replaced them."""
        if self.weights is None:
            return [{"note": f"weights measured from SGLang's log: {self.weights_bytes / GIB:.2f} GiB per GPU"}]
        return self.weights.rows()

    def table(self) -> list[dict]:
        """Every consumer (the activation estimates not followed are shown as ``not counted``) and the KV pool."""
        rows = [{"consumer": c.name, "MiB": mib(c.bytes), "where": c.where, "source": c.source}
                for c in self.consumers]
        rows.append({"consumer": "KV pool", "MiB": mib(self.kv_pool_bytes), "where": "pool",
                     "source": "sglang-formula"})
        return rows


def compute(inp: BudgetInputs) -> BudgetResult:
    """The whole budget for one deployment; raises BudgetInputError naming an impossible input. The deployments
    that hold the context when this one does not come from ``proposals.with_proposals``."""
    ms, gs = models(), gpus()
    if inp.model not in ms:
        raise BudgetInputError(f"model: expected one of {', '.join(sorted(ms))}, found {inp.model!r}")
    if inp.gpu not in gs:
        raise BudgetInputError(f"gpu: expected one of {', '.join(sorted(gs))}, found {inp.gpu!r}")
    m, g = ms[inp.model], gs[inp.gpu]
    if inp.quant not in m.checkpoints:
        raise BudgetInputError(f"quant: expected one of {', '.join(sorted(m.checkpoints))} (the weights "
                               f"{inp.model} has), found {inp.quant!r}")
    for name in ("tp", "max_bs", "draft_tokens", "topk", "spec_steps", "context", "concurrency"):
        if getattr(inp, name) < 1:
            raise BudgetInputError(f"{name}: expected an integer >= 1, found {getattr(inp, name)}")
    if not 0 <= inp.nsplit <= MAX_NSPLIT:
        raise BudgetInputError(f"nsplit: expected 1..{MAX_NSPLIT}, or 0 for the kernel's own split rule, found "
                               f"{inp.nsplit}")
    if inp.chunked_prefill is not None and inp.chunked_prefill < 1:
        raise BudgetInputError(f"chunked_prefill: expected >= 1 (or unset for SGLang's default), found "
                               f"{inp.chunked_prefill}")
    problem = speculative_problem(inp.spec_algorithm, inp.spec_steps, inp.topk, inp.draft_tokens)
    if problem:
        raise BudgetInputError(problem)
    for name in ("context_overhead_mib", "graph_pool_mib_per_size", "margin_mib", "activation_margin"):
        if getattr(inp, name) is not None and getattr(inp, name) < 0:
            raise BudgetInputError(f"{name}: expected a reserve >= 0, found {getattr(inp, name)}")
    if inp.activation_model not in ACTIVATION_MODELS:
        raise BudgetInputError(f"activation_model: expected one of {', '.join(ACTIVATION_MODELS)}, found "
                               f"{inp.activation_model!r}")
    if m.heads % inp.tp:
        raise BudgetInputError(f"tp: expected a divisor of the model's {m.heads} heads, found {inp.tp}")
    if inp.mem_fraction is not None and not 0.0 < inp.mem_fraction < 1.0:
        raise BudgetInputError(f"mem_fraction: expected a value in (0, 1), found {inp.mem_fraction}")
    heads = m.heads // inp.tp
    gpu_bytes = g.memory_mib * MIB
    overhead = g.context_overhead_mib if inp.context_overhead_mib is None else inp.context_overhead_mib
    g_bytes = int(inp.measured.get("G", gpu_bytes - overhead * MIB))
    try:
        lw = loaded(inp.model, inp.quant, inp.tp, moe_runner_for(inp.quant, g.compute_capability), draft=True)
    except WeightsInputError as exc:
        raise BudgetInputError(str(exc)) from exc
    weights = int(inp.measured.get("weights", lw.target_loaded_bytes))
    draft = int(inp.measured.get("draft_weights", lw.draft_loaded_bytes))
    reserve = mm_reserve_bytes(lw.vision)
    too_big = None  # a well-formed deployment that cannot start at any fraction (refused, exit 3)
    if weights + draft + reserve >= g_bytes:
        too_big = (f"the weights ({(weights + draft) / GIB:.1f} GiB per GPU: {m.label}, {inp.quant}, tp={inp.tp}, "
                   f"with the draft) do not fit in the {g_bytes / GIB:.1f} GiB free on {g.label}; raise tp or quantise")
    cell = kv_cell_bytes(m, inp.kv_dtype)
    default_chunk, _ = sglang_defaults(g.memory_mib, inp.tp)
    chunk = inp.chunked_prefill or default_chunk
    capture_sizes = _capture_sizes(inp.max_bs)
    measured = "weights" in inp.measured
    consumers = [Consumer("weights (per GPU)", weights, "pool", "measured" if measured else "sglang-sharding"),
                 Consumer(f"draft weights (per GPU, {m.draft['kind']})", draft, "pool",
                          "measured" if "draft_weights" in inp.measured else "sglang-sharding")]
    if reserve:
        consumers.append(Consumer("multimodal reserve (SGLANG_VLM_CACHE_SIZE_MB)", reserve, "pool", "sglang-formula"))
    if inp.cuda_graphs:
        consumers += triton_graph_buffers(heads, inp.max_bs, inp.draft_tokens, inp.topk, inp.spec_steps,
                                          inp.context, g.sms)
    else:  # eager: the draft decode allocates its split-K partials in every forward instead
        consumers.append(eager_decode_partials(heads, inp.max_bs, inp.topk, inp.spec_steps, g.sms))
    unserved = None
    if inp.verify_kernel:
        # the workspace the SGLang hook's VerifyAttention allocates: batch sizes 1..max_bs, the configuration and
        # split count of each as the launcher chooses them on this GPU (launch_plan.plan, the same function)
        try:
            planned = plan(range(1, inp.max_bs + 1), inp.draft_tokens, heads, inp.kv_dtype, g.device, inp.nsplit,
                           inp.partial_bytes).workspace_bytes
        except NoConfiguration as exc:  # the hook falls back to SGLang's kernel and allocates nothing
            planned, unserved = 0, f"the verify kernel does not serve this deployment on {g.label} ({exc}): the " \
                                    "hook falls back to SGLang's verify kernel and allocates no workspace"
        ws = int(inp.measured.get("workspace", planned))
        consumers.append(Consumer("kdtree verify workspace", ws, "slack",
                                  "measured" if "workspace" in inp.measured else "kdtree"))
    if inp.cuda_graphs:
        pool = int(inp.measured.get("graph_pool", len(capture_sizes) * inp.graph_pool_mib_per_size * MIB))
        consumers.append(Consumer(f"CUDA-graph pool ({len(capture_sizes)} sizes)", pool, "slack",
                                  "measured" if "graph_pool" in inp.measured else "estimate"))
    try:
        lines = activation_lines(inp.model, inp.quant, inp.tp, chunk, requests=min(inp.max_bs, chunk),
                                 context=inp.context, spec_algorithm=inp.spec_algorithm, sms=g.sms,
                                 margin=inp.activation_margin, measurement=load_measurement())
    except ActivationInputError as exc:
        raise BudgetInputError(str(exc)) from exc
    if lines["measured"].source != "measured":  # no measurement of these shapes: "measured" is the model
        lines["measured"] = lines["modelled"]
    chosen = lines[inp.activation_model]
    for line in {id(v): v for v in lines.values()}.values():
        consumers.append(Consumer(line.label, line.bytes, "slack" if line is chosen else "not counted", line.source))
    consumers.append(Consumer("communication (NCCL, custom all-reduce)", int(inp.tp / 8 * 1024 * MIB) +
                              (2048 * MIB if inp.deep_ep else 0), "slack", "sglang-formula"))
    consumers.append(Consumer("req_to_token (int32)", (inp.max_bs + 1) * inp.context * 4, "slack", "sglang-formula"))
    consumers.append(Consumer("safety margin", int(inp.margin_mib * MIB), "slack", "estimate"))
    slack = sum(c.bytes for c in consumers if c.where == "slack")
    safe = math.floor((1 - slack / g_bytes) * 1000) / 1000
    safe_fractions = {name: math.floor((1 - (slack - chosen.bytes + lines[name].bytes) / g_bytes) * 1000) / 1000
                      for name in ACTIVATION_MODELS}
    default = sglang_default_fraction(g.memory_mib, inp.tp, inp.chunked_prefill, deep_ep=inp.deep_ep)
    frac = inp.mem_fraction if inp.mem_fraction is not None else safe
    loaded_bytes = weights + draft + reserve
    tokens = kv_pool_tokens(g_bytes, frac, loaded_bytes, cell)
    # the smallest fractions at which SGLang starts (one token of pool) and whose pool holds one full request
    start = math.ceil((loaded_bytes + cell) / g_bytes * 1000) / 1000
    need = math.ceil((loaded_bytes + inp.context * cell) / g_bytes * 1000) / 1000
    warnings, impossible = [unserved] if unserved else [], None
    fix = "lower max_bs, context or the split count, raise tp, quantise" + (", or use fp8 KV" if inp.kv_dtype != "fp8"
                                                                          else "")
    if too_big:
        impossible = too_big
    elif safe <= 0 or safe < start:
        impossible = (f"no fraction fits: the slack consumers ({slack / GIB:.1f} GiB) and the weights "
                      f"({loaded_bytes / GIB:.1f} GiB) leave no room for a KV pool in {g_bytes / GIB:.1f} GiB; {fix}")
    elif safe < need:
        impossible = (f"one {inp.context:,}-token request needs fraction {need:.3f}, but the slack consumers "
                      f"({slack / GIB:.1f} GiB) allow at most {safe:.3f}; {fix}")
    else:
        if tokens == 0:
            warnings.append(f"start-up OOM: weights ({loaded_bytes / GIB:.1f} GiB) exceed G x fraction "
                            f"({g_bytes * frac / GIB:.1f} GiB); raise --mem-fraction-static, at least to {start:.3f} "
                            f"(to {need:.3f} for one {inp.context:,}-token request), at most to {safe:.3f}")
        elif frac < need <= safe:
            warnings.append(f"fraction {frac:.3f} leaves {tokens:,} KV tokens, less than one {inp.context:,}-token "
                            f"request: raise --mem-fraction-static to between {need:.3f} and {safe:.3f}")
        if frac > safe:
            warnings.append(f"run-time OOM risk: fraction {frac:.3f} leaves {g_bytes * (1 - frac) / GIB:.2f} GiB of "
                            f"slack but {slack / GIB:.2f} GiB is needed; lower --mem-fraction-static to {safe:.3f}")
        if inp.mem_fraction is None and default > safe:  # only when the user left the fraction to us
            warnings.append(f"SGLang's default fraction {default:.3f} leaves too little slack for the verify "
                            f"workspace and graphs: pass --mem-fraction-static {safe:.3f}")
    max_ctx = tokens // inp.concurrency
    if impossible is None and frac >= need and max_ctx < inp.context:
        warnings.append(f"KV pool holds {tokens:,} tokens: {max_ctx:,} per request at {inp.concurrency} concurrent, "
                        f"below the {inp.context:,}-token context; lower concurrency or context"
                        + (", or use fp8 KV" if inp.kv_dtype != "fp8" else ""))
    used = chosen.model
    res = BudgetResult(inp, gpu_bytes, g_bytes, weights, cell, consumers, slack, safe, default, frac, tokens,
                       max_ctx, launch_line(inp, frac), warnings, impossible, used, safe_fractions,
                       draft_weights_bytes=draft, reserve_bytes=reserve, start_fraction=start, serve_fraction=need,
                       weights=None if measured else lw)
    if not res.fraction_is_safe:
        res.launch_line = ""  # nothing unsafe to paste
    return res


def kv_dtype_rows(inp: BudgetInputs) -> list[dict]:
    """The same deployment over each KV pool (bf16, fp8): bytes per token, KV tokens and the context each of
    ``inp.concurrency`` requests gets, at the fraction each one's budget picks (or ``inp.mem_fraction``)."""
    rows = []
    for kv in ("bf16", "fp8"):
        r = compute(replace(inp, kv_dtype=kv))
        rows.append({"KV cache": kv, "bytes per token": r.cell_bytes, "fraction": round(r.fraction, 3),
                     "KV tokens": r.kv_tokens, "context per request": r.max_context_per_request,
                     "launch flag": "--kv-cache-dtype fp8_e4m3" if kv == "fp8" else "(default)"})
    return rows


