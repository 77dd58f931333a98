"""The SGLang backend proof on a CPU: its pieces (lengths, the recorder, the refusal cases, the launch line it
publishes, the entry point it loads) and, where SGLang's Triton backend imports, the whole proof as a dry run (the
Triton interpreter; graph capture replaced by eager calls). The GPU run is tests/test_gpu_sglang_backend.py."""

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

from kdtree_lab.checks.batch import build_verify_batch, full_tree_mask
from kdtree_lab.core.tree import chain
from kdtree_lab.lab import sglang_backend_proof as proof

ROOT = Path(__file__).resolve().parents[1]


def test_lengths_cover_one_and_the_longest_and_refuse_nonsense():
    rng = np.random.default_rng(0)
    lens = proof.draw_lengths(6, 500, rng)
    assert len(lens) == 6 and min(lens) == 1 and max(lens) == 500 and all(1 <= x <= 500 for x in lens)
    assert proof.draw_lengths(1, 7, rng)[0] in range(1, 8)
    with pytest.raises(ValueError, match="expected bs >= 1 and longest >= 1, found bs=2, longest=0"):
        proof.draw_lengths(2, 0, rng)


def test_recorder_rewrites_the_json_after_every_row_and_says_when_a_run_did_not_finish(tmp_path):
    out = tmp_path / "r.json"
    rec = proof.Recorder(out, {"what": "t"})
    assert json.loads(out.read_text())["status"].startswith("running")
    rec.row("eager", {"config": "eagle-N16 bf16", "ok": True, "calls": 1, "served": 1, "fell_back": 0})
    rec.row("graph", {"config": "eagle-N16 bf16 on", "ok": False, "mismatches": 3, "calls": 3, "served": 3})
    data = json.loads(out.read_text())
    assert data["status"].startswith("running") and data["ok"] is False
    assert data["summary"]["eager eagle-N16 bf16"] == {"rows": 1, "ok": 1, "mismatches": 0, "calls": 1, "served": 1,
                                                       "fell_back": 0}
    assert data["summary"]["graph eagle-N16 bf16 on"]["mismatches"] == 3
    rec.seconds("graph on", 1.25)
    rec.finish("complete")
    text = proof.summary_table(json.loads(out.read_text()))
    assert "graph eagle-N16 bf16 on" in text and "3/3" in text and "graph on 1.25" in text
    assert text.splitlines()[-1] == "status: complete"


def test_the_plugin_it_loads_is_the_entry_point_pyproject_declares():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["sglang.srt.plugins"]
    assert dict([proof.entry_point()]) == eps


def test_the_launch_line_it_publishes_is_the_budgets_with_the_pool():
    argv = proof.server_argv(proof.Draft("chain", 1, 3, 4), "fp8", proof.Settings.quick(), "/m")
    flags = dict(zip(argv[::2], argv[1::2]))
    assert flags["--attention-backend"] == "triton" and flags["--speculative-eagle-topk"] == "1"
    assert flags["--speculative-num-draft-tokens"] == "4" and flags["--speculative-num-steps"] == "3"
    assert flags["--kv-cache-dtype"] == "fp8_e4m3" and flags["--context-length"] == "4096"
    assert flags["--cuda-graph-max-bs-decode"] == flags["--max-running-requests"] == "4"
    assert proof.server_argv(proof.DRAFTS[0], "fp8_e5m2", proof.Settings(), "/m")[-1] == "fp8_e5m2"


def test_refusal_cases_name_what_the_hook_must_say():
    cases = {c.name: c for c in proof.refusals(proof.Settings(max_bs=8), proof.Draft("eagle", 4, 3, 16))}
    assert cases["batch above the planned size"].max_bs == 4 and cases["batch above the planned size"].bs == 8
    assert cases["draft width it was not planned for"].num_draft == 8
    assert cases["pool dtype no configuration reads (fp8_e5m2)"].kv == "fp8_e5m2"


def test_an_unknown_or_gpu_only_implementation_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(proof.ProofError, match=r"impl: expected one of cuda, .*, found 'nope'"):
        proof.run(proof.Settings.dry(impl="nope"), None, {}, log=lambda s: None)
    with pytest.raises(proof.ProofError, match="impl: cuda_sm120_roles needs a GPU; a dry run without one runs the "
                                                "Triton twin"):
        proof.run(proof.Settings.dry(impl="cuda_sm120_roles"), None, {}, log=lambda s: None)


def test_an_implementation_that_does_not_read_a_pool_asked_for_is_refused_before_the_run(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(proof.ProofError, match=r"^impl cuda_sm120_e4m3 serves fp8 KV pools, not bf16: choose the "
                                                r"pools it serves \(--kv\)$"):
        proof.run(proof.Settings(impl="cuda_sm120_e4m3"), None, {}, log=lambda s: None)
    monkeypatch.setenv("KDTREE_VERIFY_IMPL", "nope")
    with pytest.raises(proof.ProofError, match="KDTREE_VERIFY_IMPL='nope': expected one of cuda, "):
        proof.run(proof.Settings(), None, {}, log=lambda s: None)


def test_full_tree_mask_is_the_batch_builders_layout():
    b = build_verify_batch([5, 1], 3, 2, mask="chain")
    assert torch.equal(full_tree_mask([5, 1], [chain(3), chain(3)]), b.custom_mask.cpu())
    with pytest.raises(ValueError):
        full_tree_mask([5, 1], [chain(3)])


def _sglang_or_skip():
    try:
        return proof.import_sglang()
    except proof.ProofError as exc:
        pytest.skip(f"SGLang's Triton backend does not import here ({exc}); the dry run needs its server stack "
                    "(scripts/fetch_wheels.sh --sglang-state lists it)")


@pytest.mark.slow
def test_dry_run_drives_the_hook_through_sglangs_backend(tmp_path, monkeypatch):
    """The whole proof on the CPU: SGLang's backend, pools, plugin loader and spec-info code, the hook on the
    Triton twin; every phase leaves rows, every call is served or refused with its reason."""
    _sglang_or_skip()
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from sglang_memory_defaults import MODEL_CONFIG

    st = proof.Settings.dry(drafts=(proof.Draft("eagle", 2, 2, 4), proof.Draft("chain", 1, 2, 3)), seed=5)
    out = tmp_path / "proof.json"
    data = proof.run(st, out, MODEL_CONFIG, log=lambda s: None)
    assert json.loads(out.read_text())["status"] == "complete"
    assert data["ok"], {k: v for k, v in data["summary"].items() if v["ok"] != v["rows"]}
    assert {"eager", "graph", "refuse"} == set(data["phases"])
    assert {r["config"] for r in data["phases"]["graph"]} >= {"eagle-N4 bf16 on", "chain-N3 fp8 validate"}
    reasons = [r["reason"] for r in data["phases"]["refuse"]]
    assert any("float8_e5m2" in r for r in reasons) and any("max_bs=1" in r for r in reasons)
    assert all(r["probe"] == [{"served": False, "o_untouched": True}] for r in data["phases"]["refuse"])
    assert data["plugin"]["entry_point"] == "kdtree_verify = kdtree_lab.sglang.serve:sglang_plugin"


def test_an_entry_point_published_from_a_checkout_is_what_importlib_metadata_finds(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    found = proof.publish_entry_point(tmp_path, "kdtree_lab.test_probe_group", "probe", "json:dumps",
                                      dist="kdtree-lab-probe")
    assert [(ep.name, ep.value) for ep in found] == [("probe", "json:dumps")]
    assert found[0].load() is json.dumps
