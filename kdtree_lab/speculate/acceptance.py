"""Tokens committed per verify step, for chains and DDTree trees, from per-depth draft distributions.

One step: the drafter gives a token distribution per depth, ``probs`` [D, V] (rank-ordered or not). The target's
token at depth d is modelled as drawn from ``probs[d - 1]``, independently across depths (DDTree's surrogate: the
drafter's probabilities stand for the chance that the target agrees). Verification walks the tree from the root
along the child that matches the target's token and commits the matched path plus the target's own next token (the
bonus). So the expected tokens committed per step are ``1 + sum over non-root nodes of P(path to node matches)``,
where a path's probability is the product of ``probs[depth - 1, token]`` along it (``path_probabilities``). This is
exact for one step; ``tests/test_speculate_acceptance.py`` checks it against enumeration of every target sequence.

Many steps: drafters are confident on some steps and not on others, and a tree helps most where they are not. A
``StepPopulation`` holds K equally likely steps; a step's distribution puts p on the drafter's first choice and
falls off geometrically by rank from there (``rank_distribution``, ratio ``tail``), the same at every depth of the
step, and across steps p follows a Beta distribution (its K quantile midpoints). DDTree builds each step's tree from
that step's distributions (``tree.ddtree``), so a tree's tokens per step are the mean over steps of its own best
tree; a chain takes the first choice at every depth. ``calibrate`` fits (mean, concentration, tail) to published
acceptance lengths (a chain's and a tree curve's), or the mean alone to one measured acceptance length with the
shape of another fit. The family is a model: DDTree's own MATH-500 curve is reproduced within ~0.5 tokens per step
(``Fit.trees`` holds the residuals), and real drafters' depths are neither identical nor independent.

Acceptance lengths here count the bonus token, as SGLang's ``accept len`` log does ((accepted drafts + batch size)
/ verify steps) and as the DFlash / DDTree papers' tau does. Tree sizes ``nodes`` count the root, as SGLang's
``--speculative-num-draft-tokens`` and ``tree.ddtree``'s budget do: N nodes verify N - 1 drafted tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..core.tree import DraftTree, ddtree

RANKS = 32  # ranks kept per depth; the geometric tail below them is renormalised onto them
STEPS = 24  # Beta quantiles in a population


def rank_distribution(top1: float, ratio: float, ranks: int = RANKS) -> np.ndarray:
    """float64 [ranks], decreasing: ``top1`` on the drafter's first choice and each further candidate ``ratio``
    times the one before, the ratio lowered where needed to keep the sum at most 1. What is left, 1 - sum, is the
    chance that the target's token is none of the candidates."""
    if not 0.0 < top1 < 1.0:
        raise ValueError(f"top1: expected a probability in (0, 1), found {top1}")
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio: expected a value in (0, 1), found {ratio}")
    total = lambda g: top1 * (1.0 - g ** ranks) / (1.0 - g)  # noqa: E731
    if total(ratio) > 1.0:
        lo, hi = 0.0, ratio  # the largest ratio whose sum stays at most 1
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if total(mid) <= 1.0 else (lo, mid)
        ratio = lo
    return top1 * ratio ** np.arange(ranks, dtype=np.float64)


def path_probabilities(tree: DraftTree, probs: np.ndarray) -> np.ndarray:
    """float64 [N]: the probability that the target's tokens match each node's path (root: 1). ``probs`` [D, V]
    holds one distribution per depth; node tokens index V."""
    probs = np.asarray(probs, dtype=np.float64)
    depths = tree.depths
    if depths.max(initial=0) > probs.shape[0]:
        raise ValueError(f"probs: the tree is {depths.max()} deep, the distributions cover {probs.shape[0]} depths")
    out = np.ones(tree.size)
    for i in range(1, tree.size):
        tok = int(tree.tokens[i])
        if not 0 <= tok < probs.shape[1]:
            raise ValueError(f"tokens: node {i} has token {tok}, outside the vocabulary of {probs.shape[1]}")
        out[i] = out[tree.parents[i]] * probs[depths[i] - 1, tok]
    return out


def expected_tokens(tree: DraftTree, probs: np.ndarray) -> float:
    """Expected tokens committed by verifying ``tree`` once (accepted drafts + the bonus token)."""
    return 1.0 + float(path_probabilities(tree, probs)[1:].sum())


def chain_tree(probs: np.ndarray, nodes: int) -> DraftTree:
    """A chain of ``nodes`` nodes (root + nodes - 1 drafts) taking the most likely token at each depth, as EAGLE with
    top-k 1 and a DFlash block verify it."""
    probs = np.asarray(probs, dtype=np.float64)
    if not 1 <= nodes <= probs.shape[0] + 1:
        raise ValueError(f"nodes: expected 1 to {probs.shape[0] + 1} (the draft's depth + the root), found {nodes}")
    tokens = np.concatenate([[-1], np.argmax(probs[: nodes - 1], axis=1)]).astype(np.int64)
    scores = np.ones(nodes)
    return DraftTree(np.arange(-1, nodes - 1, dtype=np.int64), tokens, scores)


def _beta_quantiles(mean: float, concentration: float, k: int) -> np.ndarray:
    """The k quantile midpoints ((i + 0.5) / k) of Beta(mean * c, (1 - mean) * c), from its CDF on a fine grid."""
    a, b = mean * concentration, (1.0 - mean) * concentration
    x = np.linspace(1e-6, 1.0 - 1e-6, 8_001)
    logpdf = (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x)
    cdf = np.cumsum(np.exp(logpdf - logpdf.max()))
    cdf /= cdf[-1]
    return np.interp((np.arange(k) + 0.5) / k, cdf, x)


@dataclass(frozen=True)
class StepPopulation:
    """K equally likely verify steps: ``top1`` [K] each step's first-choice probability (the same at every depth of
    a step), ``tail`` the ratio between consecutive candidates (``rank_distribution``), ``depth`` the deepest draft
    position (DFlash: block - 1)."""

    mean: float
    concentration: float
    tail: float
    depth: int
    top1: tuple[float, ...]

    def probs(self, k: int) -> np.ndarray:
        """Step k's distributions, float64 [depth, RANKS]."""
        return np.tile(rank_distribution(self.top1[k], self.tail), (self.depth, 1))


def population(mean: float, concentration: float, tail: float, depth: int, steps: int = STEPS) -> StepPopulation:
    """A population whose per-step first-choice probability follows Beta(mean, concentration) (mean in (0, 1),
    concentration > 0: small = steps differ a lot)."""
    if not 0.0 < mean < 1.0:
        raise ValueError(f"mean: expected a probability in (0, 1), found {mean}")
    if concentration <= 0:
        raise ValueError(f"concentration: expected > 0, found {concentration}")
    if depth < 1:
        raise ValueError(f"depth: expected >= 1, found {depth}")
    top1 = tuple(float(p) for p in np.clip(_beta_quantiles(mean, concentration, steps), 1e-4, 1.0 - 1e-4))
    return StepPopulation(mean, concentration, tail, depth, top1)


def chain_tokens(pop: StepPopulation, nodes: int) -> float:
    """Mean tokens per step of a chain of ``nodes`` nodes over the population (closed form of
    ``expected_tokens(chain_tree(...))``: 1 + p + ... + p**(nodes - 1) per step, p its first-choice probability)."""
    if not 1 <= nodes <= pop.depth + 1:
        raise ValueError(f"nodes: expected 1 to {pop.depth + 1} (the draft's depth + the root), found {nodes}")
    p = np.asarray(pop.top1)
    return float(np.mean(np.sum(p[:, None] ** np.arange(nodes)[None, :], axis=1)))


def tree_curve(pop: StepPopulation, max_nodes: int) -> np.ndarray:
    """float64 [max_nodes]: mean tokens per step when each step verifies its own DDTree of 1..max_nodes nodes (root
    included). One best-first pass per step serves every size: the tree of n nodes is the first n nodes the heap
    pops, whatever the budget."""
    if max_nodes < 1:
        raise ValueError(f"nodes: expected >= 1, found {max_nodes}")
    return np.array(_tree_curve(pop, max_nodes))


@lru_cache(maxsize=256)
def _tree_curve(pop: StepPopulation, max_nodes: int) -> tuple[float, ...]:
    curves = []
    for k in range(len(pop.top1)):
        scores = ddtree(pop.probs(k), max_nodes).scores
        curve = 1.0 + np.concatenate([[0.0], np.cumsum(scores[1:])])
        curves.append(np.pad(curve, (0, max_nodes - len(curve)), mode="edge"))  # a tree that ran out of candidates
    return tuple(float(x) for x in np.mean(curves, axis=0))


def tree_tokens(pop: StepPopulation, nodes: int) -> float:
    """Mean tokens per step when each step verifies its own DDTree of ``nodes`` nodes (root included)."""
    return float(tree_curve(pop, nodes)[nodes - 1])


def tree_depth(pop: StepPopulation, nodes: int) -> float:
    """Mean over the population's steps of the depth of each step's DDTree of ``nodes`` nodes: the draft forwards an
    autoregressive drafter (EAGLE) takes to grow it."""
    return _tree_depth(pop, nodes)


@lru_cache(maxsize=256)
def _tree_depth(pop: StepPopulation, nodes: int) -> float:
    return float(np.mean([int(ddtree(pop.probs(k), nodes).depths.max(initial=0)) for k in range(len(pop.top1))]))


def _solve_mean(concentration: float, tail: float, depth: int, nodes: int, tau: float) -> StepPopulation:
    """The population of this shape whose chain of ``nodes`` nodes commits ``tau`` tokens per step (bisection on the
    mean; the chain's tokens grow with it)."""
    if not 1.0 < tau < nodes:
        raise ValueError(f"acceptance length: a chain of {nodes} nodes commits between 1 and {nodes} tokens per "
                         f"step, found {tau}")
    lo, hi = 1e-3, 1.0 - 1e-3
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if chain_tokens(population(mid, concentration, tail, depth), nodes) < tau:
            lo = mid
        else:
            hi = mid
    return population(0.5 * (lo + hi), concentration, tail, depth)


@dataclass(frozen=True)
class Fit:
    """A calibrated population and how it reproduces the figures it was fitted to: (nodes, published, model)."""

    population: StepPopulation
    chain: tuple[int, float, float]
    trees: tuple[tuple[int, float, float], ...]

    @property
    def worst_tree_error(self) -> float:
        """Largest |model - published| over the tree figures (tokens per step); 0 without tree figures."""
        return max((abs(m - p) for _, p, m in self.trees), default=0.0)


def calibrate(chain: tuple[int, float], depth: int, trees: tuple[tuple[int, float], ...] = (),
              shape: StepPopulation | None = None) -> Fit:
    """Fit a population to a chain's acceptance length ``chain`` = (nodes, tau) exactly, and either to tree figures
    ``trees`` ((nodes, tau), ...) in least squares over (concentration, tail), or with ``shape``'s concentration and
    tail when there are none (one measured acceptance length fixes only the level)."""
    nodes, tau = chain
    if not trees:
        if shape is None:
            raise ValueError("calibrate: a chain figure alone fixes one parameter; give tree figures or a shape")
        pop = _solve_mean(shape.concentration, shape.tail, depth, nodes, tau)
        return Fit(pop, (nodes, tau, chain_tokens(pop, nodes)), ())

    def error(conc: float, tail: float) -> tuple[float, StepPopulation]:
        pop = _solve_mean(conc, tail, depth, nodes, tau)
        curve = tree_curve(pop, max(n for n, _ in trees))
        return sum((curve[n - 1] - t) ** 2 for n, t in trees), pop

    best = min(((error(c, s), c, s) for c in (0.5, 1.0, 2.0, 4.0, 8.0) for s in (0.3, 0.6, 0.9)),
               key=lambda e: e[0][0])
    (err, pop), conc, tail = best
    step_c, step_s = 2.0 ** 0.5, 0.1  # coordinate descent: log-steps in concentration, steps in tail, halving
    for _ in range(12):
        improved = False
        for c, s in ((conc * step_c, tail), (conc / step_c, tail), (conc, tail + step_s), (conc, tail - step_s)):
            if not (0.05 <= c <= 64.0 and 0.02 <= s <= 0.99):
                continue
            e, p = error(c, s)
            if e < err:
                err, pop, conc, tail, improved = e, p, c, s, True
        if not improved:
            step_c, step_s = math.sqrt(step_c), step_s / 2
    curve = tree_curve(pop, max(n for n, _ in trees))
    return Fit(pop, (nodes, tau, chain_tokens(pop, nodes)), tuple((n, t, float(curve[n - 1])) for n, t in trees))
