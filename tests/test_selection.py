"""The launcher's per-shape choice against the committed grids (kdtree_lab/checks/selection.py): on an RTX card the
configuration taken is within 3% of the fastest candidate at every committed shape except the listed ones, each a
short-prefix call whose fastest configuration at L = 4k (more, smaller CTAs) is not the one that is fastest at the
long contexts the choice serves from the same captured graph (docs/performance.md, "Open targets")."""

from kdtree_lab.budget.presets import gpus
from kdtree_lab.checks import selection
from kdtree_lab.kernels.launch_plan import Device

# (pool, B, L, N, H) where the choice is more than 3% slower than the fastest, in the committed grids
KNOWN_MISSES = {
    ("bf16", 1, 4096, 4, 16), ("bf16", 1, 4096, 4, 64), ("bf16", 1, 4096, 16, 8), ("bf16", 1, 4096, 16, 16),
    ("bf16", 1, 32768, 4, 16), ("bf16", 48, 4096, 4, 16),
    ("fp8", 1, 4096, 4, 16), ("fp8", 1, 4096, 16, 8), ("fp8", 1, 4096, 64, 8), ("fp8", 1, 4096, 64, 16),
    ("fp8", 1, 32768, 4, 16), ("fp8", 8, 4096, 4, 16),
}  # the issue-fp8 grid of 2026-12-06 took three off 2026-12-03's: fp8 B 1 4k N 4 H 8 and N 16 H 16, B 8 4k N 16 H 8


def _key(c):
    return (c.pool, *c.shape)


def test_the_choice_is_within_3_percent_of_the_fastest_except_the_listed_short_prefixes():
    rtx = gpus()["rtx-pro-6000"].device
    every = selection.choices(rtx)
    assert {c.pool for c in every} == {"bf16", "fp8"} and len(every) >= 100  # both grids were found and compared
    missed = {_key(c): c for c in selection.misses(rtx)}
    assert set(missed) == KNOWN_MISSES, "\n".join(c.line() for c in missed.values())
    assert all(c.ratio < 1.25 for c in missed.values())
    # every miss is a short prefix at small batch, where the fixed cost per CTA decides
    assert all(length <= 32_768 and b in (1, 8, 48) for _, b, length, _, _ in missed)
    long_ones = [c for c in every if c.shape[1] == 200_000]
    assert long_ones and all(c.ratio <= selection.TOLERANCE for c in long_ones)  # at 200k the choice is the fastest


def test_a_choice_slower_than_the_fastest_is_reported_with_its_ratio():
    """The check can fail: on a GPU with too little shared memory for the 64-row configurations (90,000 B per
    block) the launcher takes the 32-row kernels at every row count, and the long 128-row shapes, where the 64-row
    form is faster, are reported with their ratio."""
    rtx = gpus()["rtx-pro-6000"].device
    by = {_key(c): c for c in selection.choices(rtx)}
    c = by[("fp8", 8, 200_000, 4, 8)]
    assert c.taken == "cuda_sm120_e4m3_32" and c.fastest == "cuda_sm120_e4m3_32" and c.ratio == 1.0
    assert c.ms["cuda_sm120_fp8"] / c.ms["cuda_sm120_e4m3_32"] > 1.5  # the exact path it replaced
    small = Device(188, 120, 90_000, sm90a=False)  # no 99,432 B configuration fits: the 32-row kernels everywhere
    big = {_key(x): x for x in selection.choices(small)}
    assert big[("bf16", 1, 200_000, 16, 8)].taken == "cuda_sm120" and big[("bf16", 1, 200_000, 16, 8)].ratio > 1.1
