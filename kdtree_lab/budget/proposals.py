"""Deployments that hold their context when the one asked about does not: the budget re-run over the changes an
operator can make without new hardware (an fp8 KV pool, fewer concurrent requests or a smaller captured batch,
fewer draft tokens, a smaller chunked prefill), each at its own largest safe fraction, ranked.

Every proposal is a full :class:`BudgetInputs` that ``calculator.compute`` re-evaluates: it is kept only if its KV
pool holds ``context`` tokens for each of its concurrent requests at its safe fraction."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .calculator import BudgetResult, compute
from .inputs import BudgetInputs
from .launch import speculative_problem
from .presets import gpus
from .sglang_memory import sglang_defaults

SMALLER_CHUNKS = (4096, 2048)  # chunked prefill sizes tried below SGLang's default


@dataclass(frozen=True)
class Proposal:
    """One deployment that holds its context: what changed from the one asked about and what it gives."""

    changes: tuple[str, ...]
    inputs: BudgetInputs  # mem_fraction set to its safe fraction
    safe_fraction: float
    kv_tokens: int
    concurrency: int
    tokens_per_request: int
    launch_line: str

    def row(self) -> dict:
        return {"changes": "; ".join(self.changes), "safe fraction": self.safe_fraction, "KV tokens": self.kv_tokens,
                "concurrent requests": self.concurrency, "tokens per request": self.tokens_per_request}


def _draft_options(inp: BudgetInputs) -> list[tuple[int, int]]:
    """(spec_steps, draft_tokens) pairs with fewer draft tokens that SGLang runs: a tree keeps its steps and
    halves N; a chain drops steps (N = steps + 1); a DFLASH block is the draft model's, not ours to change."""
    if inp.spec_algorithm == "DFLASH":
        return []
    if inp.topk == 1:
        return [(s, s + 1) for s in range(inp.spec_steps - 1, 0, -1)][:2]
    out = []
    for n in (inp.draft_tokens // 2, inp.draft_tokens // 4):
        if n >= 2 and not speculative_problem(inp.spec_algorithm, inp.spec_steps, inp.topk, n):
            out.append((inp.spec_steps, n))
    return out


def proposals(inp: BudgetInputs, limit: int = 8) -> list[Proposal]:
    """Deployments derived from ``inp`` that hold ``inp.context`` per request: those no other beats on all of
    concurrent requests, number of changes and tokens per request, ranked by most concurrent requests, then the
    fewest changes, then the most tokens per request. Empty when none of the changes holds the context."""
    default_chunk, _ = sglang_defaults(gpus()[inp.gpu].memory_mib, inp.tp)
    asked_chunk = inp.chunked_prefill or default_chunk
    kvs = [inp.kv_dtype] + (["fp8"] if inp.kv_dtype != "fp8" else [])
    drafts = [(inp.spec_steps, inp.draft_tokens)] + _draft_options(inp)
    chunks = [None if inp.chunked_prefill is None else asked_chunk] + [c for c in SMALLER_CHUNKS if c < asked_chunk]
    found: dict[tuple, Proposal] = {}
    for kv in kvs:
        for steps, n in drafts:
            for chunk in chunks:
                base = replace(inp, kv_dtype=kv, spec_steps=steps, draft_tokens=n, chunked_prefill=chunk,
                               mem_fraction=None)
                first = compute(base)
                if first.impossible:
                    continue
                hold = min(inp.concurrency, first.kv_tokens // inp.context)
                if hold < 1:
                    continue
                for max_bs in sorted({inp.max_bs, min(inp.max_bs, hold)}, reverse=True):
                    cand = replace(base, concurrency=hold, max_bs=max_bs)
                    res = compute(cand)
                    if res.impossible or res.kv_tokens // hold < inp.context:
                        continue
                    cand = replace(cand, mem_fraction=res.safe_fraction)
                    res = compute(cand)  # re-evaluated at the fraction it proposes
                    if not res.holds_context or any("OOM" in w for w in res.warnings):
                        continue
                    changes = _changes(inp, cand, asked_chunk)
                    if not changes:
                        continue
                    key = (cand.kv_dtype, cand.draft_tokens, cand.chunked_prefill, cand.concurrency, cand.max_bs)
                    found[key] = Proposal(changes, cand, res.safe_fraction, res.kv_tokens, hold,
                                          res.max_context_per_request, res.launch_line)
    def beats(a: Proposal, b: Proposal) -> bool:
        ka, kb = (a.concurrency, -len(a.changes), a.tokens_per_request), (b.concurrency, -len(b.changes),
                                                                           b.tokens_per_request)
        return all(x >= y for x, y in zip(ka, kb)) and ka != kb

    front = [p for p in found.values() if not any(beats(q, p) for q in found.values())]
    return sorted(front, key=lambda p: (-p.concurrency, len(p.changes), -p.tokens_per_request))[:limit]


def with_proposals(res: BudgetResult) -> BudgetResult:
    """``res`` with its proposals filled in when it cannot hold its context at its largest safe fraction (or no
    fraction fits); returns ``res``."""
    res.proposals = [] if res.holds_context_at_safe_fraction else proposals(res.inputs)
    return res


def _changes(asked: BudgetInputs, cand: BudgetInputs, asked_chunk: int) -> tuple[str, ...]:
    out = []
    if cand.kv_dtype != asked.kv_dtype:
        out.append("fp8 KV cache (--kv-cache-dtype fp8_e4m3)")
    if cand.concurrency != asked.concurrency:
        running = (f"; up to {cand.max_bs} shorter ones still run at once" if cand.max_bs > cand.concurrency else "")
        noun = "request" if cand.concurrency == 1 else "requests"
        out.append(f"{cand.concurrency} concurrent full-context {noun} (was {asked.concurrency}{running})")
    if cand.max_bs != asked.max_bs:
        out.append(f"captured verify batch {cand.max_bs} (was {asked.max_bs})")
    if cand.draft_tokens != asked.draft_tokens:
        steps = f", {cand.spec_steps} steps" if cand.spec_steps != asked.spec_steps else ""
        out.append(f"{cand.draft_tokens} draft tokens{steps} (was {asked.draft_tokens})")
    if (cand.chunked_prefill or asked_chunk) != asked_chunk:
        out.append(f"chunked prefill {cand.chunked_prefill} (was {asked_chunk})")
    return tuple(out)
