"""The prefill-activation model against SGLang 0.5.23's own source (every allocation it names is found, as written,
in the function it names, in the installed wheel) and against hand-computed sizes for the presets; the measurement
script's dry run."""

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sglang

from kdtree_lab.budget import prefill_activations as pa

ROOT = Path(__file__).resolve().parents[1]
SGLANG = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
MIB = 1 << 20
TENSORS = [(block, t) for block, spec in pa.contract()["blocks"].items() for t in spec["tensors"]]


def function_source(path: str, qualname: str) -> str | None:
    text = (SGLANG / path).read_text()
    nodes, node = ast.parse(text).body, None
    for part in qualname.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        nodes = node.body
    return ast.get_source_segment(text, node)


def test_contract_is_for_the_installed_sglang():
    assert str(pa.contract()["sglang"]) == sglang.__version__ == "0.5.23"


@pytest.mark.parametrize("block,tensor", [t for t in TENSORS if t[1]["source"]["file"] != "torch"],
                         ids=lambda x: x if isinstance(x, str) else x["name"][:40])
def test_every_allocation_is_where_the_contract_says(block, tensor):
    """The function exists in SGLang 0.5.23; where the contract quotes the allocation, SGLang writes it so
    (whitespace aside): a change to SGLang's formula fails here."""
    src = tensor["source"]
    body = function_source(src["file"], src["function"])
    assert body is not None, f"{block}/{tensor['name']}: no {src['function']} in sglang/{src['file']}"
    if "expr" in src:
        squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
        assert squash(src["expr"]) in squash(body), f"{block}/{tensor['name']}: {src['expr']!r} not in {src['function']}"


def test_the_dominant_allocations_are_quoted():
    """The tensors that set the peak carry SGLang's own expression, not just a function name."""
    quoted = {t["name"] for _, t in TENSORS if "expr" in t["source"]}
    for name in ("intermediate_cache13 (gate_up GEMM output, then the down GEMM's per-expert rows in the same storage)",
                 "intermediate_cache2 (silu_and_mul output)", "intermediate_cache3 (down GEMM per-expert rows)",
                 "router logits (fp32)", "kv_b_proj output [k_nope | v] per head", "q = [q_nope_out | q_pe]"):
        assert name in quoted, name


def test_kimi_k2_int4_tp8_shapes_from_its_config():
    """Kimi K2 (hidden 7168, 64 heads, 384 experts, top-8, moe_intermediate 2048) at TP8, a chunk of 8192: the
    sizes SGLang's formulas give, by hand. A change to the preset or the contract fails here."""
    peak = pa.prefill_peak("kimi-k2", "int4", 8, 8192, requests=8, prefix=0, sms=188)
    assert (peak.moe_runner, peak.fused_shared_expert) == ("marlin", False)
    moe = peak.phases[0]  # MoE layer, MHA attention
    live = {t.name.split(" (")[0]: t for t in moe.live}
    assert live["intermediate_cache13"].bytes == 8192 * 8 * max(2 * 256, 7168) * 2 == 896 * MIB
    assert live["intermediate_cache2"].bytes == 8192 * 8 * 256 * 2
    assert live["router logits"].bytes == 8192 * 384 * 4
    assert live["shared expert output"].bytes == 8192 * 7168 * 2
    padded = -(-(8192 * 8 + 385 * 63) // 4) * 4  # block 64; moe_align_block_size rounds up to 4
    assert live["sorted_token_ids"].shape == (padded,) == (89792,)
    assert live["Marlin workspace"].bytes == 188 * 4 * 4
    assert moe.step == "moe_marlin.sum"
    # by hand: five [T, D] bf16 (residual, layer input, attention output, shared output, routed output), the two
    # caches, the router logits, top-k weights and ids, the align buffers, Marlin's workspace, three int64 [T],
    # cuBLAS; no prefix on a first chunk
    td = 8192 * 7168 * 2
    align = padded * 4 + -(-padded // 64) * 4 + 386 * 4
    want = (5 * td + 896 * MIB + 8192 * 8 * 256 * 2 + 8192 * 384 * 4 + 8192 * 8 * 8 + align + 188 * 16
            + 3 * 8192 * 8 + pa.CUBLAS_WORKSPACE)
    assert moe.bytes == want
    assert peak.bytes < pa.sglang_reserve_bytes(8192) / 7  # far below SGLang's 12 GiB reserve


def test_mha_and_absorbed_attention_tensors():
    peak = pa.prefill_peak("kimi-k2", "int4", 8, 4096, prefix=100_000, sms=188)
    phases = {p.phase: p for p in peak.phases}
    mha = pa._phase_peak("mha", ["process", "forward", "layer"], [("attention", "attention_mha"),
                                                                   ("mlp", "dense_mlp")],
                         pa.symbols(pa.architecture("kimi-k2"), tp=8, tokens=4096, requests=1, prefix=0,
                                    quant="int4", captured_layers=0, sms=188))
    assert mha.bytes > 0 and len(phases) == 6
    env = pa.symbols(pa.architecture("kimi-k2"), tp=8, tokens=4096, requests=1, prefix=100_000, quant="int4",
                     captured_layers=0, sms=188)
    shapes = {t.name: t.shape for _, t in pa._tensors("attention_absorbed", pa.contract()["blocks"]["attention_absorbed"],
                                                         env)}
    assert shapes["q = [q_nope_out | q_pe]"] == (4096, 8, 576)
    assert shapes["q_nope x W_kc (absorbed query)"] == (8, 4096, 512)
    assert shapes["attention output o (latent)"] == (4096, 8 * 512)
    fwd = {t.name: t for _, t in pa._tensors("forward", pa.contract()["blocks"]["forward"], env)}
    assert fwd["kv_indices (the prefix's pool slots, Triton extend metadata)"].bytes == 100_000 * 8


def test_shared_expert_fusion_and_runners_follow_sglang():
    assert pa.moe_runner("int4") == "marlin" and pa.moe_runner("fp8") == pa.moe_runner("bf16") == "triton"
    dsv3 = pa.architecture("deepseek-v3")
    assert pa.fuses_shared_expert(dsv3, "fp8") and not pa.fuses_shared_expert(dsv3, "int4")
    assert not pa.fuses_shared_expert(pa.architecture("kimi-k2"), "fp8")  # 384 experts fuse only from Quark
    env = pa.symbols(dsv3, tp=8, tokens=1024, requests=1, prefix=0, quant="fp8", captured_layers=0, sms=132)
    assert (env["E"], env["K"], env["Is"], env["Er"]) == (257, 9, 0, 256)
    with pytest.raises(pa.ActivationInputError, match="quant"):
        pa.moe_runner("nf4")


def test_marlin_block_rows_follow_fused_marlin_moe():
    """fused_marlin_moe: the first of 8, 16, 32, 48, 64 with M x topk / E / rows < 0.9, else 64."""
    assert pa.marlin_block_m(8192, 8, 384) == 64
    assert pa.marlin_block_m(16, 8, 384) == 8
    assert pa.marlin_block_m(1024, 8, 384) == 32  # 21.3 / 32 = 0.67
    src = function_source("srt/layers/moe/fused_moe_triton/fused_marlin_moe.py", "fused_marlin_moe")
    assert "for block_size_m in [8, 16, 32, 48, 64]:" in src and "if M * topk / E / block_size_m < 0.9:" in src


def test_peak_grows_with_the_chunk_and_stays_below_sglangs_reserve():
    for model, quant, tp in (("kimi-k2", "int4", 8), ("deepseek-v3", "fp8", 8), ("deepseek-v2-lite", "bf16", 1)):
        peaks = [pa.prefill_peak(model, quant, tp, c, requests=8, prefix=200_000).bytes for c in (2048, 4096, 8192)]
        assert peaks[0] < peaks[1] < peaks[2]
        assert all(p < pa.sglang_reserve_bytes(c) for p, c in zip(peaks, (2048, 4096, 8192)))


def test_sglang_reserve_is_its_formula():
    assert pa.sglang_reserve_bytes(8192) == 12 * (1 << 30)
    assert pa.sglang_reserve_bytes(1024) == int(1.5 * 2048 * MIB)  # max(chunk, 2048)


@pytest.mark.parametrize("expr", ["__import__('os')", "T ** 2", "open('x')", "T.bit_length()", "[T]"])
def test_contract_expressions_are_arithmetic_only(expr):
    with pytest.raises(pa.ActivationInputError):
        pa.evaluate(expr, {"T": 4})


def test_bad_inputs_are_named():
    with pytest.raises(pa.ActivationInputError, match="tp"):
        pa.prefill_peak("kimi-k2", "int4", 3, 8192)
    with pytest.raises(pa.ActivationInputError, match="tokens"):
        pa.prefill_peak("kimi-k2", "int4", 8, 0)
    with pytest.raises(pa.ActivationInputError, match="model"):
        pa.prefill_peak("llama", "int4", 8, 8192)
    with pytest.raises(pa.ActivationInputError, match="spec_algorithm"):
        pa.prefill_peak("kimi-k2", "int4", 8, 8192, spec_algorithm="MEDUSA")


def test_activation_lines_label_what_they_stand_on(tmp_path):
    kw = dict(requests=8, context=200_000, spec_algorithm="EAGLE", sms=188)
    lines = pa.activation_lines("kimi-k2", "int4", 8, 8192, measurement=None, **kw)
    assert lines["measured"] is lines["modelled"] and "not measured" in lines["modelled"].label
    assert lines["modelled"].bytes == int(lines["modelled"].peak_bytes * 1.25)
    assert lines["sglang-reserve"].bytes == 12 << 30 and "SGLang's default assumes" in lines["sglang-reserve"].label
    fake = {"_path": str(tmp_path / "2026-12-02-prefill-activations" / "prefill-activations.json"),
            "cases": [{"model": "kimi-k2", "quant": "int4", "tp": 8, "chunk": 8192, "prefix": 8192,
                       "peak_measured_bytes": 1500 * MIB}]}
    lines = pa.activation_lines("kimi-k2", "int4", 8, 8192, measurement=fake, **kw)
    m = lines["measured"]
    assert m.source == "measured" and "measured on the H200 2026-12-02" in m.label
    assert m.peak_bytes == 1500 * MIB + 8 * (200_000 - 8192)  # the prefix index re-sized to the context
    assert "not measured" not in lines["modelled"].label
    with pytest.raises(pa.ActivationInputError, match="margin"):
        pa.activation_lines("kimi-k2", "int4", 8, 8192, margin=-0.1, **kw)


def test_measurement_files_are_read_newest_first(tmp_path):
    for day in ("2026-12-01", "2026-12-03"):
        d = tmp_path / f"{day}-prefill-activations"
        d.mkdir()
        (d / "prefill-activations.json").write_text(json.dumps({"cases": [], "day": day}))
    files = pa.measurement_files(tmp_path)
    assert [f.parent.name[:10] for f in files] == ["2026-12-01", "2026-12-03"]
    assert pa.load_measurement(files[-1])["day"] == "2026-12-03"


def test_measurement_script_dry_run(tmp_path):
    """The GPU script's code path on a CPU (no memory figures): its phases are the model's, every one is run,
    and the JSON carries provenance and the modelled bytes."""
    out = tmp_path / "pa.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "prefill_activation_peak.py"), "--dry-run",
                           "--cases", "deepseek-v2-lite:bf16:1", "--chunks", "16", "--requests", "2", "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["complete"] and not data["skipped"] and data["provenance"]["command"].startswith("python scripts/")
    case = data["cases"][0]
    model = pa.prefill_peak("deepseek-v2-lite", "bf16", 1, 16, requests=2, prefix=16, sms=132)
    assert [p["phase"] for p in case["phases"]] == [p.phase for p in model.phases]
    assert case["peak_modelled_bytes"] == model.bytes and case["peak_measured_bytes"] is None


def test_measurement_script_refuses_bad_cases_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "prefill_activation_peak.py"), "--dry-run",
                           "--cases", "kimi-k2:nf4:8", "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "quant" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()
