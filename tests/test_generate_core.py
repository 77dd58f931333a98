"""The generation check's parts on a CPU: the absorbed forward against transformers, drafts, acceptance, the pool,
the token comparison, and a whole run verified by the fp32 reference."""

import numpy as np
import pytest
import torch

from kdtree_lab.core.tree import DraftTree, chain
from kdtree_lab.generate import attend, check, drafts, forward, model, pool
from kdtree_lab.generate.loop import accept
from kdtree_lab.generate.run import GenerateSpec, generate, problems


@pytest.mark.parametrize("heads", [8, 16])
def test_the_absorbed_fp32_forward_equals_transformers_logits(heads):
    spec = model.ModelSpec(heads=heads, layers=2, hidden=64, ffn=128, seed=heads)
    m = model.round_weights(model.build(spec))
    w = model.absorbed(m, spec, torch.float32)
    ids = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(heads))
    with torch.no_grad():
        ref = m(input_ids=ids[None]).logits[0]
        ours = forward.forward(w, ids, torch.arange(40), lambda i, q, k: attend.reference_attention(
            q, torch.zeros(1, 1, 576), [torch.zeros(0, dtype=torch.long)], k, k[:, :512], [(0, 40)], [None],
            w.sm_scale))
    assert (ours - ref).abs().max() < 1e-4


def test_draft_names_parse_and_refuse():
    assert drafts.parse("chain-4").num_draft == 5
    assert drafts.parse("eagle-4x3-16").num_draft == 16
    assert drafts.parse("ddtree-32-8").num_draft == 32
    for bad in ("chain-99", "eagle-4x3-99", "tree-4", "ddtree-1-3"):
        with pytest.raises(ValueError, match="draft"):
            drafts.parse(bad)


def test_greedy_acceptance_takes_the_longest_matching_path():
    c = chain(4)
    tree = DraftTree(c.parents, np.array([7, 1, 2, 3]), c.scores)
    assert accept(tree, np.array([1, 2, 3, 9])) == [1, 2, 3]
    assert accept(tree, np.array([5, 2, 3, 9])) == []
    t = DraftTree(np.array([-1, 0, 0, 2]), np.array([7, 4, 5, 6]), np.ones(4))
    assert accept(t, np.array([5, 0, 6, 0])) == [2, 3]


def test_the_pool_hands_out_and_takes_back_slots():
    p = pool.LatentPool(2, 4, "fp8")
    a = p.alloc(3)
    assert a == [1, 2, 3] and p.free_slots == 1
    with pytest.raises(pool.PoolFull):
        p.alloc(2)
    p.free(a[:2])
    assert p.free_slots == 3
    p.write(1, torch.tensor([3]), torch.full((1, 576), 0.3))
    assert p.buffers[1].dtype == torch.float8_e4m3fn and float(p.buffers[1][3, 0, 0]) == pytest.approx(0.3, rel=0.07)


def test_the_comparison_counts_each_kind_of_token():
    ref = np.zeros((4, 5))
    ref[0, 1] = 3.0  # agrees
    ref[1, 2], ref[1, 3] = 1.0, 0.99  # a near-tie
    ref[2, 4] = 5.0  # a wide margin
    ref[3, 0] = 2.0
    path = ref + 0.01
    path[1, 3] += 0.05  # the path picks 3 at the near-tie
    path[2, 1] += 9.0  # and 1 at the wide margin
    tc = check.compare([[1, 3, 1, 4]], [path], [ref])  # the last token is not its own row's argmax
    assert tc.compared == 4 and tc.self_mismatches == 1
    assert [(m["index"], m["explained"]) for m in tc.mismatches] == [(1, True), (2, False), (3, False)]


def test_a_whole_run_on_the_cpu_gives_greedy_decodings_tokens():
    spec = GenerateSpec(heads=(8,), layers=2, hidden=64, ffn=128, train_steps=20, train_batch=4, train_seq=64,
                        contexts=(40,), prompts=2, new_tokens=12, drafts=("chain-3", "eagle-2x2-4", "ddtree-6-3"),
                        paths=("reference",), pools=("bf16", "fp8"), device="cpu")
    res = generate(spec)
    assert len(res["runs"]) == 2 * 4 and problems(res) == []
    for r in res["runs"]:
        assert r["check"]["compared"] == 24 and r["check"]["self_mismatches"] == 0
        assert r["accept_length"] >= 1


def test_the_command_line_knows_the_paths_and_pools_the_library_does():
    from kdtree_lab.cli import generate as cli
    from kdtree_lab.generate.run import POOLS

    assert cli.PATHS == attend.PATHS and cli.POOLS == POOLS


def test_committed_results_pair_ours_with_sglang_and_keep_their_margins():
    from kdtree_lab.generate import results

    runs = results.committed()
    assert results.totals(runs)["unexplained"] == 0 and all(r["check"]["compared"] >= 2048 for r in runs)
    rows = results.speed_rows(results.committed(only=results.TIMED))
    assert {r["context"] for r in rows} >= {1024, 32768, 131072}
    assert all(r["ours / SGLang"] >= 1 for r in rows if r["context"] >= 32768)  # issue 50's end-to-end bar
    counts = results.margin_counts(runs)
    assert sum(counts["mismatched"]) <= sum(counts["all"]) and len(counts["all"]) == len(counts["edges"]) - 1


def test_the_step_model_beside_the_generation_runs():
    from kdtree_lab.speculate import generation

    rows = generation.rows()
    assert {r["path"] for r in rows} == {"ours", "sglang"} and len(rows) >= 30
    # ours: the verify attention the model predicts leaves only the forward's other kernels (well under 1 ms)
    assert all(0 < r["verify ms, measured"] - r["attention ms, model"] < 1.0 for r in rows
               if r["path"] == "ours" and r["H"] == 8)
    assert all(0.6 < r["model / measured"] < 1.2 for r in rows)


def test_ctrl_c_mid_run_prints_what_ran_and_exits_130(monkeypatch, capsys):
    from kdtree_lab.cli.main import main
    from kdtree_lab.generate import loop

    real = loop.Engine.spec_step
    calls = {"n": 0}

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(loop.Engine, "spec_step", interrupted)
    code = main(["generate", "--layers", "2", "--train-steps", "3", "--contexts", "24", "--prompts", "1",
                 "--new-tokens", "8", "--drafts", "chain-2", "--pools", "bf16"])
    out = capsys.readouterr().out
    assert code == 130 and "interrupted (Ctrl-C)" in out and "none (greedy)" in out  # the greedy run finished
