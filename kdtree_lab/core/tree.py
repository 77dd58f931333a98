"""Draft trees for tree speculative decoding: DDTree best-first trees and EAGLE chains.

A tree has N nodes in topological order (every parent before its children); node 0 is the root (the
bonus token). The verify mask is ancestor-or-self: node i sees node j iff j is i or an ancestor of i.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DraftTree:
    """parents[i] is the parent of node i (-1 for the root); tokens are draft token ids (root: -1);
    scores are path probabilities (root: 1.0). Arrays are int64 / float64 of length N."""

    parents: np.ndarray
    tokens: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.parents)
        if n < 1 or self.parents[0] != -1:
            raise ValueError(f"parents: node 0 must be the root (-1), found {self.parents[:1].tolist()}")
        if any(not (0 <= p < i) for i, p in enumerate(self.parents[1:], 1)):
            raise ValueError("parents: every parent must come before its child (parents[i] in [0, i))")

    @property
    def size(self) -> int:
        return len(self.parents)

    @property
    def depths(self) -> np.ndarray:
        """Depth of each node (root 0), int64 [N]."""
        d = np.zeros(self.size, dtype=np.int64)
        for i in range(1, self.size):
            d[i] = d[self.parents[i]] + 1
        return d

    def positions(self, prefix_len: int) -> np.ndarray:
        """Token positions in the sequence: prefix_len + depth (SGLang's ``positions``), int64 [N]."""
        return prefix_len + self.depths

    def ancestor_mask(self) -> np.ndarray:
        """bool [N, N]: mask[i, j] is True iff j == i or j is an ancestor of i."""
        n = self.size
        m = np.zeros((n, n), dtype=bool)
        for i in range(n):
            m[i, i] = True
            if i:
                m[i] |= m[self.parents[i]]
        return m


def chain(n: int) -> DraftTree:
    """An EAGLE topk=1 draft: a chain of n nodes (its mask is causal)."""
    if n < 1:
        raise ValueError(f"chain: n must be >= 1, got {n}")
    parents = np.arange(-1, n - 1, dtype=np.int64)
    return DraftTree(parents, np.full(n, -1, dtype=np.int64), np.ones(n))


def ddtree(probs: np.ndarray, budget: int) -> DraftTree:
    """Best-first DDTree selection under a node budget (root included).

    ``probs`` [D, V] holds one token distribution per draft depth (depth 1..D), as a block-diffusion drafter
    gives. Each candidate's score is its path probability; a max-heap pops the best candidate, adds it to the
    tree, and pushes its best child (top-1 at the next depth) and its next sibling (next-ranked token at the
    same depth under the same parent). The result holds the ``budget`` highest-probability prefixes.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[0] < 1:
        raise ValueError(f"probs: expected [depth, vocab], got shape {probs.shape}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    order = np.argsort(-probs, axis=1, kind="stable")  # ranked tokens per depth
    depth_max, vocab = probs.shape
    parents, tokens, scores = [-1], [-1], [1.0]
    # heap entries: (-score, tiebreak, parent_node, depth (1-based), rank)
    heap: list[tuple[float, int, int, int, int]] = []
    counter = 0

    def push(parent: int, depth: int, rank: int) -> None:
        nonlocal counter
        if depth > depth_max or rank >= vocab:
            return
        score = scores[parent] * probs[depth - 1, order[depth - 1, rank]]
        heapq.heappush(heap, (-score, counter, parent, depth, rank))
        counter += 1

    push(0, 1, 0)
    while heap and len(parents) < budget:
        neg, _, parent, depth, rank = heapq.heappop(heap)
        node = len(parents)
        parents.append(parent)
        tokens.append(int(order[depth - 1, rank]))
        scores.append(-neg)
        push(node, depth + 1, 0)  # best child
        push(parent, depth, rank + 1)  # next sibling
    return DraftTree(np.array(parents, dtype=np.int64), np.array(tokens, dtype=np.int64), np.array(scores))


def random_ddtree(budget: int, rng: np.random.Generator, depth: int = 8, vocab: int = 32,
                  concentration: float = 0.3) -> DraftTree:
    """A DDTree from random Dirichlet distributions (small concentration = peaked, like a confident drafter)."""
    probs = rng.dirichlet(np.full(vocab, concentration), size=depth)
    return ddtree(probs, budget)


def random_tree(n: int, rng: np.random.Generator) -> DraftTree:
    """A random recursive tree: parent(i) uniform in [0, i)."""
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)], dtype=np.int64)
    return DraftTree(parents, np.full(n, -1, dtype=np.int64), np.ones(n))
