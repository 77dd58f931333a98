"""The card model's checks against published sm_120 measurements: the committed table holds what the model computes
today, each check has its source, conditions and committed H200 input, the worst miss and the error band follow from
the table, and the docs state the worst miss the table gives."""

import json

import pytest
import yaml

from kdtree_lab.core.paths import ROOT
from kdtree_lab.speculate import card_checks as cc
from kdtree_lab.speculate import card_model as cm


def test_the_committed_table_holds_the_recomputed_predictions():
    entries = yaml.safe_load(cc.CHECKS.read_text())["checks"]
    assert len(entries) == len(cc.checks()) >= 10
    for e, c in zip(entries, cc.checks()):
        assert {k: e[k] for k in cc.COMPUTED} == cc.computed(c), \
            f"{e['id']}: stale; run python -m kdtree_lab.speculate.card_checks --write"


def test_each_check_is_a_published_figure_with_a_committed_h200_input():
    ids = [c.id for c in cc.checks()]
    assert len(set(ids)) == len(ids)
    for e in yaml.safe_load(cc.CHECKS.read_text())["checks"]:
        assert e["card"] in cm.cards() and len(e["source"]) > 20 and len(e["conditions"]) > 20, e["id"]
        assert (ROOT / e["h200"]["run"]).exists() and e["timing"] in ("loop", "alone"), e["id"]
    assert {c.card for c in cc.checks()} == set(cm.cards())
    assert {c.prediction.bound for c in cc.checks()} >= {"tensor", "issue"}
    assert all(x["why"] and x["source"] for x in cc.excluded())


def test_a_gemm_check_by_hand():
    """The Workstation card's 8192^3 GEMM: the H200's time from its run's GEMM ceiling, the card's from 188 SMs x
    1024 FLOP per clock x 1762 MHz, back to back (no floor)."""
    c = next(x for x in cc.checks() if x.id == "pro-ws-gemm-natural-draw")
    flops = 2 * 8192 ** 3
    run = json.loads((ROOT / "data/results/h200/2026-12-01-sm120-per-shape/call2-bench-issue/bench-issue.json")
                     .read_text())
    assert c.h200_ms == pytest.approx(flops / (run["ceilings"]["gemm_tflops"] * 1e12) * 1e3)
    assert c.prediction.ms == pytest.approx(flops / (188 * 1024 * 1762e6) * 1e3)
    assert c.prediction.floor_ms == 0 and c.prediction.bound == "tensor"
    assert c.measured_ms == pytest.approx(1e3 / 292) and c.ratio == pytest.approx(c.measured_ms / c.prediction.ms)


def test_a_decode_check_carries_the_floor_and_the_fp8_bytes():
    c = next(x for x in cc.checks() if x.id == "pro-vllm-triton-mla-decode-100k")
    floor = cm.floor()[0]
    assert c.prediction.floor_ms == floor and c.prediction.bound == "issue"
    assert c.prediction.bytes_ms == pytest.approx(100_000 * 576 / (1599e9) * 1e3)
    assert c.prediction.issue_ms == pytest.approx((c.h200_ms - floor) * cm.issue_scale(cm.card("rtx-pro-6000")))


def test_the_worst_miss_and_the_band_follow_from_the_table():
    w = cc.worst()
    assert w.miss == max(max(c.ratio, 1 / c.ratio) for c in cc.checks())
    lo, hi, n = cc.error_band("rtx-pro-6000")
    pro = [c.ratio for c in cc.checks() if c.card == "rtx-pro-6000"]
    assert (lo, hi, n) == (min(pro), max(pro), len(pro))  # its checks span both bounds it has
    lo5, hi5, n5 = cc.error_band("rtx-5090")  # GEMMs only: the issue-bound checks are borrowed from the PRO's
    issue = [c.ratio for c in cc.checks() if c.prediction.bound == "issue"]
    mine = [c.ratio for c in cc.checks() if c.card == "rtx-5090"]
    assert (lo5, hi5, n5) == (min(mine + issue), max(mine + issue), len(mine) + len(issue))


def test_the_docs_state_the_worst_miss_of_the_table():
    w = cc.worst()
    results = (ROOT / "docs" / "results.md").read_text()
    assert f"worst miss is {w.miss:.2f}x (`{w.id}`" in results


def test_the_command_prints_the_checks_and_refuses_a_bad_file(tmp_path, monkeypatch, capsys):
    assert cc.main([]) == 0
    assert f"worst miss: {cc.worst().id}" in capsys.readouterr().out
    bad = yaml.safe_load(cc.CHECKS.read_text())
    bad["checks"][0]["timing"] = "sometimes"
    path = tmp_path / "checks.yaml"
    path.write_text(yaml.safe_dump(bad))
    monkeypatch.setattr(cc, "CHECKS", path)
    cc.checks.cache_clear()
    try:
        assert cc.main([]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "timing: expected loop or alone, found 'sometimes'" in err
    finally:
        cc.checks.cache_clear()


def test_the_device_script_refuses_bad_input_in_one_line(monkeypatch, capsys):
    """scripts/sm120_check_inputs.py (the H200 run that would close the checks' largest gap) on this machine."""
    import importlib

    import torch

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    script = importlib.import_module("sm120_check_inputs")
    assert script.main(["--out", "/dev/null", "--clock-seconds", "1"]) == 2
    assert capsys.readouterr().err == "sm120_check_inputs: --clock-seconds: expected at least 2, found 1\n"
    if not torch.cuda.is_available():
        assert script.main(["--out", "/dev/null"]) == 2
        assert capsys.readouterr().err == "sm120_check_inputs: needs a CUDA GPU, found none\n"
    published = {(c.id.split("-")[-1]) for c in cc.checks() if "decode" in c.id}
    assert len(script.PUBLISHED) == len(published)  # one row per published decode check


def test_a_prediction_carries_the_band_of_the_checks_bound_as_it_is():
    """The per-bound band: the RTX 5090's tensor-bound checks all land above their predictions (its clock input is an
    mma.sync loop on zeros), so its tensor-bound figures carry that band, not the card-level one; a bound none of its
    checks has (issue) borrows the other card's checks of it."""
    from kdtree_lab.speculate import card_checks as cc

    every = cc.checks()
    tensor_5090 = [c.ratio for c in every if c.card == "rtx-5090" and c.prediction.bound == "tensor"]
    lo, hi, n = cc.error_band("rtx-5090", "tensor")
    assert n == len(tensor_5090) >= 3 and (lo, hi) == (min(tensor_5090), max(tensor_5090)) and lo > 1.0
    issue_pro = [c.ratio for c in every if c.card == "rtx-pro-6000" and c.prediction.bound == "issue"]
    assert not any(c.card == "rtx-5090" and c.prediction.bound == "issue" for c in every)
    assert cc.error_band("rtx-5090", "issue")[:2] == (min(issue_pro), max(issue_pro))
    card_lo, card_hi, _ = cc.error_band("rtx-5090")
    assert card_lo <= lo and card_hi >= hi  # the card-level band is the union
