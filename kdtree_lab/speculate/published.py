"""The step model against tokens per second measured by others (``data/presets/speculation.yaml``, ``published``).

For each published deployment the model is set up as that report ran it (GPU, model, TP, quantisation, batch, the
draft and its number of tokens), with the parts the report measured where the model has no better source: the
fixed part of a step from the report's own one-token step at ``calibrate_at``, the draft's cost, and the acceptance
(its tokens per step). Everything else is the model's: attention from the kernel times, weights and communication
from the architecture. Speculative steps are modelled with three verify paths: one-token decode rows of batch
B x N inside a graph ("decode rows", what vLLM's TRITON_MLA does), SGLang's Triton verify and ours.
``explain`` turns a check into the sentences that say where model and measurement differ and why.
"""

from __future__ import annotations

from .presets import Published, published
from .step import MODEL_LABEL, step
from .sweep import setup, spec_step

SPEC_KERNELS = ("decode rows", "ours", "sglang")


def _tok_s(rows: tuple[tuple[float, ...], ...]) -> dict[int, float]:
    return {int(r[0]): float(r[1]) for r in rows}


def check(name: str) -> dict:
    """Measured against modelled tokens per second (one stream) per context, with and without speculation."""
    p: Published = published()[name]
    no_spec, spec = _tok_s(p.no_spec), _tok_s(p.spec)
    draft_ms = p.parts["draft_ms"][1] if "draft_ms" in p.parts else None
    s = setup(p.gpu, p.model, p.tp, p.quant, p.batch, draft=p.draft, step_ms=1e3 / no_spec[p.calibrate_at],
              step_context=max(p.calibrate_at, 1), draft_ms=draft_ms)
    rows = []
    for c in sorted(set(no_spec) | set(spec)):
        ctx = max(c, 1)  # context 0: the kernel times hold their shortest timed prefix
        base = step(s.target, s.tables, ctx, s.batch, s.fixed)
        model_spec = {k: spec_step(s, ctx, k, p.nodes, chain=True) for k in SPEC_KERNELS}
        rows.append({"context": c, "measured no speculation": no_spec.get(c), "model no speculation":
                     round(base.tokens_per_s, 1), "measured speculation": spec.get(c),
                     **{f"model speculation, {k} verify": round(st.tokens_per_s, 1) for k, st in model_spec.items()},
                     "model step ms (no speculation / decode rows / ours / sglang)":
                         " / ".join(f"{x.ms:.1f}" for x in (base, *model_spec.values()))})
    tokens = spec_step(s, max(p.calibrate_at, 1), "ours", p.nodes, chain=True).tokens
    as_measured = None
    if "verify_forward_ms" in p.parts and draft_ms is not None:
        c, fwd, _ = p.parts["verify_forward_ms"]
        as_measured = {"context": c, "tokens_per_step": round(tokens, 3), "step_ms": fwd + draft_ms,
                       "tokens_per_s": round(tokens / (fwd + draft_ms) * 1e3, 1), "measured": spec.get(c)}
    mid = p.calibrate_at
    parts = {k: [{"part": x.name, "ms": round(x.ms, 3), "source": x.source}
                 for x in spec_step(s, max(mid, 1), k, p.nodes, chain=True).parts] for k in SPEC_KERNELS}
    parts["no speculation"] = [{"part": x.name, "ms": round(x.ms, 3), "source": x.source}
                               for x in step(s.target, s.tables, max(mid, 1), s.batch, s.fixed).parts]
    return {"name": name, "label": p.label, "source": p.source, "model": MODEL_LABEL, "tokens_per_step": tokens,
            "fixed_ms": s.fixed.ms, "fixed_source": s.fixed.source, "rows": rows, "as_measured": as_measured,
            "reported": [{"context": c, "tokens_per_s": t, "what": w} for c, t, w in p.reported],
            "parts_at_calibration": {"context": mid, "parts": parts}, "notes": p.notes,
            "decode_kernel_ms": [list(r) for r in p.decode_kernel_ms], "nodes": p.nodes}


def check_all() -> list[dict]:
    return [check(n) for n in published()]


def _span(xs: list[float], fmt: str = ".0f") -> str:
    return " / ".join(f"{x:{fmt}}" for x in xs)


def _k(context: float) -> str:
    """A context length as people write it: 16384 -> 16k, 30000 -> 30k, 0 -> 0."""
    c = int(context)
    return f"{c // 1024}k" if c and c % 1024 == 0 else (f"{c / 1000:g}k" if c else "0")


def _versus(model: list[float], measured: list[float]) -> str:
    """Where the model sits against the measurement: the range of model / measured."""
    ratio = [m / x for m, x in zip(model, measured)]
    return f"model / measured {min(ratio):.2f} to {max(ratio):.2f}"


def _part(parts: list[dict], prefix: str) -> float:
    return sum(x["ms"] for x in parts if x["part"].startswith(prefix))


def explain(res: dict) -> list[str]:
    """Sentences (markdown) stating where the check's model and measurement differ, and why, from its numbers."""
    rows, out = res["rows"], []
    ns = [r for r in rows if r["measured no speculation"] is not None]
    sp = [r for r in rows if r["measured speculation"] is not None]
    at = res["parts_at_calibration"]
    cal, parts = at["context"], at["parts"]
    ctx = lambda rs: " / ".join(_k(r["context"]) for r in rs)  # noqa: E731
    out.append(
        f"**{res['label']}** ({res['source']}). Without speculation, at {ctx(ns)} tokens: measured "
        f"{_span([r['measured no speculation'] for r in ns], '.1f')} tok/s, model "
        f"{_span([r['model no speculation'] for r in ns], '.1f')} "
        f"({_versus([r['model no speculation'] for r in ns], [r['measured no speculation'] for r in ns])}). The model "
        f"is pinned to the measured step at {_k(cal)} ({res['fixed_ms']:.2f} ms of it is the fixed part the model "
        "does not see); elsewhere its slope is that of SGLang's one-token decode as predicted for the card from the "
        f"H200 ({_part(parts['no speculation'], 'attention'):.1f} ms of attention per step at {_k(cal)}).")
    if res["decode_kernel_ms"]:
        b1 = [r for r in res["decode_kernel_ms"] if r[1] == 1]
        out.append(
            f"The report's own decode kernel took {_span([r[2] for r in b1], '.3f')} ms per call at "
            f"{_span([r[0] / 1000 for r in b1], 'g')}k tokens (batch 1, fp8 KV): flat, because at these lengths a "
            "call is mostly its fixed cost, which is why its measured tokens per second do not fall with context. The "
            "model's decode times are the H200's scaled by the mma.sync rate ratio (the rule of docs/results.md), which also "
            "scales that fixed cost, and are for a bf16 pool (twice the fp8 bytes): both make the model's no-"
            "speculation speed fall faster with context than this measurement.")
    if sp:
        dr, ours, sg = ([r[f"model speculation, {k} verify"] for r in sp] for k in SPEC_KERNELS)
        out.append(
            f"With speculation ({res['nodes']} nodes: the EAGLE-3 chain of {res['nodes'] - 1} drafts, "
            f"{res['tokens_per_step']:.2f} tokens per step as the report's acceptance gives), at {ctx(sp)} tokens: "
            f"measured {_span([r['measured speculation'] for r in sp], '.1f')} tok/s; model with decode-row verify "
            f"{_span(dr, '.1f')} ({_versus(dr, [r['measured speculation'] for r in sp])}), with our verify "
            f"{_span(ours, '.1f')}, with SGLang's Triton verify {_span(sg, '.1f')}. Decode rows read the KV once per "
            "draft token, so they lose ground with context; the model's decode times for batch B x N are interpolated "
            "between the grid's batch 1 and 8 rows, for a bf16 pool, and the acceptance is held at "
            f"{res['tokens_per_step']:.2f} tokens per step at every context.")
    am = res["as_measured"]
    if am:
        dr_parts = parts["decode rows"]
        moe = _part(dr_parts, "weights: routed")
        out.append(
            f"Set as the report measured it at {am['context'] / 1000:g}k (target forward at {res['nodes']} tokens plus "
            f"the draft, {am['step_ms']:g} ms, and {am['tokens_per_step']:.2f} tokens per step) the same arithmetic "
            f"gives {am['tokens_per_s']} tok/s against {am['measured']} measured. The model's own step with the same "
            f"decode-row attention, inside a CUDA graph, is {sum(x['ms'] for x in dr_parts):.1f} ms (attention "
            f"{_part(dr_parts, 'attention'):.1f}, routed experts {moe:.1f}, all weights "
            f"{_part(dr_parts, 'weights'):.1f}): the rest of the report's forward is what it attributes to MoE / MLP "
            "kernels at 4 tokens run outside full CUDA-graph capture, which the model does not price (it prices the "
            "bytes of the experts the tokens select).")
    out.append(f"The report's notes: {res['notes']}.")
    for r in res["reported"]:
        row = min(rows, key=lambda x: abs(x["context"] - r["context"]))
        out.append(
            f"Reported second-hand: {r['tokens_per_s']:g} tok/s at ~{_k(r['context'])} ({r['what']}). The "
            f"model gives {row['model speculation, sglang verify']} tok/s there with SGLang's Triton verify (one "
            f"program per request and head walks the whole prefix) and {row['model speculation, ours verify']} "
            "with ours; the figure fits a verify that reads the KV once per step, not the Triton path [inferred].")
    return out
