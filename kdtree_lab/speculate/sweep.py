"""When speculation pays: tokens per second against context for no speculation, a chain and DDTree trees of N
nodes, with each verify kernel; the best N per context; the context beyond which speculation stops paying.

``setup`` gathers one deployment's inputs (target and rates, kernel times, the draft's acceptance fit and cost, the
fixed part of a step), ``evaluate`` models every variant at one context, ``sweep`` runs a list of contexts and
finds the break-even context per kernel, and ``inputs`` lists every input with its source. Everything here is a
model (``step.MODEL_LABEL``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .acceptance import Fit, calibrate, chain_tokens, tree_curve
from .kernel_times import KernelTable, tables as kernel_tables
from .presets import DraftPreset, draft_costs, drafts, published
from .step import MODEL_LABEL, NO_FIXED, Part, Step, StepInputError, Target, fixed_from, step, target

DEFAULT_NODES = (4, 8, 16, 32, 64)
DEFAULT_CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072, 200000, 262144)
KERNELS = ("ours", "sglang")  # the verify kernels a sweep compares
REFERENCE_STEP = ("vllm-triton-mla-full-graphs", 16384)  # the reference deployment's measured one-token step


@lru_cache(maxsize=None)
def fit_draft(name: str) -> Fit:
    """The acceptance fit of draft preset ``name`` (its own tree figures, or its chain level with the shape of
    ``shape_from``'s fit)."""
    presets = drafts()
    if name not in presets:
        raise StepInputError(f"draft: expected one of {sorted(presets)}, got {name!r}")
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
    draft_cost: Part
    fixed: Part
    nodes: tuple[int, ...]


def setup(gpu: str, model: str, tp: int, quant: str = "int4", batch: int = 1, draft: str = "dflash-gsm8k",
          accept_length: float | None = None, accept_nodes: int | None = None, step_ms: float | None = None,
          step_context: int | None = None, draft_ms: float | None = None, nodes: tuple[int, ...] = DEFAULT_NODES,
          measured: dict | None = None) -> Setup:
    """One deployment's inputs. ``accept_length`` / ``accept_nodes``: a measured acceptance instead of the preset's;
    ``step_ms`` / ``step_context``: a measured one-token step (else the reference deployment's published one where
    the deployment is that one, else none: steps are then lower bounds); ``draft_ms``: the draft's cost per step
    (else the preset's cited one); ``measured``: kernel times measured on this GPU (``kernel_times.measure``)."""
    if batch < 1:
        raise StepInputError(f"batch: expected >= 1, got {batch}")
    if not nodes or min(nodes) < 2:
        raise StepInputError(f"nodes: expected tree sizes >= 2 (the root and at least one draft), got {nodes}")
    presets = drafts()
    if draft not in presets:
        raise StepInputError(f"draft: expected one of {sorted(presets)}, got {draft!r}")
    tabs = kernel_tables(gpu, measured)
    t = target(gpu, model, tp, quant, tabs["ours"].ceilings)
    if (accept_length is None) != (accept_nodes is None):
        raise StepInputError("accept_length and accept_nodes: give both (a measured acceptance at a chain size) or "
                             "neither")
    if accept_length is not None:
        fit = fit_measured(draft, accept_length, accept_nodes)
        acc_src = (f"measured: {accept_length:g} tokens per step at {accept_nodes} nodes (given), tree shape from "
                   f"{draft}")
    else:
        fit, acc_src = fit_draft(draft), presets[draft].source
    cost = draft_costs()[presets[draft].method]
    if draft_ms is not None:
        if draft_ms < 0:
            raise StepInputError(f"draft_ms: expected >= 0, got {draft_ms}")
        draft_part = Part("draft", draft_ms, "given")
    else:
        draft_part = Part("draft", cost.ms, f"{cost.source} (measured or assumed on {cost.gpu}; applied as is)")
    if step_ms is not None:
        if step_context is None:
            raise StepInputError("step_context: a measured step time needs the context it was measured at")
        fixed = fixed_from(t, tabs, step_ms, step_context, batch, "given")
    else:
        fixed = _reference_fixed(t, tabs, gpu, model, tp, quant, batch)
    return Setup(t, tabs, batch, presets[draft], fit, acc_src, draft_part, fixed, tuple(sorted(set(nodes))))


def _reference_fixed(t: Target, tabs, gpu: str, model: str, tp: int, quant: str, batch: int) -> Part:
    """The fixed part from the published one-token step of the reference deployment when this is it (measured at
    its batch, carried to any: launch gaps, sampling and scheduling do not grow with the batch to first order), else
    none."""
    name, context = REFERENCE_STEP
    ref = published()[name]
    if (gpu, model, tp, quant) != (ref.gpu, ref.model, ref.tp, ref.quant):
        return NO_FIXED
    tok_s = dict((int(r[0]), r[1]) for r in ref.no_spec)[context]
    part = fixed_from(t, tabs, 1e3 / tok_s, context, ref.batch, f"{tok_s} tok/s without speculation, {ref.source}")
    if batch == ref.batch:
        return part
    return Part(part.name, part.ms, part.source + f"; applied as is at batch {batch}")


def spec_step(s: Setup, context: int, kernel: str, nodes: int, chain: bool = False) -> Step:
    """A speculative step verifying a chain or a DDTree of ``nodes`` nodes with ``kernel``."""
    pop = s.fit.population
    tokens = chain_tokens(pop, nodes) if chain else float(tree_curve(pop, nodes)[nodes - 1])
    return step(s.target, s.tables, context, s.batch, s.fixed, kernel, nodes, tokens, s.draft_cost,
                "chain" if chain else "tree")


def evaluate(s: Setup, context: int, kernels: tuple[str, ...] = KERNELS) -> dict:
    """Every variant at ``context``: ``no_spec`` (a Step), ``chain`` and ``trees`` per kernel ({N: Step})."""
    chain_n = s.draft.chain[0]
    return {"context": context, "no_spec": step(s.target, s.tables, context, s.batch, s.fixed),
            "chain": {k: spec_step(s, context, k, chain_n, chain=True) for k in kernels},
            "trees": {k: {n: spec_step(s, context, k, n) for n in s.nodes} for k in kernels}}


def best(variants: dict, kernel: str) -> Step:
    """The fastest speculative variant (chain or tree) of ``kernel`` in an ``evaluate`` result."""
    return max([variants["chain"][kernel], *variants["trees"][kernel].values()], key=lambda st: st.tokens_per_s)


@dataclass(frozen=True)
class BreakEven:
    """Where the best speculative variant of ``kernel`` stops beating no speculation, within [lo, hi] tokens:
    ``status`` "stops paying" (at ``context``), "pays throughout" or "never pays"."""

    kernel: str
    status: str
    context: float | None
    lo: int
    hi: int

    def words(self) -> str:
        if self.status == "stops paying":
            return f"{self.kernel}: speculation stops paying beyond {self.context / 1000:.0f}k tokens"
        if self.status == "pays throughout":
            return f"{self.kernel}: speculation pays at every context up to {self.hi / 1000:.0f}k tokens"
        return f"{self.kernel}: speculation does not pay even at {self.lo / 1000:.0f}k tokens"


def break_even(s: Setup, kernel: str, lo: int = 4096, hi: int = 262144) -> BreakEven:
    """Scan [lo, hi] on a log grid for the first context where the best variant falls behind no speculation, then
    bisect to 0.1%."""
    def margin(c: float) -> float:
        v = evaluate(s, int(round(c)), (kernel,))
        return best(v, kernel).tokens_per_s - v["no_spec"].tokens_per_s

    if margin(lo) <= 0:
        return BreakEven(kernel, "never pays", None, lo, hi)
    grid = [lo * (hi / lo) ** (i / 32) for i in range(33)]
    prev = lo
    for c in grid[1:]:
        if margin(c) <= 0:
            a, b = prev, c
            while b / a > 1.001:
                mid = math.sqrt(a * b)
                a, b = (mid, b) if margin(mid) > 0 else (a, mid)
            return BreakEven(kernel, "stops paying", b, lo, hi)
        prev = c
    return BreakEven(kernel, "pays throughout", None, lo, hi)


def _step_row(st: Step) -> dict:
    return {"kind": st.kind, "kernel": st.kernel, "nodes": st.nodes, "tokens_per_step": round(st.tokens, 3),
            "step_ms": round(st.ms, 3), "tokens_per_s": round(st.tokens_per_s, 2),
            "aggregate_tokens_per_s": round(st.aggregate_tokens_per_s, 2), "extrapolated": st.extrapolated}


def inputs(s: Setup) -> list[dict]:
    """Every input of the model, with its value and source."""
    t, f = s.target, s.fit
    rows = [
        {"input": "GPU", "value": f"{t.gpu.label}, TP {t.tp}, {t.heads} heads per GPU", "source": "gpus.yaml"},
        {"input": "model", "value": f"{t.model.label}, {t.model.layers} layers, {t.quant} weights",
         "source": t.sources["architecture"]},
        {"input": "weight bytes per parameter", "value": str(t.arch.weight_bytes[t.quant]),
         "source": t.sources["weight_bytes"]},
        {"input": "weight bandwidth", "value": f"{t.weights_gbps:.0f} GB/s", "source": t.sources["weights_gbps"]},
        {"input": "tensor rate", "value": f"{t.tensor_tflops:.0f} TFLOP/s", "source": t.sources["tensor_tflops"]},
        {"input": "all-reduce", "value": f"{t.allreduce_latency_us:g} us + bytes at {t.allreduce_gbps:g} GB/s",
         "source": t.sources["allreduce"]},
    ]
    rows += [{"input": f"attention: {k}", "value": tab.impl, "source": tab.label} for k, tab in s.tables.items()]
    pop = f.population
    fitted = "; ".join(f"{n} nodes: published {p:g}, model {m:.2f}" for n, p, m in (f.chain, *f.trees))
    rows += [
        {"input": "acceptance", "value": f"draft {s.draft.name}: {fitted} (steps' top-1 ~ Beta(mean {pop.mean:.3f}, "
                                         f"concentration {pop.concentration:.2f}), tail {pop.tail:.3f})",
         "source": s.acceptance_source},
        {"input": "draft cost per step", "value": f"{s.draft_cost.ms:g} ms", "source": s.draft_cost.source},
        {"input": "fixed part per step", "value": f"{s.fixed.ms:.2f} ms", "source": s.fixed.source},
        {"input": "batch", "value": str(s.batch), "source": "given (every request verifies its own tree)"},
    ]
    return rows


def sweep(s: Setup, contexts: tuple[int, ...] = DEFAULT_CONTEXTS, kernels: tuple[str, ...] = KERNELS) -> dict:
    """Tokens per second per context for every variant and kernel, the best variant per kernel and context, the
    break-even context per kernel, and the inputs; JSON-ready."""
    if not contexts or min(contexts) < 1:
        raise StepInputError(f"context: expected token counts >= 1, got {contexts}")
    rows = []
    for c in contexts:
        v = evaluate(s, c, kernels)
        rows.append({"context": c, "no_spec": _step_row(v["no_spec"]),
                     "chain": {k: _step_row(v["chain"][k]) for k in kernels},
                     "trees": {k: {str(n): _step_row(st) for n, st in v["trees"][k].items()} for k in kernels},
                     "best": {k: _step_row(best(v, k)) for k in kernels}})
    lo, hi = min(4096, min(contexts)), max(262144, max(contexts))
    even = {k: break_even(s, k, lo, hi) for k in kernels}
    return {"label": MODEL_LABEL, "rows": rows,
            "break_even": {k: {"status": b.status, "context": b.context and round(b.context), "words": b.words()}
                           for k, b in even.items()},
            "inputs": inputs(s), "parts_at": _parts(s, contexts[len(contexts) // 2])}


def _parts(s: Setup, context: int) -> dict:
    """The parts (ms) of no speculation and of each kernel's best variant at one context, for the record."""
    v = evaluate(s, context)
    out = {"context": context, "no speculation": [{"part": p.name, "ms": round(p.ms, 3), "source": p.source}
                                                  for p in v["no_spec"].parts]}
    for k in KERNELS:
        b = best(v, k)
        out[f"{k}, best ({b.kind} of {b.nodes})"] = [{"part": p.name, "ms": round(p.ms, 3), "source": p.source}
                                                    for p in b.parts]
    return out
