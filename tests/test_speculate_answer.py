"""The one table a person reads (today's best, the best setup with ours, the ratio with its band), our kernel over
an fp8 pool from committed results, the command's text, and plots with plain-number ticks."""

import json

import pytest

from kdtree_lab.speculate import answer
from kdtree_lab.speculate import kernel_times as kt
from kdtree_lab.speculate import published as pb
from kdtree_lab.speculate import sweep as sw
from kdtree_lab.speculate.presets import published

GPU = "rtx-pro-6000"


@pytest.fixture(scope="module")
def reference():
    return sw.setup(GPU, "kimi-k2", 8, "int4", 1, "dflash-gsm8k")


@pytest.fixture(scope="module")
def head(reference):
    return answer.headline(reference, sw.DEFAULT_CONTEXTS)


def test_the_headline_says_which_cells_are_measured_and_which_are_predictions(head):
    measured: dict[int, float] = {}  # the fastest headline cell at each context
    for p in published().values():
        if p.headline and p.role == "today":
            for r in p.spec:
                measured[int(r[0])] = max(measured.get(int(r[0]), 0.0), float(r[1]))
    rows = {r["context"]: r for r in head["rows"]}
    assert set(measured) <= set(rows) and set(sw.DEFAULT_CONTEXTS) <= set(rows)
    for c, r in rows.items():
        if c in measured:
            assert r["today"] == measured[c] and r["today_how"].startswith("measured")
        elif c > head["longest_measured"]:
            assert r["today_how"] == "model, a prediction" and r["today"] == r["today_model"]
        else:
            assert r["today_how"] == "model"
    assert head["longest_measured"] == 131_072


def test_the_ratio_and_its_band(reference, head):
    """The band: today's model's worst miss, and on a card our kernel's predicted time at the two ends of the card
    model's checks (ours re-chosen with every kernel time x lo and x hi)."""
    from kdtree_lab.speculate import card_checks

    k_lo, k_hi, _ = card_checks.error_band(reference.target.gpu.name)
    assert head["kernel_band"] == [k_lo, k_hi] and k_lo < 1 < k_hi
    slow = answer.headline(answer.with_kernel_factor(reference, k_hi), sw.DEFAULT_CONTEXTS)
    fast = answer.headline(answer.with_kernel_factor(reference, k_lo), sw.DEFAULT_CONTEXTS)
    for r, s, f in zip(head["rows"], slow["rows"], fast["rows"]):
        lo, hi = r["band"]
        assert r["ratio"] == pytest.approx(r["ours"] / r["today"])
        assert lo < r["ratio"] / (1 + head["band"]) and r["ratio"] / (1 - head["band"]) < hi
        assert lo == pytest.approx(s["ours"] / r["today"] / (1 + head["band"]))
        assert hi == pytest.approx(f["ours"] / r["today"] / (1 - head["band"]))
        assert r["ours"] >= r["same_draft"]  # the best setup includes today's own chain with our kernel
    assert head["band"] == pytest.approx(pb.band())
    assert "card model's" in answer.words(head)


def test_the_best_setup_respects_each_pool_s_capacity(reference, head):
    """Our stack's pools are the memory budget's (SGLang's pool with our kernel at its largest safe fraction), the
    bf16 one half the fp8 one's tokens: past it only the fp8 pool can be the best setup. A deployment the budget
    refuses is refused here too."""
    from kdtree_lab.budget.calculator import compute
    from kdtree_lab.budget.inputs import BudgetInputs

    cap = reference.capacity("ours")
    budget = compute(BudgetInputs(kv_dtype="bf16", concurrency=reference.batch, context=4096))
    assert cap == budget.kv_tokens // reference.batch and abs(reference.capacity("ours-fp8") - 2 * cap) <= 1
    assert cap != reference.today.preset.kv_capacity_tokens // 2  # not today's (vLLM's) published pool
    with pytest.raises(sw.DeploymentDoesNotFit, match="do not fit in the 30.2 GiB free"):
        sw.setup("rtx-5090", "kimi-k2", 8)
    for r in head["rows"]:
        if r["context"] > cap:
            assert "fp8 pool" in r["ours_setup"]
    v = sw.evaluate(reference, 262_144, ("ours",))
    assert sw.best(reference, v, "ours") is None and not sw.fits(reference, v["chain"]["ours"])


def test_committed_fp8_pool_rows_are_used_where_an_issue_grid_holds_them(monkeypatch):
    """The kernel an fp8 pool runs per shape (the e4m3 configuration above 32 rows, its 32-row form below) is taken from the newest committed issue grid holding its fp8-pool rows; a shape that grid lacks takes
    its bf16 sibling's row times their measured ratio (the label says which); a newer committed grid is taken as it
    is."""
    from kdtree_lab.checks import bench_results

    now = kt.table("ours-fp8", GPU)
    grid = bench_results.committed_grid("cuda_sm120_e4m3", "fp8")
    assert grid.source.startswith("data/results/h200/") and grid.source.endswith("/bench-issue-fp8.json")
    assert f"cuda_sm120_e4m3 over fp8 ({grid.source}" in now.label and now.predicted
    assert "cuda_sm120_e4m3_32 over fp8" in now.label  # 32 rows: the 32-row e4m3 form's own rows
    assert "fp8 / cuda_sm120_roles's bf16 time" in now.label  # H = 64, 128 and B = 48: the sibling, scaled
    rows = [dict(r, ms=r["ms"] / 3) for r in grid.rows]
    data = {"preset": "issue", "provenance": {"date_utc": "2099-01-01T00:00:00+00:00", "gpu": "NVIDIA H200"},
            "ceilings": grid.ceilings, "rows": rows}
    path = bench_results.RESULTS / "h200" / "2099-01-01-e4m3" / "bench-issue.json"  # a run as if committed
    real = bench_results._issue_grids
    monkeypatch.setattr(bench_results, "_issue_grids",
                        lambda presets=bench_results.ISSUE_PRESETS: [(data["provenance"]["date_utc"], path, data),
                                                                     *real(presets)])
    new = kt.table("ours-fp8", GPU)
    assert "2099-01-01-e4m3" in new.label
    shapes = [(r["B"], r["L"], r["N"], r["H"]) for r in grid.rows]
    assert all(new.ms(*k) <= now.ms(*k) * (1 + 1e-12) for k in shapes)  # a third of the H200 time: never slower
    assert any(new.ms(*k) < now.ms(*k) for k in shapes)  # faster wherever the issue term was the card's bound


def test_the_command_opens_with_the_headline_and_names_every_source(capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", "--context", "16384,262144", "--nodes", "4,16", "--sources"]) == 0
    out = capsys.readouterr().out
    first_table = out.split("\n\n")[0]
    assert first_table.startswith("Tokens per second per request: today's best against the best setup")
    assert "today's best" in first_table and "ratio (band)" in first_table
    rows = [ln.split()[0] for ln in first_table.splitlines()[first_table.splitlines().index(
        next(ln for ln in first_table.splitlines() if set(ln) == {"─"})) + 1:]]
    assert rows == ["16k", "256k"], first_table  # the contexts asked for, only those
    inputs = out[out.index("Inputs, each with its source"):]
    header = inputs.splitlines()[1].split()
    assert header == ["input", "value", "source"], inputs[:300]
    assert "{'" not in out and "Traceback" not in out and "|---|" not in out


def test_the_json_carries_the_headline(capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", "--context", "4096,200000", "--nodes", "4,16", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["context"] for r in res["rows"]] == [4096, 200000]
    assert [r["context"] for r in res["headline"]["rows"]] == [4096, 200000]  # the contexts asked for
    assert main(["speculate", "--nodes", "4,16", "--json"]) == 0  # by default also the published table's own
    assert {r["context"] for r in json.loads(capsys.readouterr().out)["headline"]["rows"]} >= {0, 16384, 131072, 200000}
    assert set(res["rows"][0]["trees"]["ours"]) == {"4", "16"} and res["label"].startswith("model")
    assert set(res["break_even"]) == set(sw.KERNELS)


def _labels(ax, axis):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()) if t.get_text()]


def _check_axes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in ("x", "y"):
            labels = _labels(ax, axis)
            if not labels and axis == "y":  # a panel sharing its neighbour's y axis shows no labels of its own
                assert any(_labels(o, "y") for o in ax.get_shared_y_axes().get_siblings(ax)), ax.get_title()
                continue
            assert labels, (axis, ax.get_title())
            assert not [s for s in labels if "10^" in s or "times" in s or "e+" in s or "$" in s], labels
        xs = [t for t in ax.get_xticklabels() if t.get_text()]
        boxes = [t.get_window_extent(renderer) for t in xs]
        assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in xs]  # none run together
        ys = [float(s.replace("\u2212", "-")) for s in _labels(ax, "y")]
        assert not ys or (len(ys) >= 3 and all(b > a for a, b in zip(ys, ys[1:])))  # a readable linear scale


def test_plots_have_plain_number_ticks_and_the_ratio_reads_off_its_axis(reference, head, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from kdtree_lab.lab import plots

    res = sw.sweep(reference)
    figs = [plots.speculation_headline(head, tmp_path / "h.png"), plots.speculation_curves(res, tmp_path / "c.png"),
            plots.speculation_best(res, tmp_path / "b.png"),
            plots.published_check(pb.check_all(), tmp_path / "p.png")]
    from kdtree_lab.core.display import figure_problems

    for fig in figs:
        _check_axes(fig)
    assert figure_problems(figs[2]) == []  # 07_best.png: tree-size labels apart and inside the axes
    ratio_ax = figs[0].axes[1]  # the ratio: a linear axis from 0 past the band, ticks at most 0.5 apart
    lo, hi = ratio_ax.get_ylim()
    ticks = [float(s) for s in _labels(ratio_ax, "y")]
    assert lo == 0 and hi >= max(r["band"][1] for r in head["rows"])
    assert max(b - a for a, b in zip(ticks, ticks[1:])) <= 0.5 and min(ticks) < 1.0 < max(ticks)
