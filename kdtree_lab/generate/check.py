"""Every emitted token against greedy decoding of the same model, in fp32, given the same prefix.

For each request the fp32 reference (the same weights, fp32 arithmetic, fp32 attention over the context's pool
rows as stored) runs once over the prompt's last token and the emitted tokens but the last, teacher-forced: row i's
argmax is the token greedy decoding emits after the first i emitted tokens. A token is compared there, so one
near-tie does not shift the rest. Per token:

- ``self``: the emitted token is the argmax of the logits row the loop chose it from (the acceptance is exact);
- ``agree``: it is the reference's argmax; where it is not, the mismatch is *explained* when the reference's top-2
  margin is below the path's numerical bound: twice the largest logit difference between the path and the
  reference over the tokens that agree (every mismatch is counted and listed, explained or not).

If every token agrees, the loop's output is exactly greedy decoding's, by induction over the positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.mla import D_V
from .attend import reference_attention
from .forward import forward
from .model import Weights


@dataclass
class TokenCheck:
    """The comparison of one run's tokens (all requests)."""

    compared: int
    self_mismatches: int  # emitted != argmax of its own row: an acceptance bug, never explained
    mismatches: list[dict]  # each: request, index, reference margin, path difference there, explained
    bound: float  # 2 x the largest |path - reference| logit difference over agreeing tokens
    margin_quantiles: dict[str, float]  # the reference's top-2 margin at the compared tokens
    margin_hist: dict[str, list]  # the same as counts over MARGIN_EDGES: all tokens, and the mismatched ones
    diff_quantiles: dict[str, float]  # max |path - reference| per token

    @property
    def unexplained(self) -> int:
        """Tokens not the argmax of their own row, and mismatches beyond the bound (a token counted once)."""
        return self.self_mismatches + sum(not m["explained"] and not m["self"] for m in self.mismatches)

    def as_dict(self) -> dict:
        return {"compared": self.compared, "self_mismatches": self.self_mismatches, "mismatches": self.mismatches,
                "explained": sum(m["explained"] for m in self.mismatches), "unexplained": self.unexplained,
                "bound": self.bound, "margin_quantiles": self.margin_quantiles, "margin_hist": self.margin_hist,
                "diff_quantiles": self.diff_quantiles}


def reference_logits(w32: Weights, k_buffers: list[torch.Tensor], ctx: torch.Tensor, prompt: list[int],
                     emitted: list[int]) -> torch.Tensor:
    """fp32 logits [len(emitted), 256]: row i after the prompt and emitted[:i] (teacher-forced). ``ctx``: the
    prompt's first len(prompt) - 1 slots in the pool ``k_buffers`` (one per layer)."""
    dev = w32.device
    ids = torch.tensor([prompt[-1]] + emitted[:-1], dtype=torch.int64, device=dev)
    pos = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(emitted), device=dev)
    n = ids.numel()

    def attention(i, q, k):
        return reference_attention(q, k_buffers[i], [ctx], k, k[:, :D_V], [(0, n)], [None], w32.sm_scale,
                                   dtype=torch.float32, budget_bytes=1 << 30)

    return forward(w32, ids, pos, attention)


QUANTILES = (0.0, 0.01, 0.1, 0.5, 0.9, 1.0)
MARGIN_EDGES = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 1000.0)  # logits


def _quantiles(x: np.ndarray) -> dict[str, float]:
    return {f"q{int(q * 100):02d}": float(np.quantile(x, q)) for q in QUANTILES} if x.size else {}


def compare(emitted: list[list[int]], path_logits: list[np.ndarray], ref_logits: list[np.ndarray],
            bound: float | None = None) -> TokenCheck:
    """Compare per request the emitted tokens with their logits rows and the reference's (see the module).
    ``bound``: the numerical bound mismatches are judged by, measured on another run (the loop uses greedy decoding's
    without speculation, so a path cannot widen its own); None: this run's own (what the greedy run itself takes)."""
    margins, diffs, rows = [], [], []
    self_bad = 0
    for b, (toks, pl, rl) in enumerate(zip(emitted, path_logits, ref_logits, strict=True)):
        toks = np.asarray(toks)
        own = pl.argmax(-1) != toks
        self_bad += int(own.sum())
        top2 = np.sort(rl, axis=-1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]
        diff = np.abs(pl - rl).max(-1)
        agree = rl.argmax(-1) == toks
        margins.append(margin)
        diffs.append(diff)
        for i in np.flatnonzero(~agree):
            rows.append({"request": b, "index": int(i), "margin": float(margin[i]), "diff": float(diff[i]),
                         "self": bool(own[i])})
    margin_all, diff_all = np.concatenate(margins), np.concatenate(diffs)
    agree_all = np.ones_like(diff_all, dtype=bool)
    offsets = np.cumsum([0] + [len(m) for m in margins])
    for r in rows:
        agree_all[offsets[r["request"]] + r["index"]] = False
    if bound is None:
        bound = 2.0 * float(diff_all[agree_all].max()) if agree_all.any() else 0.0
    for r in rows:
        r["explained"] = r["margin"] < bound
    hist = {"edges": list(MARGIN_EDGES), "all": np.histogram(margin_all, MARGIN_EDGES)[0].tolist(),
            "mismatched": np.histogram([r["margin"] for r in rows], MARGIN_EDGES)[0].tolist()}
    return TokenCheck(compared=int(margin_all.size), self_mismatches=self_bad, mismatches=rows, bound=bound,
                      margin_quantiles=_quantiles(margin_all), margin_hist=hist, diff_quantiles=_quantiles(diff_all))


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """The first index where two token lists differ (over the shorter), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None
