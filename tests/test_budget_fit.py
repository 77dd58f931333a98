"""The budget's activation line (the chunked-prefill peak against SGLang's 1.5 MiB-per-token reserve), the
deployments it proposes when the asked one cannot hold its context, and the reference decision (0.93/0.94
without CUDA graphs, 0.88 with graphs and the verify workspace)."""

import json
import math
import re
import shlex
from dataclasses import replace

import pytest
from sglang.srt.server_args import prepare_server_args

from kdtree_lab.budget import prefill_activations as pa
from kdtree_lab.budget import scenario
from kdtree_lab.budget.calculator import compute
from kdtree_lab.budget.inputs import GIB, MIB, BudgetInputError, BudgetInputs
from kdtree_lab.budget.presets import gpus
from kdtree_lab.budget.proposals import proposals, with_proposals
from kdtree_lab.core.paths import RESULTS
from kdtree_lab.kernels.launch_plan import plan, workspace_bytes
from kdtree_lab.sglang import serve

REF = scenario.REFERENCE


def activation(res, where="slack"):
    return next(c for c in res.consumers if c.name.startswith("activations") and c.where == where)


def test_activation_line_is_the_prefill_peak_plus_its_margin():
    res = compute(replace(REF, mem_fraction=0.88))
    line = activation(res)
    want = pa.activation_lines("kimi-k2", "int4", 8, 8192, requests=8, context=200_000, spec_algorithm="EAGLE",
                               sms=188, measurement=pa.load_measurement())["measured"]
    assert line.bytes == want.bytes == int(want.peak_bytes * 1.25)
    assert res.activation == want.source  # "measured" once a measurement of these shapes is committed
    if want.source == "modelled":
        assert "not measured" in line.name
    shown = [c for c in res.consumers if c.name.startswith("activations") and c.where == "not counted"]
    reserve = next(c for c in shown if "what SGLang's default assumes" in c.name)
    assert reserve.bytes == 12 * GIB
    if want.source == "measured":  # the model stays visible beside the measurement it was held to
        assert any(c.source == "modelled" for c in shown)
    assert line.bytes < reserve.bytes / 5


def test_sglang_reserve_leaves_no_safe_fraction():
    """Following SGLang's reserve, the slack allows at most 0.825 (G of the RTX PRO 6000's public TP8 figure), but
    one 200k-token request needs 0.919 with the weights SGLang really loads: no fraction is safe, and the KV
    tokens at 0.88 are SGLang's count from the computed weights."""
    res = compute(replace(REF, mem_fraction=0.88, activation_model="sglang-reserve"))
    assert res.safe_fraction == 0.825 and res.sglang_default_fraction == 0.848 and res.serve_fraction == 0.919
    assert res.impossible and "needs fraction 0.919" in res.impossible and "at most 0.825" in res.impossible
    assert not res.fraction_is_safe and res.launch_line == ""
    assert res.kv_tokens == int((res.g_bytes * 0.88 - res.loaded_bytes) // 71_424)


def test_safe_fraction_follows_the_chosen_estimate_and_reports_all_three():
    res = {m: compute(replace(REF, activation_model=m)) for m in pa.ACTIVATION_MODELS}
    for m, r in res.items():
        assert r.safe_fraction == r.safe_fractions[m]
        assert r.safe_fractions == res["measured"].safe_fractions
    assert res["modelled"].safe_fraction > 0.88 > res["sglang-reserve"].safe_fraction
    # the margin moves it: none at all is the bare peak
    bare = compute(replace(REF, activation_model="modelled", activation_margin=0.0))
    assert bare.safe_fraction >= res["modelled"].safe_fraction
    with pytest.raises(BudgetInputError, match="activation_model"):
        compute(replace(REF, activation_model="guess"))
    with pytest.raises(BudgetInputError, match="activation_margin"):
        compute(replace(REF, activation_margin=-0.5))


def test_graphs_off_drops_the_graph_time_buffers_and_adds_the_eager_partials():
    on = compute(replace(REF, mem_fraction=0.93))
    off = compute(replace(REF, mem_fraction=0.93, cuda_graphs=False, verify_kernel=False))
    names_on, names_off = {c.name for c in on.consumers}, {c.name for c in off.consumers}
    assert "target attn_logits (split-K decode partials, unused by verify)" in names_on - names_off
    assert not any(n.startswith("CUDA-graph pool") or n == "kdtree verify workspace" for n in names_off)
    eager = next(c for c in off.consumers if c.name.startswith("eager draft-decode"))
    assert eager.bytes == 8 * 4 * 8 * 256 * 513 * 4 + 188 * 16 * 514 * 4 + 188 * 4
    assert off.slack_needed_bytes < on.slack_needed_bytes
    assert off.launch_line.startswith("python -m sglang.launch_server ")
    assert "--cuda-graph-backend-decode disabled" in off.launch_line


def test_graphs_off_launch_lines_are_what_sglang_parses():
    for kernel in (True, False):
        res = compute(replace(REF, cuda_graphs=False, verify_kernel=kernel))
        words = shlex.split(res.launch_line)
        args = words[4:] if kernel else words[3:]
        sa = prepare_server_args(args)
        assert sa.cuda_graph_backend_decode == "disabled"
        assert sa.mem_fraction_static == pytest.approx(res.fraction, abs=5e-4)
        if kernel:
            assert serve.launch_problems(sa) == []


def test_every_proposal_holds_its_context_at_a_safe_fraction():
    """The reference deployment cannot hold 200k tokens for 8 requests; each proposal, re-evaluated by the budget
    from its own inputs, holds its context for each of its requests at its safe fraction, without an OOM
    warning, and says how it differs from the asked one."""
    asked = replace(REF, mem_fraction=0.88)
    res = with_proposals(compute(asked))
    assert not res.holds_context and res.proposals
    for p in res.proposals:
        again = compute(p.inputs)
        assert again.fraction == p.safe_fraction == again.safe_fraction
        assert again.holds_context and again.kv_tokens // p.concurrency >= asked.context
        assert not any("OOM" in w for w in again.warnings)
        assert (again.kv_tokens, again.max_context_per_request) == (p.kv_tokens, p.tokens_per_request)
        assert p.changes and again.launch_line == p.launch_line
        differs = {f for f in ("kv_dtype", "concurrency", "max_bs", "draft_tokens", "chunked_prefill")
                   if getattr(p.inputs, f) != getattr(asked, f)}
        assert differs and len(differs) == len(p.changes)
    conc = [p.concurrency for p in res.proposals]
    assert conc == sorted(conc, reverse=True)
    assert any(p.inputs.kv_dtype == "fp8" for p in res.proposals)  # the kernel serves e4m3 pools
    # what the README quotes as the reference deployment: fp8 KV, 2 requests at full context, batch 8 kept
    readme = next(p for p in res.proposals if p.inputs.kv_dtype == "fp8" and p.concurrency == 2
                  and p.inputs.max_bs == 8 and len(p.changes) == 2)
    assert readme.tokens_per_request >= 200_000


def test_nothing_is_proposed_for_a_deployment_that_fits():
    fits = replace(REF, kv_dtype="fp8", concurrency=2)
    res = with_proposals(compute(fits))
    assert res.holds_context and res.proposals == []


def test_no_proposal_when_no_change_holds_the_context():
    res = with_proposals(compute(replace(REF, context=5_000_000, concurrency=1)))
    assert res.proposals == [] and not res.holds_context


def test_proposals_respect_sglangs_speculative_rules():
    chain = replace(REF, topk=1, spec_steps=3, draft_tokens=4)
    for p in proposals(chain):
        assert p.inputs.draft_tokens == p.inputs.spec_steps + 1
    block = replace(REF, spec_algorithm="DFLASH", topk=1, spec_steps=1, draft_tokens=16)
    assert all(p.inputs.draft_tokens == 16 for p in proposals(block))


def test_cli_json_carries_the_proposals_and_the_estimates(capsys):
    from kdtree_lab.cli.main import main

    assert main(["budget", "--mem-fraction", "0.925", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["proposals"] and all(p["launch_line"].startswith("KDTREE_VERIFY=on") for p in data["proposals"])
    assert set(data["safe_fractions"]) == set(pa.ACTIVATION_MODELS)
    assert data["weights"]["target_terms"] and data["draft_weights_bytes"] > 0
    assert main(["budget", "--mem-fraction", "0.925", "--activations", "sglang-reserve"]) == 3  # no fraction safe
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1, err  # the refusal: one line
    assert err.startswith("kdtree-lab budget: impossible deployment: one 200,000-token request needs fraction "
                          "0.919, but the slack consumers (16.4 GiB) allow at most 0.825")
    assert "deployments that hold the context" in out and "KDTREE_VERIFY=validate" not in out


def test_reference_decision_figures():
    """0.93 / 0.94 without graphs are safe under the prefill peak; 0.88 with graphs and the workspace starts but
    its pool holds no 200k-token request (the weights SGLang loads, draft included, are 73 GiB per GPU, not
    553 / 8); under SGLang's reserve nothing is safe; each verdict's numbers are the budget's own."""
    d = scenario.reference_decision()
    by = {(v["run"].split(",")[0], v["activations"].split(" ")[0]): v for v in d["verdicts"]}
    for frac in ("0.93", "0.94"):
        assert by[(frac, "modelled")]["safe"] and not by[(frac, "sglang-reserve")]["safe"]
    assert not by[("0.88", "modelled")]["safe"]
    assert "holds 145,613 tokens, less than one 200,000-token request; use 0.919 to 0.933" in \
        by[("0.88", "modelled")]["why"]
    assert "allow at most 0.825" in by[("0.88", "sglang-reserve")]["why"]
    assert d["largest_safe_fraction"]["sglang-reserve"] == 0.825
    assert d["largest_safe_fraction"]["modelled"] > 0.9
    g = 97887 * MIB - 1641 * MIB
    eager = 8 * 4 * 8 * 256 * 513 * 4 + 188 * 16 * 514 * 4 + 188 * 4
    reserve_off = 12 * GIB + eager + GIB + 9 * 200_000 * 4 + GIB  # + communication, req_to_token, margin
    assert d["largest_safe_fraction_without_graphs"]["sglang-reserve"] == math.floor((1 - reserve_off / g) * 1000) / 1000
    runs = scenario.runs()
    assert [r.result.fraction for r in runs] == [0.93, 0.94, 0.88]
    assert [r.result.inputs.cuda_graphs for r in runs] == [False, False, True]
    assert runs[0].result.kv_tokens == int((g * 0.93 - runs[0].result.loaded_bytes) // 71_424)
    left = {r["consumer"]: r for r in d["consumers"]}["slack the fraction leaves, G x (1 - fraction)"]
    assert left[runs[2].label] == round(g * 0.12 / MIB)


def test_reference_workspace_lines():
    """The hook's workspace at batch 8 on the RTX PRO 6000 (the launch plan's), the same layout at 16 splits,
    SGLang's own split-K buffers for the same 128 tokens (as its classes allocated them on the H200), and the
    ~605 MB quoted: 2^18 rows of 576 fp32 and an LSE, in either reading of its rows."""
    rows = scenario.workspace_lines()
    totals = {r["workspace"]: r["bytes"] for r in rows if r["line"] == "total"}
    hook, sixteen, sglang, quoted = totals.values()
    assert hook == plan(range(1, 9), 16, 8, "bf16", gpus()["rtx-pro-6000"].device).workspace_bytes
    assert sixteen == workspace_bytes(8, 16, 8, 16)
    state = json.loads((RESULTS / "h200" / "2026-12-01-sglang-graph-state" / "graph-state.json").read_text())
    measured = {t["name"]: t for t in state["phases"][0]["tensors"]}
    assert measured["cuda_graph_attn_logits"]["shape"] == [8 * 16, 8, 256, 512]
    assert measured["cuda_graph_attn_lse"]["shape"] == [8 * 16, 8, 256]
    assert sglang == measured["cuda_graph_attn_logits"]["bytes"] + measured["cuda_graph_attn_lse"]["bytes"]
    assert quoted == 2**18 * 577 * 4 == 8 * 16 * 8 * 256 * 577 * 4 == 8 * 16 * 128 * 16 * 577 * 4
    assert round(quoted / 1e6) == 605 and round(sglang / 1e6) == 538
    assert hook < sglang / 10 and hook < quoted / 10
    for name in totals:
        parts = [r["bytes"] for r in rows if r["workspace"] == name and r["line"] != "total"]
        assert sum(parts) == totals[name]


def test_cli_reference_decision_preset(capsys):
    from kdtree_lab.cli.main import main

    assert main(["budget", "--preset", "reference-decision"]) == 0
    out = capsys.readouterr().out
    assert "which are safe and why" in out and "the quoted ~605 MB" in out
    assert "the verify workspace for batches 1..8 (one allocation, sized by the largest)" in out
    words = " ".join(out.split())  # a layout's heading wraps to the terminal
    first = words[words.index("what the hook allocates"):][:400]
    assert re.search(r"batch 8, 23 splits, ", first), first  # batch 6 at 31 splits holds as many partial rows,
    # batch 8 more of the e4m3 Q pass's
    assert main(["budget", "--preset", "reference-decision", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"consumers", "verdicts", "workspace", "largest_safe_fraction"} <= set(data)


def test_widget_follows_the_activation_choice_and_shows_proposals():
    from kdtree_lab.budget import widget

    box = widget.build(replace(REF, mem_fraction=0.88))
    controls = {c.description: c for col in box.children[0].children for c in col.children}
    verdict, proposals_html = box.children[3], box.children[5]
    assert f"largest safe fraction {compute(REF).safe_fraction:.3f} (activations {compute(REF).activation}" \
        in verdict.value
    assert "deployments that hold the 200,000-token context" in proposals_html.value
    assert "not safe" in verdict.value and "kd-safe" not in verdict.value  # 0.88 holds no 200k request
    controls["activations follow"].value = "sglang-reserve"
    assert "largest safe fraction 0.825" in verdict.value and "no fraction is safe" in verdict.value
    controls["KV cache dtype"].value = "fp8"
    controls["concurrent requests"].value = 2
    controls["activations follow"].value = "measured"
    controls["mem-fraction-static"].value = 0.93
    assert proposals_html.value == ""


def test_readme_quotes_the_budgets_own_figures():
    """The reference deployment and decision figures docs/sglang.md and docs/memory.md quote are what the budget computes today (modelled until
    a measurement of these shapes is committed; then this test names the figures to update)."""
    from kdtree_lab.core.paths import ROOT

    text = " ".join(" ".join((ROOT / "docs" / page).read_text() for page in ("sglang.md", "memory.md")).split())
    fit = compute(replace(REF, kv_dtype="fp8", concurrency=2))
    asked = compute(replace(REF, mem_fraction=0.88))
    d = scenario.reference_decision()
    totals = [r["bytes"] for r in d["workspace"] if r["line"] == "total"]
    hook = re.search(r"batch (\d+), (\d+) splits, ([^;]+);", d["workspace"][0]["workspace"])  # what the hook allocates
    for quoted in (f"largest safe fraction of {fit.safe_fraction:.3f} with activations {fit.activation}",
                   f"{fit.kv_tokens:,} KV tokens: {fit.max_context_per_request:,} per request for 2 at once",
                   f"({asked.max_context_per_request:,} each at 0.88)",
                   f"with graphs the largest safe fraction is {d['largest_safe_fraction']['modelled']:.3f}",
                   f"{round(totals[0] / 1e6)} MB at batch {hook[1]} and {hook[2]} splits",
                   f"splits: {round(totals[1] / 1e6)} MB",
                   f"same 128 tokens: {round(totals[2] / 1e6)} MB"):
        assert quoted in text, quoted


def test_the_budget_says_whether_the_fraction_is_safe_and_why():
    safe = compute(replace(REF, mem_fraction=0.925, activation_model="modelled"))
    assert safe.verdict().startswith("fraction 0.925 is safe: leaves 7.05 GiB of slack for ")
    assert f"(activations {activation(safe).bytes / GIB:.2f} GiB, modelled)" in safe.verdict()
    risky = compute(replace(REF, mem_fraction=0.94, activation_model="modelled"))
    assert risky.verdict() == (f"fraction 0.940 is not safe: leaves 5.64 GiB of slack for "
                               f"{risky.slack_needed_bytes / GIB:.2f} GiB of consumers (activations "
                               f"{activation(risky).bytes / GIB:.2f} GiB, modelled); use 0.919 to 0.933")
    short = compute(replace(REF, mem_fraction=0.88, activation_model="modelled"))
    assert short.verdict() == ("fraction 0.880 is not safe: its KV pool holds 145,613 tokens, less than one "
                               "200,000-token request; use 0.919 to 0.933")
    impossible = compute(replace(REF, gpu="h200", context=100_000_000))
    assert impossible.verdict().startswith("no fraction is safe: no fraction fits")
