"""Draft configurations and the drafter: which tree of draft tokens each verify step checks.

The draft model is the target's first layer with the target's final norm and head (a LayerSkip-style early exit,
trained with its own loss: ``corpus.train``). It shares the embeddings, the head and the first layer's KV pool with
the target: the committed tokens' first-layer rows are the target's own. Its draft rows go to pool slots
allocated for the step and freed after it.

Three ways to draft, as SGLang and its forks run them:

- ``chain-K``: EAGLE-3 / MTP-like, K draft tokens one after another (topk 1); N = K + 1 nodes with the root.
- ``eagle-KxS-N``: an EAGLE tree, topk K, S draft steps: each step forwards the K best frontier nodes and takes each
  one's K best children; the N - 1 best nodes by path probability (SGLang's ``num_draft_tokens`` = N) form the tree.
- ``ddtree-N-D``: DDTree over a DFlash-like drafter: per-depth distributions for D depths (here the draft model's
  along its greedy chain), then the N-node best-first tree of ``core.tree.ddtree``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from ..core.tree import DraftTree, chain, ddtree
from .forward import forward
from .model import VOCAB

KINDS = ("chain", "eagle", "ddtree")


@dataclass(frozen=True)
class DraftConfig:
    """kind: chain / eagle / ddtree. drafts: a chain's draft tokens. topk, steps, tokens: an EAGLE tree's.
    budget, depth: a DDTree's node budget (root included) and its drafter's depths."""

    kind: str
    drafts: int = 0
    topk: int = 0
    steps: int = 0
    tokens: int = 0
    budget: int = 0
    depth: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"draft: expected one of {', '.join(KINDS)}, found {self.kind!r}")
        if self.kind == "chain" and not 1 <= self.drafts <= 15:
            raise ValueError(f"draft {self.name}: a chain takes 1..15 draft tokens, found {self.drafts}")
        if self.kind == "eagle":
            if self.topk < 1 or self.steps < 1 or self.tokens < 2:
                raise ValueError(f"draft {self.name}: expected topk >= 1, steps >= 1, tokens >= 2")
            most = 1 + self.topk + (self.steps - 1) * self.topk ** 2
            if self.tokens > most:
                raise ValueError(f"draft {self.name}: {self.tokens} tokens but topk {self.topk} x {self.steps} steps "
                                 f"draft at most {most} nodes")
        if self.kind == "eagle" and self.topk > VOCAB:
            raise ValueError(f"draft {self.name}: topk {self.topk} is more than the vocabulary's {VOCAB} tokens")
        if self.kind == "ddtree" and (self.budget < 2 or self.depth < 1):
            raise ValueError(f"draft {self.name}: expected budget >= 2 and depth >= 1")
        if self.kind == "ddtree" and self.budget > 1 + sum(VOCAB ** d for d in range(1, min(self.depth, 3) + 1)):
            raise ValueError(f"draft {self.name}: {self.budget} nodes but {self.depth} depth(s) of a {VOCAB}-token "
                             "vocabulary hold fewer")

    @property
    def num_draft(self) -> int:
        """N, the tree's nodes (the root, the last committed token, included): what the verify kernel is planned for."""
        return {"chain": self.drafts + 1, "eagle": self.tokens, "ddtree": self.budget}[self.kind]

    @property
    def name(self) -> str:
        if self.kind == "chain":
            return f"chain-{self.drafts}"
        if self.kind == "eagle":
            return f"eagle-{self.topk}x{self.steps}-{self.tokens}"
        return f"ddtree-{self.budget}-{self.depth}"

    @property
    def forwards(self) -> int:
        """Draft-model forwards per step."""
        return {"chain": self.drafts, "eagle": self.steps, "ddtree": self.depth}[self.kind]


def parse(name: str) -> DraftConfig:
    """``chain-4``, ``eagle-4x3-16``, ``ddtree-32-8``: a DraftConfig; anything else raises naming the forms."""
    text = name.strip().lower()
    if m := re.fullmatch(r"chain-(\d+)", text):
        return DraftConfig("chain", drafts=int(m[1]))
    if m := re.fullmatch(r"eagle-(\d+)x(\d+)-(\d+)", text):
        return DraftConfig("eagle", topk=int(m[1]), steps=int(m[2]), tokens=int(m[3]))
    if m := re.fullmatch(r"ddtree-(\d+)-(\d+)", text):
        return DraftConfig("ddtree", budget=int(m[1]), depth=int(m[2]))
    raise ValueError(f"draft: expected chain-K, eagle-KxS-N or ddtree-N-D (e.g. chain-4, eagle-4x3-16, ddtree-32-8), "
                     f"found {name!r}")


class Drafter:
    """Drafts one tree per request with the first-layer exit. ``engine`` gives the pool, the weights, the requests'
    committed slots and the draft decode (``loop.Engine``)."""

    def __init__(self, engine, cfg: DraftConfig):
        self.e, self.cfg = engine, cfg

    def _forward(self, tokens: list[int], positions: list[int], lists: list[list[int] | torch.Tensor]) -> torch.Tensor:
        """Draft-model logits for rows (token, position), row r attending to the slots ``lists[r]`` (its context and
        ancestors) plus its own row, written to a fresh slot first. Returns (logits [R, 256] fp32, own slots)."""
        e = self.e
        rows = len(tokens)
        own = e.pool.alloc(rows)
        self._temp.extend(own)
        dev = e.device
        own_t = torch.tensor(own, dtype=torch.int64, device=dev)
        parts, ptr = [], [0]
        for r in range(rows):
            part = lists[r] if isinstance(lists[r], torch.Tensor) else torch.tensor(lists[r], dtype=torch.int64, device=dev)
            parts.append(torch.cat([part, own_t[r:r + 1]]))
            ptr.append(ptr[-1] + parts[-1].numel())
        kv_indices = torch.cat(parts)
        kv_indptr = torch.tensor(ptr, dtype=torch.int32, device=dev)
        buf = e.pool.buffers[0]

        def attention(i, q, k):
            return e.draft_decode(q, buf, kv_indptr, kv_indices, e.w.sm_scale)

        ids = torch.tensor(tokens, dtype=torch.int64, device=dev)
        pos = torch.tensor(positions, dtype=torch.int64, device=dev)
        logits = forward(e.w, ids, pos, attention, layers=1, write=lambda i, k: e.pool.write(0, own_t, k))
        return logits, own

    def draft(self, roots: list[int], ctx: list[torch.Tensor]) -> list[DraftTree]:
        """One tree of N nodes per request: root ``roots[b]`` (the last committed token, no KV yet) at position
        ``len(ctx[b])`` over the committed slots ``ctx[b]``. Draft slots are freed before returning."""
        self._temp: list[int] = []
        try:
            kind = self.cfg.kind
            if kind == "chain":
                return self._chain(roots, ctx)
            if kind == "eagle":
                return self._eagle(roots, ctx)
            return self._ddtree(roots, ctx)
        finally:
            self.e.pool.free(self._temp)

    def _greedy_chain(self, roots, ctx, steps: int, keep_probs: bool):
        """``steps`` forwards along each request's greedy draft chain: tokens [B][steps] and, with ``keep_probs``,
        the distributions [B][steps, 256]."""
        b = len(roots)
        toks = [[r] for r in roots]
        slots: list[list[int]] = [[] for _ in range(b)]
        probs = [[] for _ in range(b)]
        for s in range(steps):
            lists = [torch.cat([ctx[i], torch.tensor(slots[i], dtype=torch.int64, device=self.e.device)])
                     for i in range(b)]
            logits, own = self._forward([t[-1] for t in toks], [len(ctx[i]) + s for i in range(b)], lists)
            nxt = logits.argmax(-1).tolist()
            if keep_probs:
                p = torch.softmax(logits, -1).cpu().double().numpy()
            for i in range(b):
                toks[i].append(nxt[i])
                slots[i].append(own[i])
                if keep_probs:
                    probs[i].append(p[i])
        return toks, probs

    def _chain(self, roots, ctx) -> list[DraftTree]:
        toks, _ = self._greedy_chain(roots, ctx, self.cfg.drafts, False)
        trees = []
        for t in toks:
            tree = chain(self.cfg.drafts + 1)
            trees.append(DraftTree(tree.parents, np.array([t[0]] + t[1:], dtype=np.int64), tree.scores))
        return trees

    def _ddtree(self, roots, ctx) -> list[DraftTree]:
        _, probs = self._greedy_chain(roots, ctx, self.cfg.depth, True)
        trees = []
        for root, p in zip(roots, probs):
            t = ddtree(np.stack(p), self.cfg.budget)
            if t.size != self.cfg.budget:
                raise RuntimeError(f"ddtree: {t.size} nodes built for a budget of {self.cfg.budget}")
            tokens = t.tokens.copy()
            tokens[0] = root
            trees.append(DraftTree(t.parents, tokens, t.scores))
        return trees

    def _eagle(self, roots, ctx) -> list[DraftTree]:
        k, steps, n = self.cfg.topk, self.cfg.steps, self.cfg.tokens
        b = len(roots)
        # candidates per request: (score, depth, parent candidate index or -1 for the root, token, slot or None)
        cands: list[list[list]] = [[] for _ in range(b)]
        frontier: list[list[int]] = [[-1] for _ in range(b)]  # candidate indices to forward; -1 = the root
        root_slot = [0] * b
        for s in range(steps):
            rows, lists, req, src = [], [], [], []
            for i in range(b):
                for c in frontier[i]:
                    anc, x = [], (-1 if c == -1 else cands[i][c][2])  # the node's ancestors' slots, root last
                    while x != -1:
                        anc.append(cands[i][x][4])
                        x = cands[i][x][2]
                    if c != -1:
                        anc.append(root_slot[i])
                    token = roots[i] if c == -1 else cands[i][c][3]
                    rows.append((token, len(ctx[i]) + s))
                    lists.append(torch.cat([ctx[i], torch.tensor(anc[::-1], dtype=torch.int64, device=self.e.device)]))
                    req.append(i)
                    src.append(c)
            logits, own = self._forward([r[0] for r in rows], [r[1] for r in rows], lists)
            logp = torch.log_softmax(logits, -1)
            top = torch.topk(logp, k, dim=-1)
            vals, idx = top.values.cpu().tolist(), top.indices.cpu().tolist()
            new: list[list[int]] = [[] for _ in range(b)]
            for r, (i, c) in enumerate(zip(req, src)):
                if c == -1:
                    root_slot[i] = own[r]
                else:
                    cands[i][c][4] = own[r]
                base = 0.0 if c == -1 else cands[i][c][0]
                for v, t in zip(vals[r], idx[r]):
                    cands[i].append([base + v, s + 1, c, t, None])
                    new[i].append(len(cands[i]) - 1)
            frontier = [sorted(new[i], key=lambda j, i=i: -cands[i][j][0])[:k] for i in range(b)]
        trees = []
        for i in range(b):
            order = sorted(range(len(cands[i])), key=lambda j, i=i: (-cands[i][j][0], cands[i][j][1], j))
            chosen: list[int] = []
            picked: set[int] = set()
            for j in order:
                if len(chosen) == n - 1:
                    break
                if cands[i][j][2] == -1 or cands[i][j][2] in picked:
                    chosen.append(j)
                    picked.add(j)
            chosen.sort(key=lambda j, i=i: (cands[i][j][1], j))  # by depth: parents before children
            node = {j: pos + 1 for pos, j in enumerate(chosen)}
            parents = [-1] + [0 if cands[i][j][2] == -1 else node[cands[i][j][2]] for j in chosen]
            tokens = [roots[i]] + [cands[i][j][3] for j in chosen]
            scores = [1.0] + [float(np.exp(cands[i][j][0])) for j in chosen]
            trees.append(DraftTree(np.array(parents, dtype=np.int64), np.array(tokens, dtype=np.int64),
                                   np.array(scores)))
        return trees
