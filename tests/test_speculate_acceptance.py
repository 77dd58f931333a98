"""Acceptance arithmetic: exact against enumeration of every target sequence on small trees; DDTree's best-first
choice optimal among all trees of its size; the step population and its calibration."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdtree_lab.speculate import acceptance as acc
from kdtree_lab.speculate.sweep import fit_draft
from kdtree_lab.core.tree import DraftTree, ddtree


def walk_tokens(tree: DraftTree, target: tuple[int, ...]) -> int:
    """Tokens one verify commits when the target's tokens are ``target`` (depth 1..D): the matched path + bonus."""
    children: dict[int, dict[int, int]] = {}
    for i in range(1, tree.size):
        children.setdefault(int(tree.parents[i]), {})[int(tree.tokens[i])] = i
    node, accepted = 0, 0
    for tok in target:
        nxt = children.get(node, {}).get(tok)
        if nxt is None:
            break
        node, accepted = nxt, accepted + 1
    return accepted + 1


def enumerate_tokens(tree: DraftTree, probs: np.ndarray) -> float:
    """Expected tokens per step by summing over every target sequence of the distributions' depth."""
    depth, vocab = probs.shape
    total = 0.0
    for seq in itertools.product(range(vocab), repeat=depth):
        p = float(np.prod([probs[d, t] for d, t in enumerate(seq)]))
        total += p * walk_tokens(tree, seq)
    return total


def random_token_tree(n: int, depth: int, vocab: int, rng: np.random.Generator) -> DraftTree:
    """A random tree of n nodes within ``depth`` whose siblings carry distinct tokens."""
    parents, tokens, depths, used = [-1], [-1], [0], {0: set()}
    while len(parents) < n:
        p = int(rng.integers(0, len(parents)))
        free = [t for t in range(vocab) if t not in used[p]]
        if depths[p] >= depth or not free:
            continue
        tok = int(rng.choice(free))
        used[p].add(tok)
        used[len(parents)] = set()
        parents.append(p), tokens.append(tok), depths.append(depths[p] + 1)
    return DraftTree(np.array(parents), np.array(tokens), np.ones(n))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 4), vocab=st.integers(2, 4), n=st.integers(1, 9))
def test_expected_tokens_equals_enumeration(seed, depth, vocab, n):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(vocab, 0.7), size=depth)
    tree = random_token_tree(min(n, sum(vocab ** d for d in range(depth + 1))), depth, vocab, rng)
    assert acc.expected_tokens(tree, probs) == pytest.approx(enumerate_tokens(tree, probs), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), budget=st.integers(1, 12))
def test_ddtree_scores_are_path_probabilities_and_enumeration(seed, budget):
    probs = np.random.default_rng(seed).dirichlet(np.full(3, 0.5), size=3)
    tree = ddtree(probs, budget)
    assert np.allclose(acc.path_probabilities(tree, probs), tree.scores)
    assert 1 + tree.scores[1:].sum() == pytest.approx(enumerate_tokens(tree, probs), rel=1e-12)


def prefix_closed_trees(depth: int, vocab: int, nodes: int):
    """Every tree of ``nodes`` nodes (root included) over all token paths up to ``depth``: prefix-closed sets."""
    paths = [p for d in range(1, depth + 1) for p in itertools.product(range(vocab), repeat=d)]
    for chosen in itertools.combinations(paths, nodes - 1):
        s = set(chosen)
        if all(p[:-1] in s or len(p) == 1 for p in s):
            order = sorted(s, key=len)
            index = {p: i + 1 for i, p in enumerate(order)}
            parents = [-1] + [index[p[:-1]] if len(p) > 1 else 0 for p in order]
            yield DraftTree(np.array(parents), np.array([-1] + [p[-1] for p in order]), np.ones(nodes))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("nodes", [2, 3, 4, 6])
def test_ddtree_is_optimal_among_all_trees_of_its_size(seed, nodes):
    probs = np.random.default_rng(seed).dirichlet(np.full(3, 0.6), size=2)
    best = max(acc.expected_tokens(t, probs) for t in prefix_closed_trees(2, 3, nodes))
    assert acc.expected_tokens(ddtree(probs, nodes), probs) == pytest.approx(best, rel=1e-12)


def test_chain_is_the_top1_path_and_its_closed_form():
    pop = acc.population(0.7, 2.0, 0.3, depth=6)
    for n in (1, 2, 4, 7):
        exact = np.mean([acc.expected_tokens(acc.chain_tree(pop.probs(k), n), pop.probs(k))
                         for k in range(len(pop.top1))])
        assert acc.chain_tokens(pop, n) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match="nodes"):
        acc.chain_tokens(pop, 8)  # deeper than the draft


def test_tree_curve_is_each_size_best_tree_and_grows():
    pop = acc.population(0.6, 1.0, 0.4, depth=5, steps=6)
    curve = acc.tree_curve(pop, 20)
    for n in (1, 3, 8, 20):
        direct = np.mean([acc.expected_tokens(ddtree(pop.probs(k), n), pop.probs(k)) for k in range(6)])
        assert curve[n - 1] == pytest.approx(direct, rel=1e-12)
    assert curve[0] == 1.0 and np.all(np.diff(curve) >= 0)
    for n in (2, 4, 6):
        assert curve[n - 1] >= acc.chain_tokens(pop, n) - 1e-12  # a tree of N nodes commits at least its chain's


def test_rank_distribution_is_geometric_from_the_first_choice_and_refuses_bad_input():
    r = acc.rank_distribution(0.3, 0.5)  # 0.3 x (1 + 0.5 + ...) < 1: the ratio stands
    assert r[0] == 0.3 and np.allclose(r[1:] / r[:-1], 0.5) and r.sum() < 1
    capped = acc.rank_distribution(0.6, 0.9)  # 0.6 / (1 - 0.9) > 1: the ratio is lowered to a sum of 1
    assert capped[0] == 0.6 and capped.sum() == pytest.approx(1.0, abs=1e-9) and np.all(np.diff(capped) < 0)
    with pytest.raises(ValueError, match="top1"):
        acc.rank_distribution(1.2, 0.5)
    with pytest.raises(ValueError, match="ratio"):
        acc.rank_distribution(0.5, 1.0)
    with pytest.raises(ValueError, match="mean"):
        acc.population(0.0, 1.0, 0.3, 4)


def test_calibration_reproduces_the_published_figures():
    fit = fit_draft("ddtree-math500")
    nodes, published, model = fit.chain
    assert model == pytest.approx(published, abs=1e-6)
    assert fit.worst_tree_error < 0.5  # four tree sizes, two shape parameters: a model, residuals recorded
    level = fit_draft("eagle3-kimi-k26")  # chain figure only: level fitted, shape borrowed
    assert level.chain[2] == pytest.approx(level.chain[1], abs=1e-6)
    assert (level.population.concentration, level.population.tail) == (fit.population.concentration,
                                                                       fit.population.tail)
    with pytest.raises(ValueError, match="acceptance length"):
        acc.calibrate((4, 4.5), 8, shape=fit.population)  # a 4-node chain commits at most 4 tokens
