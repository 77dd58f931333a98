"""The budget against every public start-up figure committed in data/published/kimi-k2-memory.yaml: recomputed at
each same-condition figure's conditions, the budget's per-GPU weights and KV tokens come within 5% of it; the old
rule (the checkpoint's size divided by TP) misses one by far more, so the check can fail; docs/memory.md shows the
budget's own numbers beside each figure."""

from dataclasses import replace

import pytest

from kdtree_lab.budget import published
from kdtree_lab.budget.calculator import compute
from kdtree_lab.budget.inputs import GIB, BudgetInputs
from kdtree_lab.core.paths import ROOT

SAME = [e for e in published.figures() if e["same_condition"]]
# the former presets' checkpoint totals (GiB, all GPUs together) that the budget divided by TP before issue 45
OLD_CHECKPOINT_GIB = {("kimi-k2", "int4"): 553.0, ("kimi-k2", "fp8"): 959.0, ("deepseek-v3", "fp8"): 642.0}


def _old_rule(c):
    weights = OLD_CHECKPOINT_GIB[(c["model"], c["quant"])] * GIB / c["tp"]
    return weights, weights


def test_every_figure_names_where_it_was_read():
    for e in published.figures():
        for key in ("id", "source", "date", "engine", "setup", "figure", "differences"):
            assert e.get(key), (e["id"], key)
        assert e["same_condition"] in (True, False)
    assert len({e["id"] for e in published.figures()}) == len(published.figures())
    assert len(SAME) >= 4 and any("kv_tokens" in e["figure"] for e in SAME)


@pytest.mark.parametrize("entry", SAME, ids=lambda e: e["id"])
def test_same_condition_figures_within_five_percent(entry):
    r, fig = published.recompute(entry), entry["figure"]
    checked = 0
    if "weights_gib" in fig:
        assert abs(r.weights_bytes / GIB / fig["weights_gib"] - 1) <= published.TOLERANCE, r
        checked += 1
    if "kv_tokens" in fig:
        assert abs(r.kv_tokens / fig["kv_tokens"] - 1) <= published.TOLERANCE, r
        checked += 1
    assert checked


def test_the_old_checkpoint_over_tp_rule_misses_a_same_condition_figure():
    """553 GiB / 8 = 69.1 GiB per GPU left 11 GiB where SGLang had 7.6 GiB at 0.85 on an RTX PRO 6000: the same check
    fails for it, by more than 40%, where the budget's own weights pass."""
    kv = [e for e in SAME if "kv_tokens" in e["figure"]]
    misses = {e["id"]: published.recompute(e, _old_rule).kv_tokens / e["figure"]["kv_tokens"] - 1 for e in kv}
    assert max(misses.values()) > 0.4, misses
    assert misses["sglang-k26-rtx-pro-6000-bf16"] > 0.4
    assert all(abs(published.recompute(e).kv_tokens / e["figure"]["kv_tokens"] - 1) <= published.TOLERANCE
               for e in kv)


def test_the_comparison_uses_the_budgets_own_g_and_weights():
    """What published.recompute counts is what calculator.compute counts at the same GPU, model and TP."""
    e = next(e for e in SAME if e["id"] == "sglang-k26-rtx-pro-6000-bf16")
    c = e["conditions"]
    res = compute(BudgetInputs(gpu=c["gpu"], model=c["model"], tp=c["tp"], quant=c["quant"], mem_fraction=0.93))
    r = published.recompute(e)
    assert (res.g_bytes, res.weights_bytes) == (r.g_bytes, r.weights_bytes)
    assert res.loaded_bytes - res.draft_weights_bytes == r.loaded_bytes  # the figure ran without a draft
    assert compute(replace(res.inputs, measured={"G": r.g_bytes})).kv_tokens == res.kv_tokens


def test_the_docs_show_the_budget_beside_every_figure():
    text = " ".join((ROOT / "docs" / "memory.md").read_text().split())
    for row in published.comparison_rows():
        assert row["id"] in text, row["id"]
        for key in ("budget KV tokens", "public KV tokens"):
            if key in row:
                assert f"{row[key]:,}" in text, (row["id"], key)
        for key in ("budget weights GiB", "public weights GiB"):
            if key in row:
                assert f"{row[key]:.2f}" in text, (row["id"], key)
