"""When speculation pays: tokens per second against context for no speculation, a chain and DDTree trees of N
nodes, with each verify kernel (ours over a bf16 and an fp8 pool, SGLang's Triton verify); the best variant per
context; the context beyond which speculation stops paying.

``setup`` gathers one deployment's inputs (target and rates, kernel times, the draft's acceptance fit and cost, the
fixed part of a step, and on the deployment whose published measurements pin it, today's best: ``today.Today``),
``evaluate`` models every variant at one context, ``sweep`` runs a list of contexts and finds the break-even
context per kernel, and ``inputs`` lists every input with its source. Everything here is a model
(``step.MODEL_LABEL``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from . import card_checks, card_model
from . import today as today_model
from .acceptance import Fit, calibrate, chain_tokens, tree_curve, tree_depth
from .kernel_times import POOLS, KernelTable, tables as kernel_tables
from .presets import DraftCost, DraftPreset, draft_costs, drafts
from .step import MODEL_LABEL, NO_FIXED, Part, Step, StepInputError, Target, fixed_from, step, target

DEFAULT_NODES = (4, 8, 16, 32, 64)
DEFAULT_CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072, 200000, 262144)
KERNELS = ("ours", "ours-fp8", "sglang")  # the verify kernels a sweep compares
KERNEL_WORDS = {"ours": "ours, bf16 pool", "ours-fp8": "ours, fp8 pool", "sglang": "SGLang's Triton verify, bf16 pool"}


@lru_cache(maxsize=None)
def fit_draft(name: str) -> Fit:
    """The acceptance fit of draft preset ``name`` (its own tree figures, or its chain level with the shape of
    ``shape_from``'s fit)."""
    presets = drafts()
    if name not in presets:
        raise StepInputError(f"draft: expected one of {', '.join(sorted(presets))}, found {name!r}")
    d = presets[name]
    shape = fit_draft(d.shape_from).population if d.shape_from else None
    return calibrate(d.chain, d.depth, d.trees, shape)


def fit_measured(draft: str, accept_length: float, nodes: int) -> Fit:
    """A fit to the user's measured acceptance (SGLang's ``accept len``: tokens per step, bonus included) at a
    chain of ``nodes`` nodes, with the shape of preset ``draft``."""
    base = fit_draft(draft)
    return calibrate((nodes, accept_length), base.population.depth, (), base.population)


@dataclass(frozen=True)
class Setup:
    target: Target
    tables: dict[str, KernelTable]
    batch: int
    draft: DraftPreset
    fit: Fit
    acceptance_source: str
    draft_method: DraftCost
    draft_ms: float | None  # given per step (``--draft-ms``); None: the method's cost
    fixed: Part
    nodes: tuple[int, ...]
    today: today_model.Today | None  # today's best on this deployment, where published measurements pin it
    pool_tokens: dict = None  # our stack's KV pool per pool dtype (the memory budget); None: today's pool halved

    def capacity(self, kernel: str | None) -> int | None:
        """Tokens the KV pool that ``kernel`` reads holds per request (None: not known for this deployment): the
        verify kernels (ours and SGLang's, all in SGLang) the memory budget's pool of that dtype at its largest safe
        fraction; no speculation and decode rows today's pool (its own stack's published capacity)."""
        if kernel not in (None, "decode rows", "decode") and self.pool_tokens:
            return int(self.pool_tokens[POOLS.get(kernel, "bf16")] / self.batch)
        if self.today is None:
            return None
        cap = self.today.preset.kv_capacity_tokens / self.batch
        if POOLS.get(kernel or "decode", "bf16") == "bf16" and kernel not in (None, "decode rows") and \
                self.today.preset.kv == "fp8":
            cap /= 2  # a bf16 pool: twice the bytes per token
        return int(cap)


class DeploymentDoesNotFit(StepInputError):
    """The memory budget refuses the deployment (it cannot start on this GPU); the message is its one line."""


def pool_tokens(gpu: str, model: str, tp: int, quant: str, batch: int) -> dict[str, int]:
    """KV tokens of SGLang's pool with our verify kernel for ``batch`` concurrent requests, per pool dtype (bf16,
    fp8), at the memory budget's largest safe fraction (``budget.calculator.compute``). Raises DeploymentDoesNotFit
    with the budget's refusal when the deployment cannot start."""
    from ..budget.calculator import compute
    from ..budget.inputs import BudgetInputError, BudgetInputs

    out = {}
    for kv in ("bf16", "fp8"):
        try:
            # the pool at the largest safe fraction; a short context, so that only the weights and the slack
            # decide (which contexts fit the pool the sweep says itself)
            res = compute(BudgetInputs(gpu=gpu, model=model, tp=tp, quant=quant, kv_dtype=kv, concurrency=batch,
                                       max_bs=max(8, batch), context=4096))
        except BudgetInputError as exc:
            raise DeploymentDoesNotFit(f"the memory budget refuses it: {exc}") from None
        if res.impossible or res.kv_tokens <= 0:
            raise DeploymentDoesNotFit(f"the memory budget refuses it ({kv} pool): {res.refusal() or res.verdict()}")
        out[kv] = res.kv_tokens
    return out


def setup(gpu: str, model: str, tp: int, quant: str = "int4", batch: int = 1, draft: str = "dflash-gsm8k",
          accept_length: float | None = None, accept_nodes: int | None = None, step_ms: float | None = None,
          step_context: int | None = None, draft_ms: float | None = None, nodes: tuple[int, ...] = DEFAULT_NODES,
          measured: dict | None = None) -> Setup:
    """One deployment's inputs. ``accept_length`` / ``accept_nodes``: a measured acceptance instead of the preset's;
    ``step_ms`` / ``step_context``: a measured one-token step (else today's fitted fixed part where the deployment
    is one published measurements pin, else none: steps are then lower bounds); ``draft_ms``: the draft's cost per
    step (else the method's); ``measured``: kernel times measured on this GPU (``kernel_times.measure``)."""
    if batch < 1:
        raise StepInputError(f"batch: expected >= 1, found {batch}")
    if not nodes or min(nodes) < 2:
        raise StepInputError(f"nodes: expected tree sizes >= 2 (the root and at least one draft), found "
                              f"{','.join(map(str, nodes)) or 'none'}")
    presets = drafts()
    if draft not in presets:
        raise StepInputError(f"draft: expected one of {', '.join(sorted(presets))}, found {draft!r}")
    tabs = kernel_tables(gpu, measured)
    t = target(gpu, model, tp, quant, tabs["ours"].ceilings)
    grid_problem(tabs, t.heads, batch, nodes)
    if (accept_length is None) != (accept_nodes is None):
        raise StepInputError("accept_length and accept_nodes: give both (a measured acceptance at a chain size) or "
                             "neither")
    if accept_length is not None:
        fit = fit_measured(draft, accept_length, accept_nodes)
        acc_src = (f"measured: {accept_length:g} tokens per step at {accept_nodes} nodes (given), tree shape from "
                   f"{draft}")
    else:
        fit, acc_src = fit_draft(draft), presets[draft].source
    if draft_ms is not None and draft_ms < 0:
        raise StepInputError(f"draft_ms: expected >= 0, found {draft_ms}")
    pinned = today_model.preset_for(gpu, model, tp, quant)
    today = today_model.build(t, pinned) if pinned is not None else None
    if step_ms is not None:
        if step_context is None:
            raise StepInputError("step_context: a measured step time needs the context it was measured at")
        fixed = fixed_from(t, tabs, step_ms, step_context, batch, "given", today)
        if today is not None:
            today = replace(today, fixed=fixed)
    else:
        fixed = today.fixed if today is not None else NO_FIXED
    return Setup(t, tabs, batch, presets[draft], fit, acc_src, draft_costs()[presets[draft].method], draft_ms, fixed,
                 tuple(sorted(set(nodes))), today, pool_tokens(gpu, model, tp, quant, batch))


def grid_problem(tabs: dict[str, KernelTable], heads: int, batch: int, nodes: tuple[int, ...]) -> None:
    """Refuse a batch or a tree size outside what the verify kernels were timed at, before any step is modelled
    (StepInputError naming it). Tree sizes from 2 are taken: below the smallest timed (4) a tree reads that time,
    an upper bound of its own; above the largest timed nothing is carried."""
    verify = [tabs[k] for k in KERNELS if k in tabs]
    series = [{key for key in tab.series if key[1] == heads} for tab in verify]
    if not verify or not all(series):
        return  # the heads check of the kernel times names this
    batch_top = min(max(b for b, _, _ in keys) for keys in series)
    if batch > batch_top:
        raise StepInputError(f"batch: expected 1 to {batch_top} (the grid of {verify[0].kernel} times), found {batch}")
    low = min(min(n for _, _, n in keys) for keys in series)
    top = min(max(n for _, _, n in keys) for keys in series)
    if max(nodes) > top:
        raise StepInputError(f"nodes: expected tree sizes from 2 to {top} (the largest the verify kernels were timed "
                             f"at; below {low}, the smallest, a tree takes the {low}-node time), found "
                             f"{','.join(map(str, nodes))}")


def with_draft(s: Setup, name: str) -> Setup:
    """``s`` with draft preset ``name`` (its own acceptance and cost) instead of its draft."""
    d = drafts()[name]
    return replace(s, draft=d, fit=fit_draft(name), acceptance_source=d.source, draft_method=draft_costs()[d.method],
                   draft_ms=None)


def forwards(s: Setup, nodes: int, chain: bool) -> float:
    """Draft forwards a step of ``nodes`` nodes takes: an EAGLE-style drafter one per depth (a chain N - 1, a tree
    its mean depth), a block drafter one."""
    if s.draft_method.forwards == 1:
        return 1.0
    return float(nodes - 1) if chain else tree_depth(s.fit.population, nodes)


def draft_part(s: Setup, nodes: int, chain: bool, context: int) -> Part:
    """The draft's cost for one step of a ``nodes``-node chain or tree at ``context``."""
    if s.draft_ms is not None:
        return Part("draft", s.draft_ms, "given")
    f = forwards(s, nodes, chain)
    if s.draft_method.forwards > 1 and s.today is not None:
        return s.today.draft(f, context, f" ({'chain' if chain else 'tree depth'})")
    c = s.draft_method
    if c.forwards == 1:
        return Part("draft", c.ms, f"{c.source} (measured or assumed on {c.gpu}; one forward per step)")
    return Part("draft", c.per_forward_ms * f, f"{f:g} forwards x {c.per_forward_ms:.3f} ms ({c.source}; measured "
                                               f"on {c.gpu})")


def spec_step(s: Setup, context: int, kernel: str, nodes: int, chain: bool = False) -> Step:
    """A speculative step verifying a chain or a DDTree of ``nodes`` nodes with ``kernel``."""
    pop = s.fit.population
    tokens = chain_tokens(pop, nodes) if chain else float(tree_curve(pop, nodes)[nodes - 1])
    return step(s.target, s.tables, context, s.batch, s.fixed, kernel, nodes, tokens,
                draft_part(s, nodes, chain, context), "chain" if chain else "tree", today=s.today)


def no_spec_step(s: Setup, context: int) -> Step:
    """A step without speculation (vLLM's decode as today runs it where ``s.today`` is set, else SGLang's)."""
    return step(s.target, s.tables, context, s.batch, s.fixed, today=s.today)


def fits(s: Setup, st: Step) -> bool:
    """Whether a step's KV (context + its nodes, per request) fits the pool its kernel reads."""
    cap = s.capacity(None if st.kernel == "decode" else st.kernel)
    return cap is None or st.context + st.nodes <= cap


def evaluate(s: Setup, context: int, kernels: tuple[str, ...] = KERNELS) -> dict:
    """Every variant at ``context``: ``no_spec`` (a Step), ``chain`` and ``trees`` per kernel ({N: Step})."""
    chain_n = s.draft.chain[0]
    return {"context": context, "no_spec": no_spec_step(s, context),
            "chain": {k: spec_step(s, context, k, chain_n, chain=True) for k in kernels},
            "trees": {k: {n: spec_step(s, context, k, n) for n in s.nodes} for k in kernels}}


def best(s: Setup, variants: dict, kernel: str) -> Step | None:
    """The fastest speculative variant (chain or tree) of ``kernel`` in an ``evaluate`` result whose KV fits its
    pool; None when none does."""
    ok = [x for x in (variants["chain"][kernel], *variants["trees"][kernel].values()) if fits(s, x)]
    return max(ok, key=lambda st: st.tokens_per_s) if ok else None


@dataclass(frozen=True)
class BreakEven:
    """Where the best speculative variant of ``kernel`` stops beating no speculation, within [lo, hi] tokens:
    ``status`` "stops paying" (at ``context``), "pays throughout" or "never pays"; ``capacity`` the tokens its
    pool holds where that ends the scan first."""

    kernel: str
    status: str
    context: float | None
    lo: int
    hi: int
    capacity: int | None = None

    def words(self) -> str:
        name = KERNEL_WORDS.get(self.kernel, self.kernel)
        if self.status == "stops paying":
            return f"{name}: speculation stops paying beyond {self.context / 1000:.0f}k tokens"
        if self.status == "pays throughout":
            end = f"its pool's capacity ({self.hi / 1000:.0f}k tokens per request)" if self.capacity else \
                f"{self.hi / 1000:.0f}k tokens"
            return f"{name}: speculation pays at every context up to {end}"
        return f"{name}: speculation does not pay even at {self.lo / 1000:.0f}k tokens"


def break_even(s: Setup, kernel: str, lo: int = 4096, hi: int = 262144) -> BreakEven:
    """Scan [lo, hi] (hi at most the kernel's pool capacity) on a log grid for the first context where the best
    variant falls behind no speculation, then bisect to 0.1%."""
    cap = s.capacity(kernel)
    capped = cap is not None and cap - max(s.nodes) < hi
    if capped:
        hi = cap - max(s.nodes)

    def margin(c: float) -> float:
        v = evaluate(s, int(round(c)), (kernel,))
        b = best(s, v, kernel)
        return -1.0 if b is None else b.tokens_per_s - v["no_spec"].tokens_per_s

    if margin(lo) <= 0:
        return BreakEven(kernel, "never pays", None, lo, hi, cap if capped else None)
    grid = [lo * (hi / lo) ** (i / 32) for i in range(33)]
    prev = lo
    for c in grid[1:]:
        if margin(c) <= 0:
            a, b = prev, c
            while b / a > 1.001:
                mid = math.sqrt(a * b)
                a, b = (mid, b) if margin(mid) > 0 else (a, mid)
            return BreakEven(kernel, "stops paying", b, lo, hi, cap if capped else None)
        prev = c
    return BreakEven(kernel, "pays throughout", None, lo, hi, cap if capped else None)


def step_row(s: Setup, st: Step | None) -> dict | None:
    """A step for the record (JSON-ready); None stays None (no variant fits)."""
    if st is None:
        return None
    return {"kind": st.kind, "kernel": st.kernel, "nodes": st.nodes, "tokens_per_step": round(st.tokens, 3),
            "step_ms": round(st.ms, 3), "tokens_per_s": round(st.tokens_per_s, 2),
            "aggregate_tokens_per_s": round(st.aggregate_tokens_per_s, 2), "extrapolated": st.extrapolated,
            "fits": fits(s, st)}


def inputs(s: Setup) -> list[dict]:
    """Every input of the model, with its value and source."""
    t, f = s.target, s.fit
    wb = t.arch.weight_bytes[t.quant]
    rows = [
        {"input": "GPU", "value": f"{t.gpu.label}, TP {t.tp}, {t.heads} heads per GPU", "source": "gpus.yaml"},
        {"input": "KV pool capacity, the verify kernels (SGLang with ours, or its own)",
         "value": ", ".join(f"{kv} {n:,} tokens" for kv, n in s.pool_tokens.items()),
         "source": "the memory budget (kdtree-lab budget) at its largest safe fraction for this GPU, model, TP and "
                   f"{s.batch} concurrent request(s)"},
        {"input": "model", "value": f"{t.model.label}, {t.model.layers} layers, {t.quant} weights",
         "source": t.sources["architecture"]},
        {"input": "weight bytes per parameter", "value": ", ".join(f"{k} {v:g} B" for k, v in wb.items()),
         "source": t.sources["weight_bytes"]},
        {"input": "weight bandwidth", "value": f"{t.weights_gbps:.0f} GB/s", "source": t.sources["weights_gbps"]},
        {"input": "tensor rate", "value": f"{t.tensor_tflops:.0f} TFLOP/s", "source": t.sources["tensor_tflops"]},
        {"input": "all-reduce", "value": f"{t.allreduce_latency_us:g} us + bytes at {t.allreduce_gbps:g} GB/s",
         "source": t.sources["allreduce"]},
    ]
    rows += [{"input": f"attention: {k}", "value": tab.impl, "source": tab.label} for k, tab in s.tables.items()]
    if any(tab.predicted for tab in s.tables.values()):
        c = card_model.card(t.gpu.name)
        lo, hi, n = card_checks.error_band(c.name)
        rows.append({"input": "card model (kernel times on this card)",
                     "value": f"stream {c.stream_gbps:g} GB/s, bf16 {c.tensor_tflops('bf16'):.0f} / e4m3 "
                              f"{c.tensor_tflops('e4m3'):.0f} TFLOP/s at {c.sustained_mhz:g} MHz, issue time x "
                              f"{card_model.issue_scale(c):.3f}, floor {card_model.floor()[0] * 1e3:.1f} us; band "
                              f"x{lo:.2f}-x{hi:.2f} over {n} checks",
                     "source": "data/presets/gpus.yaml card_model; data/published/sm120_checks.yaml"})
    if s.today is not None:
        p, k = s.today.preset, s.today.preset.kernel
        rows += [
            {"input": "today's decode kernel", "value": f"vLLM TRITON_MLA: rows x {k.max_splits} splits (at most), "
                                                        f"BLOCK_N {k.block_n}, BLOCK_H {k.block_h}, {k.ctas_per_sm} "
                                                        f"CTA per SM, {k.kv_bytes_per_token} B per token",
             "source": p.sources["kernel"]},
            {"input": "today: per-CTA streaming rate", "value": f"{p.cta_gbps:g} GB/s", "source": p.sources["cta_gbps"]},
            {"input": "today: MoE efficiency", "value": f"{p.moe_efficiency:g} of the weight bandwidth",
             "source": p.sources["moe_efficiency"]},
            {"input": "today: draft's fixed cost", "value": f"{p.draft_ms:g} ms per {p.nodes - 1} EAGLE-3 forwards",
             "source": p.sources["draft_ms"]},
            {"input": "KV pool capacity, today's best (no speculation rows too)",
             "value": f"{p.kv_capacity_tokens:,} tokens ({p.kv}; a bf16 pool half)",
             "source": p.sources["kv_capacity_tokens"]},
        ]
    pop = f.population
    fitted = "; ".join(f"{n} nodes: published {p:g}, model {m:.2f}" for n, p, m in (f.chain, *f.trees))
    c = s.draft_method
    rows += [
        {"input": "acceptance", "value": f"draft {s.draft.name}: {fitted} (steps' top-1 ~ Beta(mean {pop.mean:.3f}, "
                                         f"concentration {pop.concentration:.2f}), tail {pop.tail:.3f})",
         "source": s.acceptance_source},
        {"input": "draft cost", "value": _draft_words(s), "source": _draft_source(s)},
        {"input": "fixed part per step", "value": f"{s.fixed.ms:.2f} ms", "source": s.fixed.source},
        {"input": "batch", "value": str(s.batch), "source": "given (every request verifies its own tree)"},
    ]
    return rows


def _draft_words(s: Setup) -> str:
    c = s.draft_method
    if s.draft_ms is not None:
        return f"{s.draft_ms:g} ms per step (given)"
    if c.forwards == 1:
        return f"{c.ms:g} ms per step ({c.method}: one forward per step)"
    per = s.today.draft_per_forward_ms if s.today is not None else c.per_forward_ms
    extra = " + its MLA layer's decode over the context" if s.today is not None else ""
    return f"{c.method}: {per:.3f} ms per forward{extra}; a chain of N nodes N - 1 forwards, a tree its depth"


def _draft_source(s: Setup) -> str:
    if s.draft_ms is not None:
        return "given"
    if s.draft_method.forwards > 1 and s.today is not None:
        return s.today.preset.sources["draft_ms"]
    return s.draft_method.source


def sweep(s: Setup, contexts: tuple[int, ...] = DEFAULT_CONTEXTS, kernels: tuple[str, ...] = KERNELS) -> dict:
    """Tokens per second per context for every variant and kernel, the best variant per kernel and context, the
    break-even context per kernel, and the inputs; JSON-ready."""
    if not contexts or min(contexts) < 1:
        raise StepInputError(f"context: expected token counts >= 1, found {','.join(map(str, contexts)) or 'none'}")
    rows = []
    for c in contexts:
        v = evaluate(s, c, kernels)
        rows.append({"context": c, "no_spec": step_row(s, v["no_spec"]),
                     "chain": {k: step_row(s, v["chain"][k]) for k in kernels},
                     "trees": {k: {str(n): step_row(s, st) for n, st in v["trees"][k].items()} for k in kernels},
                     "best": {k: step_row(s, best(s, v, k)) for k in kernels}})
    lo, hi = min(4096, min(contexts)), max(262144, max(contexts))
    even = {k: break_even(s, k, lo, hi) for k in kernels}
    return {"label": MODEL_LABEL, "rows": rows,
            "break_even": {k: {"status": b.status, "context": b.context and round(b.context), "words": b.words()}
                           for k, b in even.items()},
            "inputs": inputs(s), "parts_at": _parts(s, contexts[len(contexts) // 2], kernels)}


def _parts(s: Setup, context: int, kernels: tuple[str, ...] = KERNELS) -> dict:
    """The parts (ms) of no speculation and of each kernel's best variant at one context, for the record."""
    v = evaluate(s, context, kernels)
    out = {"context": context, "no speculation": [{"part": p.name, "ms": round(p.ms, 3), "source": p.source}
                                                  for p in v["no_spec"].parts]}
    for k in kernels:
        b = best(s, v, k)
        if b is not None:
            out[f"{k}, best ({b.kind} of {b.nodes})"] = [{"part": p.name, "ms": round(p.ms, 3), "source": p.source}
                                                        for p in b.parts]
    return out
