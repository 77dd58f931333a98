"""The per-GPU weights (kdtree_lab/budget/weights.py) against SGLang 0.5.23's own sources and hand counts: every
snippet of the sharding contract is still in the installed wheel, every term cites a rule of it, the caching
allocator's constants are torch's, and the terms that decide the total are what a hand count of the Kimi K2.6 and
DeepSeek-V3 config.json under SGLang's sharding gives."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from kdtree_lab.budget import weights as w
from kdtree_lab.budget.caching_allocator import CachingAllocator, constants
from kdtree_lab.budget.calibrate import parse_sglang_log
from kdtree_lab.budget.inputs import GIB, MIB
from kdtree_lab.budget.presets import models
from kdtree_lab.core.paths import CONTRACTS

CONTRACT = yaml.safe_load((CONTRACTS / "sglang-0.5.23-weight-sharding.yaml").read_text())


def _snippets():
    for name, rule in CONTRACT["rules"].items():
        for snippet in rule["snippets"]:
            yield name, rule["file"], snippet


@pytest.mark.parametrize("rule,file,snippet", list(_snippets()), ids=lambda x: str(x)[:40])
def test_each_sharding_rule_is_in_sglangs_source(rule, file, snippet):
    root = Path(importlib.util.find_spec("sglang").origin).parent.parent
    assert snippet in (root / file).read_text(), f"{rule}: {file} no longer has {snippet!r}"


def test_the_contract_names_the_installed_sglang():
    import sglang

    assert CONTRACT["sglang_version"] == sglang.__version__ == "0.5.23"


def test_allocator_constants_are_torchs():
    import torch

    header = (Path(torch.__file__).parent / "include" / "c10" / "core" / "AllocatorConfig.h").read_text()
    for name, key in (("kSmallBuffer", "small_buffer"), ("kMinBlockSize", "min_block"), ("kSmallSize", "small_size"),
                      ("kMinLargeAlloc", "min_large_alloc"), ("kRoundLarge", "round_large")):
        assert int(re.search(rf"{name} = (\d+);", header).group(1)) == constants()[key], name
    assert constants()["large_buffer"] == 20 * MIB


@pytest.mark.parametrize("model,quant,draft", [("kimi-k2", "int4", True), ("kimi-k2", "fp8", True),
                                               ("deepseek-v3", "fp8", True), ("deepseek-v3", "int4", False),
                                               ("deepseek-v2-lite", "bf16", False)])
def test_every_term_cites_a_rule_of_the_contract(model, quant, draft):
    tp = 1 if model == "deepseek-v2-lite" else 8
    lw = w.loaded(model, quant, tp, "marlin", draft=draft)
    for t in lw.target_terms + lw.draft_terms:
        assert t.rule in CONTRACT["rules"], t
    assert lw.total_bytes == lw.target_bytes + lw.draft_bytes + lw.allocator_bytes > 0


def _term(lw, module):
    return next(t for t in lw.target_terms if t.module == module)


def test_kimi_k26_int4_terms_by_hand():
    """Kimi K2.6 int4 at TP8 (hidden 7168, 64 heads -> 8 a rank, q_lora 1536, kv_lora 512 + rope 64, 384 experts of
    2048, one shared, vocab 163840, 61 layers with the first dense), counted by hand."""
    lw = w.loaded("kimi-k2", "int4", 8)
    a_proj = _term(lw, "self_attn.fused_qkv_a_proj_with_mqa")  # replicated: the same at TP1 and TP8
    assert (a_proj.shape, a_proj.dtype, a_proj.sharding, a_proj.instances) == ((2112, 7168), "bf16", "replicated", 61)
    assert _term(w.loaded("kimi-k2", "int4", 1), a_proj.module).shape == (2112, 7168)
    assert _term(lw, "self_attn.q_b_proj").shape == (8 * 192, 1536)
    assert _term(lw, "self_attn.kv_b_proj").shape == (8 * 256, 512)
    assert _term(lw, "self_attn.o_proj").shape == (7168, 8 * 128)
    assert _term(lw, "self_attn.w_kc").shape == (8, 128, 512)
    assert _term(lw, "mlp.gate.weight").shape == (384, 7168) and _term(lw, "mlp.gate.weight").instances == 60
    packed = _term(lw, "mlp.experts.w13_weight_packed")  # every expert on every rank, intermediate 2048 / 8
    assert (packed.shape, packed.dtype) == ((384, 7168 // 8, 2 * 256), "int32")
    assert _term(lw, "mlp.experts.w2_weight_scale").shape == (384, 256 // 32, 7168)
    assert _term(lw, "embed_tokens").shape == (163840 // 8, 7168) == _term(lw, "lm_head").shape
    assert _term(lw, "mlp.gate_up_proj").shape == (2 * 18432 // 8, 7168)  # the dense first layer, bf16
    assert not any("g_idx" in t.module for t in lw.target_terms)  # Marlin empties them after the load
    # routed experts: 60 layers x 384 x (3 x 7168 x 256 int4 + (7168/32 x 512 + 8 x 7168) bf16 scales)
    experts = 60 * 384 * (3 * 7168 * 256 // 2 + (224 * 512 + 8 * 7168) * 2 + 2 * 2 * 2)
    got = sum(t.bytes for t in lw.target_terms if t.module.startswith("mlp.experts"))
    assert got == experts
    replicated = sum(t.bytes for t in lw.target_terms if t.sharding == "replicated")
    # a-proj 61 x 2112 x 7168 x 2 B (1.72 GiB) + router 60 x 384 x 7168 x 2 B (0.31) + the vision tower's MLP
    # 27 x 2 x 4304 x 1152 x 2 B (0.50) + its projector (4608^2 + 4608 x 7168) x 2 B (0.10) + norms and biases
    assert 2.6 * GIB < replicated < 2.7 * GIB
    assert 71.7 * GIB < lw.target_bytes < 71.9 * GIB and 0.1 * GIB < lw.allocator_bytes < 0.6 * GIB
    # the Triton path keeps the four g_idx tensors: 60 x 384 x (2 x 7168 + 2 x 256) int32
    triton = w.loaded("kimi-k2", "int4", 8, "triton")
    assert triton.target_bytes - lw.target_bytes == 60 * 384 * (2 * 7168 + 2 * 256) * 4


def test_deepseek_v3_fp8_terms_by_hand():
    lw = w.loaded("deepseek-v3", "fp8", 8)
    w13 = _term(lw, "mlp.experts.w13_weight")
    assert (w13.shape, w13.dtype, w13.instances) == ((256, 512, 7168), "fp8", 58)
    scale = _term(lw, "mlp.experts.w13_weight_scale_inv")
    assert (scale.shape, scale.dtype) == ((256, 4, 56), "fp32")
    a_proj = _term(lw, "self_attn.fused_qkv_a_proj_with_mqa")
    assert (a_proj.shape, a_proj.dtype) == ((2112, 7168), "fp8")
    assert _term(lw, "self_attn.fused_qkv_a_proj_with_mqa.weight_scale_inv").shape == (17, 56)
    assert _term(lw, "self_attn.q_b_proj").shape == (16 * 192, 1536)
    assert _term(lw, "mlp.gate.weight").dtype == "bf16"  # a plain parameter, never quantised
    assert _term(lw, "embed_tokens").shape == (129280 // 8, 7168)
    assert _term(lw, "rotary_emb.cos_sin_cache").shape == (4096 * 40, 64)
    assert 79.5 * GIB < lw.target_bytes < 79.7 * GIB
    draft = w.loaded("deepseek-v3", "fp8", 8, draft=True)  # the MTP layer, its own embed and head, eh_proj
    assert next(t for t in draft.draft_terms if t.module == "draft.eh_proj").shape == (7168, 2 * 7168)
    assert 1.9 * GIB < draft.draft_bytes < 2.1 * GIB


def test_the_vocabulary_pads_to_64_then_to_64_times_tp():
    assert w._vocab_rows(163840, 8) == 20480 and w._vocab_rows(129280, 8) == 16160
    assert w._vocab_rows(102400, 3) == -(-102400 // 192) * 192 // 3  # 64 does not divide by 3: pad to 192


def test_unknown_inputs_are_refused_by_name():
    with pytest.raises(w.WeightsInputError, match="quant: expected one of"):
        w.loaded("deepseek-v2-lite", "int4", 1)
    with pytest.raises(w.WeightsInputError, match="moe_runner"):
        w.loaded("kimi-k2", "int4", 8, "cutlass")
    with pytest.raises(w.WeightsInputError, match="tp: expected a divisor"):
        w.loaded("kimi-k2", "int4", 3)


def test_caching_allocator_segments():
    """A 28.875 MiB tensor takes a 30 MiB segment; two 5 MiB ones share a 20 MiB segment; small ones a 2 MiB one;
    a freed tensor whose segment holds nothing else is returned by empty_cache, one sharing a segment is not."""
    a = CachingAllocator()
    a.malloc(2112 * 7168 * 2)
    assert a.reserved == 30 * MIB
    x = a.malloc(5 * MIB)
    a.malloc(5 * MIB)
    assert a.reserved == 50 * MIB and a.allocated == 2112 * 7168 * 2 + 10 * MIB
    a.malloc(1000)
    assert a.reserved == 52 * MIB
    a.free(x)
    a.empty_cache()
    assert a.reserved == 52 * MIB  # the other 5 MiB tensor still lives in that segment
    big = a.malloc(12 * MIB)
    a.free(big)
    a.empty_cache()
    assert a.reserved == 52 * MIB


def test_sglang_0_5_23_log_lines_calibrate_g_weights_and_draft():
    """G is the smallest first "Load weight begin" over the ranks; each rank's first "Load weight end" is the target,
    the later one the draft; the token count reads the newer "dtype: ..., #tokens:" line too."""
    log = """[2026-12-01 10:00:00 TP1] Load weight begin. avail mem=93.95 GB
[2026-12-01 10:00:00 TP0] Load weight begin. avail mem=93.99 GB
[2026-12-01 10:05:00 TP0] Load weight end. elapsed=300.00 s, type=KimiK25ForConditionalGeneration, quant=compressed-tensors, avail mem=21.80 GB, mem usage=72.19 GB.
[2026-12-01 10:05:01 TP1] Load weight end. elapsed=300.00 s, type=KimiK25ForConditionalGeneration, quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.19 GB.
[2026-12-01 10:05:02 TP0] Load weight begin. avail mem=21.80 GB
[2026-12-01 10:05:09 TP0] Load weight end. elapsed=7.00 s, type=Eagle3DeepseekV2ForCausalLM, avail mem=21.05 GB, mem usage=0.75 GB.
[2026-12-01 10:05:10 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 116153, KV size: 7.60 GB"""
    got = parse_sglang_log(log)
    assert got["G"] == pytest.approx(93.95 * GIB) and got["weights"] == pytest.approx(72.19 * GIB)
    assert got["draft_weights"] == pytest.approx(0.75 * GIB) and got["kv_tokens"] == 116153


def test_the_presets_name_the_checkpoint_of_every_quantisation():
    for m in models().values():
        for quant, ck in m.checkpoints.items():
            assert ck["checkpoint"] and ck["scheme"] in ("bf16", "w4a16", "fp8-block", "fp8-tensor"), (m.name, quant)
        assert m.draft["kind"] in ("none", "nextn", "eagle3-mla")
