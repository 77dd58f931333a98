"""The card model: its inputs each cite a source, the H200's clock and floor are the committed measurements', the
three bounds and the floor combine as documented, and a call's work is the one its configuration issues."""

import json
import re
import statistics

import pytest
import yaml

from kdtree_lab.budget.presets import gpus
from kdtree_lab.core.paths import DATA, RESULTS
from kdtree_lab.speculate import card_model as cm


def test_every_input_cites_a_source_and_the_cards_are_sm120():
    section = yaml.safe_load((DATA / "presets" / "gpus.yaml").read_text())["card_model"]
    assert set(cm.cards()) == {"rtx-pro-6000", "rtx-5090"}
    for name, v in section.items():
        inputs = {k for k in v if k != "sources"}
        assert inputs and set(v["sources"]) == inputs, name
        assert all(len(s) > 40 for s in v["sources"].values()), name  # a source, not a placeholder
    for c in cm.cards().values():
        assert gpus()[c.name].compute_capability == 120
        assert c.sms == gpus()[c.name].sms and c.stream_gbps < gpus()[c.name].bandwidth_gbps  # below the sheet value
        assert c.flop_per_clock_sm == {"bf16": 1024, "e4m3": 2048}
        assert c.sustained_mhz < 2617  # not the boost clock


def test_the_h200_clock_is_the_committed_clock_sample_under_load():
    """The H200's clock is what nvidia-smi sampled under the mma.sync ceiling loop and under the second generation
    (the committed check-inputs run), the median of both; both loads held one clock throughout."""
    import json

    ref = cm.reference()
    source = ref.sources["sustained_mhz"]
    path = re.search(r"data/results/h200/\S+?\.json", source).group(0)
    clocks = json.loads((RESULTS.parent.parent / path).read_text())["clocks"]
    assert set(clocks) == {"mma_sync_bf16", "cuda_sm120_roles_headline"} and all(c["samples"] > 100 for c in clocks.values())
    assert all(c["min_mhz"] == c["max_mhz"] == ref.sustained_mhz for c in clocks.values()), clocks
    assert ref.sms == 132


def test_the_floor_is_the_median_of_every_committed_fixed_cost_run():
    runs = (RESULTS / cm.REFERENCE).rglob("fixed-cost*.json")  # the H200's runs: another GPU's floor is its own
    floors = [json.loads(p.read_text())["two_kernel_floor_ms"] for p in runs
              if "two_kernel_floor_ms" in json.loads(p.read_text())]
    ms, sources = cm.floor()
    assert len(floors) == len(sources) >= 3 and ms == statistics.median(floors)
    assert 0.01 < ms < 0.02  # a graph replay of two one-element kernels on the H200: 12.8-17.3 us


CARD = cm.Card("test", "test card", 100, 2000.0, 1000.0, {"bf16": 1024, "e4m3": 2048}, {})
REF = cm.Card("ref", "reference", 50, 1000.0, float("nan"), {}, {})  # a quarter of CARD's SM-GHz


@pytest.mark.parametrize("work, h200_ms, want", [
    (cm.Work(2e9, 1e9), 1.0, ("bytes", 2.0)),  # 2 GB at 1000 GB/s = 2 ms; issue 0.25; tensor 1e9 / 204.8e12
    (cm.Work(1e6, 2.048e12), 1.0, ("tensor", 10.0)),  # 2.048e12 / (100 x 1024 x 2e9) = 10 ms
    (cm.Work(1e6, 2.048e12, "e4m3"), 1.0, ("tensor", 5.0)),  # twice the rate
    (cm.Work(1e6, 1e9), 8.0, ("issue", 2.0)),  # 8 ms x (50 x 1.0) / (100 x 2.0)
])
def test_the_card_time_is_the_largest_bound_plus_the_floor(work, h200_ms, want):
    p = cm.predict(h200_ms, work, CARD, floor_ms=0.0, h200_floor_ms=0.0, ref=REF)
    assert (p.bound, p.ms) == pytest.approx(want)
    with_floor = cm.predict(h200_ms + 0.5, work, CARD, floor_ms=0.5, h200_floor_ms=0.5, ref=REF)
    assert with_floor.ms == pytest.approx(want[1] + 0.5)  # the floor leaves the H200 time and is not scaled


def test_a_grid_fixed_by_the_shape_gains_only_fewer_waves():
    assert cm.issue_scale(CARD, REF) == pytest.approx(0.25)
    assert cm.issue_scale(CARD, REF, ctas=40) == pytest.approx(0.5)  # one wave on both: the clock ratio only
    assert cm.issue_scale(CARD, REF, ctas=100) == pytest.approx(0.25)  # 2 waves on REF, 1 on CARD: x 0.5 x 0.5


def test_the_work_is_what_the_configuration_issues():
    bf16 = cm.verify_work("cuda_sm120", 1, 1000, 4, 8)  # 32 rows: the first kernel's tile exactly
    assert (bf16.kind, bf16.flops, bf16.kv_bytes) == ("bf16", 2 * 32 * 1004 * 1088, 1000 * 576 * 2)
    roles = cm.verify_work("cuda_sm120_roles", 1, 1000, 4, 8)  # 32 rows in a 64-row tile
    assert roles.flops == 2 * bf16.flops
    e4m3 = cm.verify_work("cuda_sm120_e4m3", 2, 1000, 16, 8, "fp8")  # Q's second term on 14 of 18 32-dim steps
    assert (e4m3.kind, e4m3.kv_bytes) == ("e4m3", 2 * 1000 * 576)
    assert e4m3.flops == pytest.approx(2 * 2 * 128 * 1016 * ((1 + 14 / 18) * 576 + 512))
    e4m3_32 = cm.verify_work("cuda_sm120_e4m3_32", 1, 1000, 4, 8, "fp8")  # two Q terms on every step: QK twice
    assert e4m3_32.flops == 2 * 32 * 1004 * (2 * 576 + 512)
    assert cm.verify_work("cuda_sm120_fp8", 1, 1000, 4, 8, "fp8").kind == "bf16"  # exact: bf16 MMAs
    ext = cm.verify_work("sglang_extend", 2, 1000, 40, 8)  # each head's 40 tokens padded to 64, one CTA per 32
    assert (ext.flops, ext.ctas) == (2 * 2 * 8 * 64 * 1040 * 1088, 2 * 8 * 2)
    dec = cm.verify_work("sglang_decode_1tok", 1, 1000, 16, 8)  # one token, 8 heads in a 16-head block
    assert (dec.flops, dec.ctas) == (2 * 16 * 1001 * 1088, None)


def test_bad_inputs_are_refused_by_name():
    with pytest.raises(cm.CardModelError, match="gpu: expected one of rtx-5090, rtx-pro-6000"):
        cm.card("h100")
    with pytest.raises(cm.CardModelError, match="impl cuda_wgmma: not a configuration the launcher selects"):
        cm.verify_work("cuda_wgmma", 1, 100, 4, 8)
    with pytest.raises(cm.CardModelError, match="kind: expected one of bf16, e4m3"):
        CARD.tensor_tflops("f16")
    with pytest.raises(cm.CardModelError, match="work: expected a positive H200 time"):
        cm.predict(0.0, cm.Work(1, 1), CARD)


def test_the_two_term_steps_are_the_kernels():
    """E4M3_TWO_TERM_STEPS holds the 64-row e4m3 form's E4M3_TWO_TERMS (its header) and the 32-row form's 18 steps."""
    import re

    from kdtree_lab.core.paths import KERNELS

    text = (KERNELS / "mma_sync" / "verify_sm120_e4m3.cuh").read_text()
    one = int(re.search(r"constexpr int E4M3_ONE_TERM = (\d+), E4M3_TWO_TERMS = 18 - E4M3_ONE_TERM;", text).group(1))
    assert cm.E4M3_TWO_TERM_STEPS == {"verify_sm120_e4m3_kernel<64>": 18 - one, "verify_sm120_e4m3_32_kernel": 18}
    assert "E4M3_ONE_TERM" not in (KERNELS / "mma_sync" / "verify_sm120_e4m3_32.cuh").read_text()
