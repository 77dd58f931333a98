"""The model against tokens per second measured by others (``data/presets/speculation.yaml``, ``published``).

For each published table the model is set up as the report ran it (GPU, model, TP, its DCP size, quantisation, one
request, the EAGLE-3 draft at the table's fitted draft cost and its chain of 4: ``today.today_of``, as the residuals
price it) with today's best (``today``): vLLM's decode for no speculation and for the
verify as decode rows, its MoE efficiency, fixed part and draft. Tables of ``role: today`` (full CUDA graphs) must
be reproduced within their tolerance at every cell, or the cell is listed in the YAML's ``explained`` with why;
``historical`` tables are shown with what the model does not price. Beside the measurement the same step with our
verify kernel (bf16 and fp8 pools) and SGLang's Triton verify. ``band`` is the model's worst miss of today's
speculative cells, the error band the headline carries; ``explain`` says in sentences where model and measurement
differ and why.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from . import today as today_model
from .presets import Published, published
from .step import MODEL_LABEL, step
from .sweep import Setup, no_spec_step, setup, spec_step

SPEC_KERNELS = ("decode rows", "ours", "ours-fp8", "sglang")
COLUMNS = {"decode rows": "model speculation", "ours": "model, ours (bf16 pool)", "ours-fp8": "model, ours (fp8 pool)",
           "sglang": "model, SGLang's verify"}


def k_words(context: float) -> str:
    """A context length as people write it: 16384 -> 16k, 30000 -> 30k, 0 -> 0."""
    c = int(context)
    return f"{c // 1024}k" if c and c % 1024 == 0 else (f"{c / 1000:g}k" if c else "0")


@lru_cache(maxsize=8)
def _setup(gpu: str, model: str, tp: int, quant: str, batch: int, draft: str) -> Setup:
    return setup(gpu, model, tp, quant, batch, draft)


def setup_of(p: Published, batch: int | None = None) -> Setup:
    """The model set up as table ``p`` ran (``batch`` requests, else the table's): today's best at the table's DCP
    size and with its draft's cost (``today.today_of``, as the residuals price it)."""
    s = _setup(p.gpu, p.model, p.tp, p.quant, p.batch if batch is None else batch, p.draft)
    return s if s.today is None else replace(s, today=today_model.today_of(p, s.today))


def _cells(p: Published) -> list[today_model.Cell]:
    s = _setup(p.gpu, p.model, p.tp, p.quant, p.batch, p.draft)  # the deployment's: ``cells`` sets each table's
    tokens = spec_step(s, 1, "decode rows", p.nodes, chain=True).tokens
    roles = (p.role,)
    return [c for c in today_model.cells(s.target, s.tables, s.today, tokens, roles) if c.table == p.name]


def _allowed(p: Published, series: str, context: int) -> tuple[float, str | None]:
    for e in p.explained:
        if (e.series, e.context) == (series, context):
            return e.tolerance, e.why
    return p.tolerance, None


def check(name: str) -> dict:
    """Measured against modelled tokens per second (one stream) per context, with and without speculation, and the
    concurrency cells; each cell's residual (model / measured - 1) against its tolerance."""
    p = published()[name]
    s = setup_of(p)
    cells = _cells(p)
    one = {(c.series, c.context): c for c in cells if c.concurrency == 1}
    rows = []
    for ctx in sorted({int(r[0]) for r in (*p.no_spec, *p.spec)}):
        at = max(ctx, 1)  # context 0: a prompt of a few tokens
        steps = {k: spec_step(s, at, k, p.nodes, chain=True) for k in SPEC_KERNELS}
        ns, sp = one.get(("no_spec", ctx)), one.get(("spec", ctx))
        rows.append({"context": ctx,
                     "measured no speculation": ns.measured_tok_s if ns else None,
                     "model no speculation": round(no_spec_step(s, at).tokens_per_s, 1),
                     "residual no speculation": round(ns.residual, 3) if ns else None,
                     "measured speculation": sp.measured_tok_s if sp else None,
                     **{COLUMNS[k]: round(st.tokens_per_s, 1) for k, st in steps.items()},
                     "residual speculation": round(sp.residual, 3) if sp else None,
                     "model step ms (no speculation / speculation)":
                         f"{no_spec_step(s, at).ms:.1f} / {steps['decode rows'].ms:.1f}"})
    misses = []
    for c in cells:
        tol, why = _allowed(p, c.series, c.context) if c.concurrency == 1 else (p.tolerance, None)
        if abs(c.residual) > p.tolerance or why:
            misses.append({"series": c.series, "context": c.context, "concurrency": c.concurrency,
                           "residual": round(c.residual, 3), "allowed": tol, "why": why})
    conc = [{"context": c.context, "concurrency": c.concurrency, "measured": c.measured_tok_s,
             "model": round(c.model_tok_s, 1), "residual": round(c.residual, 3)} for c in cells if c.concurrency > 1]
    beyond = []
    for r in p.beyond_fit_no_spec:
        for c, x in zip(p.beyond_fit, r[1:]):
            m = step(s.target, s.tables, max(int(r[0]), 1), c, s.fixed, today=s.today).aggregate_tokens_per_s
            beyond.append({"context": int(r[0]), "concurrency": c, "speculation": False, "tokens": c, "measured": x,
                           "model": round(m, 1), "residual": round(m / x - 1, 3)})
    for r in p.spec_concurrency_rows:
        for c, x in zip(p.spec_concurrency, r[1:]):
            sc = setup_of(p, c)
            m = spec_step(sc, max(int(r[0]), 1), "decode rows", p.nodes, chain=True)
            beyond.append({"context": int(r[0]), "concurrency": c, "speculation": True, "tokens": c * p.nodes,
                           "measured": x, "model": round(m.aggregate_tokens_per_s, 1),
                           "residual": round(m.aggregate_tokens_per_s / x - 1, 3)})
    spec_ms = [spec_step(s, max(int(r[0]), 1), "decode rows", p.nodes, chain=True).ms for r in p.spec]
    mid = p.spec[len(p.spec) // 2][0] if p.spec else p.no_spec[len(p.no_spec) // 2][0]
    parts = [{"part": x.name, "ms": round(x.ms, 3), "source": x.source}
             for x in spec_step(s, max(int(mid), 1), "decode rows", p.nodes, chain=True).parts]
    return {"name": name, "label": p.label, "source": p.source, "role": p.role, "model": MODEL_LABEL,
            "tokens_per_step": spec_step(s, 1, "decode rows", p.nodes, chain=True).tokens, "nodes": p.nodes,
            "tolerance": p.tolerance, "rows": rows, "concurrency": conc, "beyond_fit": beyond, "misses": misses,
            "within": all(abs(m["residual"]) <= m["allowed"] for m in misses) if p.role == "today" else None,
            "worst": max((abs(c.residual) for c in cells), default=0.0),
            "interarrival_ms": list(p.interarrival_ms) if p.interarrival_ms else None,
            "model_step_ms": [round(x, 1) for x in spec_ms], "parts_at": {"context": mid, "parts": parts},
            "reported": [{"context": c, "tokens_per_s": t, "what": w} for c, t, w in p.reported],
            "notes": p.notes}


def check_all(roles: tuple[str, ...] = ("today", "historical")) -> list[dict]:
    return [check(n) for n, p in published().items() if p.role in roles]


def band() -> float:
    """The model's largest |model / measured - 1| over the one-request speculative cells of every table of today's
    best: the error band a modelled speculative speed carries."""
    out = 0.0
    for p in published().values():
        if p.role == "today":
            out = max([out, *(abs(c.residual) for c in _cells(p) if c.series == "spec" and c.concurrency == 1)])
    return out


def residual_rows() -> list[dict]:
    """One row per table of today's best and series: model / measured - 1 at each context (one request)."""
    out = []
    for p in published().values():
        if p.role != "today":
            continue
        for series in ("no_spec", "spec"):
            cs = [c for c in _cells(p) if c.series == series and c.concurrency == 1]
            if cs:
                out.append({"table": p.name, "series": "no speculation" if series == "no_spec" else
                            f"EAGLE-3 chain of {p.nodes}",
                            "cells (context: measured / model, residual)": "; ".join(
                                f"{k_words(c.context)}: {c.measured_tok_s:g} / {c.model_tok_s:.1f}, {c.residual:+.1%}"
                                for c in cs)})
    return out


def _span(xs: list[float], fmt: str = ".1f") -> str:
    return " / ".join(f"{x:{fmt}}" for x in xs)


def _part(parts: list[dict], prefix: str) -> float:
    return sum(x["ms"] for x in parts if x["part"].startswith(prefix))


def explain(res: dict) -> list[str]:
    """Sentences (markdown) stating where the check's model and measurement differ, and why, from its numbers."""
    rows, out = res["rows"], []
    ns = [r for r in rows if r["measured no speculation"] is not None]
    sp = [r for r in rows if r["measured speculation"] is not None]
    ctx = lambda rs: " / ".join(k_words(r["context"]) for r in rs)  # noqa: E731
    head = f"**{res['label']}** ({res['source']})."
    if ns:
        head += (f" Without speculation at {ctx(ns)}: measured {_span([r['measured no speculation'] for r in ns])}"
                 f" tok/s, model {_span([r['model no speculation'] for r in ns])}.")
    if sp:
        head += (f" The EAGLE-3 chain of {res['nodes']} ({res['tokens_per_step']:.2f} tokens per step) at {ctx(sp)}: "
                 f"measured {_span([r['measured speculation'] for r in sp])}, model "
                 f"{_span([r['model speculation'] for r in sp])}.")
    out.append(head)
    if res["role"] == "today":
        worst = max((abs(r[k]) for r in rows for k in ("residual no speculation", "residual speculation")
                     if r[k] is not None), default=0.0)
        conc = res["concurrency"]
        cw = max((abs(c["residual"]) for c in conc), default=None)
        out.append(f"Every one-request cell within {worst:.1%} of the model"
                   + (f", the {len(conc)} cells at concurrency {sorted({c['concurrency'] for c in conc})[0]}-"
                      f"{sorted({c['concurrency'] for c in conc})[-1]} within {cw:.1%}" if conc else "")
                   + f" (tolerance {res['tolerance']:.0%}).")
        for m in res["misses"]:
            if m["why"]:
                out.append(f"At {k_words(m['context'])} ({'speculation' if m['series'] == 'spec' else 'no speculation'}"
                           f") the model is {m['residual']:+.1%} off, allowed {m['allowed']:.0%}: {m['why']}.")
        if res["beyond_fit"]:
            lows = []
            for spec in (False, True):
                b = [x for x in res["beyond_fit"] if x["speculation"] == spec]
                if not b:
                    continue
                by: dict[int, list[float]] = {}
                for x in b:
                    by.setdefault(x["tokens"], []).append(x["residual"])
                spans = "; ".join(f"{n} target tokens per step {min(v):+.0%} to {max(v):+.0%}" if len(v) > 1 else
                                  f"{n} target tokens per step {v[0]:+.0%}" for n, v in sorted(by.items()))
                lows += [n for n, v in sorted(by.items()) if min(v) < -res["tolerance"]]
                what = (f"the EAGLE-3 chain at concurrency {', '.join(map(str, sorted({x['concurrency'] for x in b})))}"
                        f" ({len(b)} cells)" if spec else
                        f"no speculation at context 0, concurrency {b[0]['concurrency']}-{b[-1]['concurrency']}")
                out.append(f"Shown against the model, not fitted: {what}: model / measured - 1 = {spans}.")
            if lows:
                out.append(f"From {min(lows)} target tokens per step the model costs a step high: the independent-"
                           "routing count of experts touched overstates what that many tokens touch, and the MoE runs "
                           "closer to the roofline with more tokens per expert; trees of that size are costed high too, "
                           "so their modelled speeds are if anything understated.")
        parts = res["parts_at"]["parts"]
        out.append(f"The modelled speculative step at {k_words(res['parts_at']['context'])}: "
                   f"{sum(x['ms'] for x in parts):.1f} ms, of which attention {_part(parts, 'attention'):.1f} (the "
                   f"chain's rows read the KV once each), routed experts {_part(parts, 'weights: routed'):.1f}, other "
                   f"weights {_part(parts, 'weights') - _part(parts, 'weights: routed'):.1f}, all-reduces "
                   f"{_part(parts, 'tensor-parallel'):.1f}, the draft {_part(parts, 'draft'):.1f}, the fixed part "
                   f"{_part(parts, 'fixed'):.1f}.")
        if res["interarrival_ms"]:
            lo, hi = res["interarrival_ms"]
            out.append(f"Its interarrival (p50) was {lo:g}-{hi:g} ms at every context; the modelled step is "
                       f"{_span(res['model_step_ms'])} ms there.")
    else:
        dr = [r["model speculation"] for r in sp]
        out.append(f"Not today's best: {res['notes']}. The model prices full CUDA graphs, so it gives "
                   f"{_span(dr)} tok/s with speculation where this setup measured "
                   f"{_span([r['measured speculation'] for r in sp])}; the difference is what eager launches "
                   "between captured pieces cost, which full graphs removed (the tables above).")
        for r in res["reported"]:
            row = min(rows, key=lambda x: abs(x["context"] - r["context"]))
            out.append(
                f"Reported second-hand: {r['tokens_per_s']:g} tok/s at ~{k_words(r['context'])} ({r['what']}). The "
                f"model gives {row[COLUMNS['sglang']]} tok/s there with SGLang's Triton verify (one program per "
                f"request and head walks the whole prefix) and {row[COLUMNS['ours']]} with ours; the figure fits a "
                "verify that reads the KV once per step, not the Triton path [inferred].")
    return out
