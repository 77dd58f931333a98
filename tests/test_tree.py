"""DDTree best-first trees and EAGLE chains."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kdtree_lab.core.tree import chain, ddtree, random_ddtree, random_tree


def test_hand_computed_ddtree():
    # depth 1: token 0 p=.6, token 1 p=.4; depth 2: token 1 p=.9, token 0 p=.1
    probs = np.array([[0.6, 0.4], [0.1, 0.9]])
    t = ddtree(probs, budget=4)
    # best-first: root(1), a=tok0 (.6), b=tok1 (.4), then a's child tok1 (.54) beats b (.4): order root, a, a1, b
    assert t.parents.tolist() == [-1, 0, 1, 0]
    assert t.tokens.tolist() == [-1, 0, 1, 1]
    assert np.allclose(t.scores, [1.0, 0.6, 0.54, 0.4])
    assert t.depths.tolist() == [0, 1, 2, 1]
    assert t.positions(100).tolist() == [100, 101, 102, 101]
    assert t.ancestor_mask().astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 1]]


def test_chain_mask_is_causal():
    assert (chain(5).ancestor_mask() == np.tril(np.ones((5, 5), dtype=bool))).all()


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(1, 64), depth=st.integers(1, 10), vocab=st.integers(2, 40), seed=st.integers(0, 2**31))
def test_ddtree_properties(budget, depth, vocab, seed):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(vocab), size=depth)
    t = ddtree(probs, budget)
    n = t.size
    assert n == min(budget, 1 + sum(vocab ** d for d in range(1, depth + 1)))
    assert all(0 <= p < i for i, p in enumerate(t.parents[1:], 1))
    assert (np.diff(t.scores[1:]) <= 1e-12).all(), "best-first pops scores in decreasing order"
    for i in range(1, n):  # a child's path probability never exceeds its parent's
        assert t.scores[i] <= t.scores[t.parents[i]] + 1e-12
    m = t.ancestor_mask()
    assert m.diagonal().all() and m[:, 0].all() and not np.triu(m, 1).any()
    # siblings never see each other: i sees j only along its parent chain
    for i in range(n):
        chain_nodes, j = {i}, i
        while t.parents[j] >= 0:
            j = t.parents[j]
            chain_nodes.add(j)
        assert set(np.flatnonzero(m[i])) == chain_nodes
    # the tree holds the top-n prefixes: any unselected child of a selected node scores no higher than the minimum
    min_sel = t.scores[1:].min() if n > 1 else 1.0
    order = np.argsort(-probs, axis=1)
    if n < budget:
        return
    for i in range(n):
        d = t.depths[i]
        if d >= depth:
            continue
        children = {t.tokens[c] for c in range(n) if t.parents[c] == i}
        for tok in order[d]:
            if tok not in children:
                assert t.scores[i] * probs[d, tok] <= min_sel + 1e-12
                break


def test_random_trees_are_valid():
    rng = np.random.default_rng(0)
    for n in (1, 2, 16, 64):
        assert random_tree(n, rng).size == n
        assert random_ddtree(n, rng).size == n
