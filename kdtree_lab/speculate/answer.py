"""The one table a person reads: per context, today's best (measured where a published table measured it, the
model otherwise, and said which), the best setup with our kernel, and their ratio with a band carried from how
well the model reproduces today's best (``published.band``) and, on a card whose kernel times are predicted, from
how well the card model reproduces published sm_120 measurements (``card_checks.error_band``: ours re-chosen with
its kernel times at the band's two ends).

Today's best is vLLM's TRITON_MLA with full CUDA graphs verifying the EAGLE-3 chain of 4 (``today``); ours is the
same deployment with our verify kernel over a bf16 or an fp8 pool, for the same EAGLE-3 chain and for the sweep's
draft (its chain and DDTree trees of each size), each within the pool's capacity. Contexts beyond every published
table's longest are predictions of both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import card_checks
from . import published as pub
from .presets import published
from .step import MODEL_LABEL, StepInputError
from .sweep import KERNEL_WORDS, Setup, best, evaluate, fits, no_spec_step, spec_step, with_draft

OURS = ("ours", "ours-fp8")


@dataclass(frozen=True)
class Row:
    """One context of the headline (tokens per second per request)."""

    context: int
    today: float
    today_how: str  # "measured (<table>)", "model" or "model, a prediction"
    today_model: float
    ours: float
    ours_setup: str
    same_draft: float  # ours with today's EAGLE-3 chain of 4, its better pool
    same_draft_setup: str
    ratio: float
    band: tuple[float, float]
    same_draft_ratio: float


def _setup_words(s: Setup, st, draft: str) -> str:
    what = f"chain of {st.nodes}" if st.kind == "chain" else f"DDTree of {st.nodes}"
    return f"{what}, {KERNEL_WORDS[st.kernel].split(', ')[1]} ({draft})"


def kernel_band(s: Setup) -> tuple[float, float, str]:
    """(lo, hi, source): the factors our kernel's predicted time carries on this deployment's GPU (the card model's
    checks), (1, 1) where its times are measured."""
    if not any(s.tables[k].predicted for k in OURS):
        return 1.0, 1.0, "our kernel's times are measured on this GPU"
    lo, hi, n = card_checks.error_band(s.target.gpu.name)
    return lo, hi, (f"our kernel's time predicted for the card x{lo:.2f} to x{hi:.2f}, the spread of measured / "
                    f"predicted over the card model's {n} checks against published sm_120 measurements "
                    "(card_checks.error_band)")


def with_kernel_factor(s: Setup, factor: float) -> Setup:
    """``s`` with our kernel's times multiplied by ``factor``."""
    return replace(s, tables={k: v.scaled(factor) if k in OURS else v for k, v in s.tables.items()})


def _best_ours(s: Setup, same: Setup, ctx: int, nodes: int):
    """(the fastest step with ours that fits: the sweep's draft as chain or tree, or today's chain; its words)."""
    v = evaluate(s, ctx, OURS)
    mine = [b for b in (best(s, v, k) for k in OURS) if b is not None]
    chains = [x for x in (spec_step(same, ctx, k, nodes, chain=True) for k in OURS) if fits(same, x)]
    if not mine and not chains:
        return None, None, None
    top = max(mine, key=lambda x: x.tokens_per_s) if mine else None
    top_chain = max(chains, key=lambda x: x.tokens_per_s) if chains else None
    if top is None or (top_chain is not None and top_chain.tokens_per_s > top.tokens_per_s):
        return top_chain, _setup_words(same, top_chain, same.draft.name), top_chain
    return top, _setup_words(s, top, s.draft.name), top_chain


def headline(s: Setup, contexts: tuple[int, ...]) -> dict:
    """The headline for setup ``s`` (a deployment with today's best: ``s.today``) at ``contexts`` together with the
    contexts the headline table measured; JSON-ready."""
    if s.today is None:
        raise StepInputError("today: no published measurement pins today's best for this deployment (known: "
                             "rtx-pro-6000, kimi-k2, TP 8, int4)")
    p = s.today.preset
    tables = [x for x in published().values() if x.role == "today" and x.headline and (x.gpu, x.model, x.tp, x.quant)
              == (p.gpu, p.model, p.tp, p.quant)]
    # today's best at a context: the fastest one-request speculative cell of any headline table there (the
    # published cells are of one request each: at another batch every cell is the model's)
    measured: dict[int, tuple[float, str, int]] = {}
    for x in tables if s.batch == 1 else []:
        for r in x.spec:
            c, v = int(r[0]), float(r[1])
            if c not in measured or v > measured[c][0]:
                measured[c] = (v, f"measured ({x.name}, DCP {x.dcp}, {x.date})", x.dcp)
    dcps = sorted({x.dcp for x in tables if x.spec})
    longest = max(int(r[0]) for x in tables for r in (*x.spec, *x.no_spec))
    band = pub.band()
    k_lo, k_hi, k_src = kernel_band(s)
    fast, slow = with_kernel_factor(s, k_lo), with_kernel_factor(s, k_hi)
    same = with_draft(s, p.draft)
    rows = []
    for c in sorted(set(contexts) | set(measured)):
        ctx = max(c, 1)
        # the model's today's best: where a cell was measured, the model of that cell (its DCP size: the setup
        # measured), elsewhere the faster DCP size at this context
        today = max((spec_step(replace(same, today=replace(same.today, dcp=d)), ctx, "decode rows", p.nodes,
                               chain=True) for d in ([measured[c][2]] if c in measured else dcps)),
                    key=lambda x: x.tokens_per_s)
        top, words, top_chain = _best_ours(s, same, ctx, p.nodes)
        if top is None:
            continue
        if c in measured:
            ref, how, _ = measured[c]
        else:
            ref, how = today.tokens_per_s, "model" if c <= longest else "model, a prediction"
        ratio = top.tokens_per_s / ref
        lo = _best_ours(slow, with_draft(slow, p.draft), ctx, p.nodes)[0]
        hi = _best_ours(fast, with_draft(fast, p.draft), ctx, p.nodes)[0]
        rows.append(Row(c, ref, how, today.tokens_per_s, top.tokens_per_s, words,
                        top_chain.tokens_per_s if top_chain else float("nan"),
                        _setup_words(same, top_chain, p.draft) if top_chain else "does not fit", ratio,
                        (lo.tokens_per_s / ref / (1 + band), hi.tokens_per_s / ref / (1 - band)),
                        (top_chain.tokens_per_s / ref) if top_chain else float("nan")))
    sources = "; ".join(f"{x.name}: {x.source}" for x in tables if x.spec)
    return {"label": MODEL_LABEL, "today": p.label, "headline_table": sources, "band": band, "dcp": dcps,
            "band_source": "the largest |model / measured - 1| over the speculative cells of every published table "
                           "of today's best (published.band)",
            "kernel_band": [k_lo, k_hi], "kernel_band_source": k_src,
            "longest_measured": longest, "batch": s.batch, "capacity_per_request": s.capacity(None),
            "no_speculation": {c: round(no_spec_step(s, max(c, 1)).tokens_per_s, 1) for c in (r.context for r in rows)},
            "rows": [r.__dict__ | {"band": list(r.band)} for r in rows]}


def table_rows(h: dict) -> list[dict]:
    """The headline as table rows with plain numbers."""
    out = []
    for r in h["rows"]:
        lo, hi = r["band"]
        out.append({"context": pub.k_words(r["context"]), "today's best (tok/s)": f"{r['today']:.1f}",
                    "which": r["today_how"], "best with ours (tok/s)": f"{r['ours']:.1f}", "setup": r["ours_setup"],
                    "ratio [band]": f"{r['ratio']:.2f}x [{lo:.2f}-{hi:.2f}]",
                    "ours, same EAGLE-3 chain": f"{r['same_draft']:.1f} ({r['same_draft_ratio']:.2f}x)"})
    return out


def words(h: dict) -> str:
    """The sentence under the headline."""
    if not h["rows"]:
        return (f"At batch {h['batch']} no context asked for fits the KV pool ({h['capacity_per_request']:,} tokens "
                "per request): no headline.")
    kernel = "" if h["kernel_band"] == [1.0, 1.0] else (
        f", and {h['kernel_band_source']}, ours re-chosen at each end")
    return (f"Today's best: {h['today']}, at each context the fastest published setup (DCP {', '.join(map(str, h['dcp']))}"
            f" of the tables of data/presets/speculation.yaml with role today), measured where one measured it and "
            f"modelled elsewhere (the faster DCP size; the model's line takes the measured cell's DCP size where one was measured); contexts beyond {pub.k_words(h['longest_measured'])} are predictions of both sides. "
            f"Band: the model's worst miss of today's best, {h['band']:.0%} ({h['band_source']}){kernel}.")


def _cell(st: dict | None) -> str | float:
    return st["tokens_per_s"] if st and st["fits"] else "does not fit"


def variant_rows(res: dict) -> list[dict]:
    """A sweep's tokens per second per request, one row per context: no speculation, the chain and each tree size
    per kernel ("does not fit" where the KV outgrows the kernel's pool)."""
    out = []
    for r in res["rows"]:
        row = {"context": r["context"], "no speculation": r["no_spec"]["tokens_per_s"]}
        for k in r["chain"]:
            row[f"chain, {k}"] = _cell(r["chain"][k])
            row.update({f"N={n}, {k}": _cell(st) for n, st in r["trees"][k].items()})
        out.append(row)
    return out


def best_rows(res: dict) -> list[dict]:
    """A sweep's best variant per kernel and context."""
    return [{"context": r["context"], "no speculation": r["no_spec"]["tokens_per_s"],
             **{f"best with {k}": f"{b['tokens_per_s']:.1f} ({b['kind']} of {b['nodes']})" if b else "does not fit"
                for k, b in r["best"].items()}} for r in res["rows"]]


def figures(res: dict, head: dict | None) -> dict:
    """The figures a run records: the headline at the longest context, the break-even per kernel."""
    out = {f"break-even {k}": b["context"] or b["status"] for k, b in res["break_even"].items()}
    if head is not None:
        far = head["rows"][-1]
        out |= {"context": far["context"], "today's best tok/s": round(far["today"], 1),
                "best with ours tok/s": round(far["ours"], 1), "ratio": round(far["ratio"], 2),
                "band": [round(x, 2) for x in far["band"]], "setup": far["ours_setup"]}
    return out
