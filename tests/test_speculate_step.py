"""The step model: kernel times from the committed grids (newest file wins, predictions by the README's rule), the
parts' units and monotonicity, the calibration of the fixed part, the sweep's best tree and break-even context."""

import itertools
import json
import math

import pytest

from kdtree_lab.budget.presets import gpus
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.speculate import kernel_times as kt
from kdtree_lab.speculate import step as st
from kdtree_lab.speculate import sweep as sw

GPU, MODEL, TP = "rtx-pro-6000", "kimi-k2", 8


@pytest.fixture(scope="module")
def rtx():
    return kt.tables(GPU)


@pytest.fixture(scope="module")
def reference():
    return sw.setup(GPU, MODEL, TP)


def _grid_file(folder, date, ms):
    rows = [{"impl": "cuda", "B": 1, "L": length, "N": 4, "H": 8, "ms": ms * length / 4096, "GB/s": 1.0}
            for length in (4096, 32768)]
    folder.mkdir(parents=True)
    (folder / "bench-issue.json").write_text(json.dumps(
        {"preset": "issue", "provenance": {"date_utc": date, "gpu": "NVIDIA H200"}, "ceilings": {"copy_gbps": 1.0},
         "rows": rows}))


def test_the_newest_committed_grid_of_an_implementation_wins(tmp_path, monkeypatch):
    from kdtree_lab.checks import bench_results

    monkeypatch.setattr(bench_results, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_results, "ROOT", tmp_path)
    _grid_file(tmp_path / "h200" / "2026-11-29-old", "2026-11-29T10:00:00+00:00", 1.0)
    assert kt.committed_grid("cuda").rows[0]["ms"] == 1.0
    _grid_file(tmp_path / "h200" / "2026-12-01-new", "2026-12-01T10:00:00+00:00", 0.5)  # a new run lands
    grid = kt.committed_grid("cuda")
    assert grid.rows[0]["ms"] == 0.5 and grid.source == "h200/2026-12-01-new/bench-issue.json"
    with pytest.raises(kt.KernelTimeError, match="cuda_sm120_roles"):
        kt.committed_grid("cuda_sm120_roles")  # no run here holds its rows


def test_a_grid_of_another_preset_is_found_only_where_asked_for(tmp_path, monkeypatch):
    from kdtree_lab.checks import bench_results

    monkeypatch.setattr(bench_results, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_results, "ROOT", tmp_path)
    _grid_file(tmp_path / "h200" / "2026-11-29-issue", "2026-11-29T10:00:00+00:00", 1.0)
    folder = tmp_path / "h200" / "2026-12-01-card"
    _grid_file(folder, "2026-12-01T10:00:00+00:00", 0.5)
    data = json.loads((folder / "bench-issue.json").read_text())
    (folder / "bench-issue.json").write_text(json.dumps(dict(data, preset="card-floor")))  # a newer card-floor run
    assert bench_results.committed_grid("cuda").rows[0]["ms"] == 1.0  # the issue grids' tables keep their grid
    grid = bench_results.committed_grid("cuda", presets=("card-floor",))
    assert grid.rows[0]["ms"] == 0.5 and grid.source == "h200/2026-12-01-card/bench-issue.json"
    with pytest.raises(LookupError, match="no committed card-floor grid"):
        bench_results.committed_grid("cuda", "fp8", presets=("card-floor",))


def test_committed_tables_are_the_current_defaults_and_say_how_they_were_made(rtx):
    h200 = kt.tables("h200")
    assert h200["ours"].impl == "cuda" and not h200["ours"].predicted
    assert rtx["ours"].impl == "cuda_sm120 + cuda_sm120_roles"  # what sm_120 selects: by rows (N x H)
    assert rtx["ours"].predicted and "predicted" in rtx["ours"].label
    assert rtx["sglang"].impl == kt.SGLANG_VERIFY and rtx["decode"].impl == kt.SGLANG_DECODE
    for k, tab in rtx.items():
        assert tab.source.startswith("data/results/h200/") if k != "ours-fp8" else "data/results/h200/" in tab.source
    assert "cuda_sm120_e4m3" in rtx["ours-fp8"].impl and rtx["ours-fp8"].predicted  # what sm_120 runs for fp8


def test_rtx_times_follow_the_card_model_at_every_grid_point(rtx):
    """Each grid point: the configuration the card selects for its rows, its committed row carried to the card by
    the card model of docs/results.md, recomputed here term by term from its inputs."""
    from kdtree_lab.core.mla import D_QK, D_V
    from kdtree_lab.speculate import card_model

    card, ref, floor = card_model.card(GPU), card_model.reference(), card_model.floor()[0]
    scale = ref.sms * ref.sustained_mhz / (card.sms * card.sustained_mhz)
    for impl, tile in (("cuda_sm120", 32), ("cuda_sm120_roles", 64)):
        grid = kt.committed_grid(impl)
        for r in grid.rows:
            if kt.ours_impl(GPU, r["B"], r["N"], r["H"]) != impl:
                continue
            rows = -(-r["N"] * r["H"] // tile) * tile
            flops = 2 * r["B"] * rows * (r["L"] + r["N"]) * (D_QK + D_V)
            want = floor + max(r["B"] * r["L"] * D_QK * 2 / (card.stream_gbps * 1e9) * 1e3,
                               flops / (card.sms * 1024 * card.sustained_mhz * 1e6) * 1e3,
                               (r["ms"] - floor) * scale)
            assert rtx["ours"].ms(r["B"], r["L"], r["N"], r["H"]) == pytest.approx(want, rel=1e-12)


def test_the_rtx_ours_table_takes_each_shape_from_the_configuration_the_card_selects(monkeypatch):
    """On sm_120 the second generation serves the rows above 32: our kernel's RTX times take those shapes from its
    committed rows, predicted with its own run, and the rest from the first kernel's; a card whose selected
    configuration has no committed grid is refused by name."""
    from kdtree_lab.kernels import launch_plan
    from kdtree_lab.speculate import card_model

    sm120 = kt.committed_grid("cuda_sm120")
    roles = kt.Grid("cuda_sm120_roles", "data/results/h200/roles/bench-issue.json", sm120.date, sm120.gpu,
                    sm120.ceilings, tuple(dict(r, impl="cuda_sm120_roles", ms=r["ms"] / 2) for r in sm120.rows))
    real = kt.committed_grid
    monkeypatch.setattr(kt, "committed_grid", lambda impl: roles if impl == "cuda_sm120_roles" else real(impl))
    mixed = kt.table("ours", GPU)
    first_only = tuple(a for a in launch_plan.AUTO_CONFIGS if a.config.name != "verify_sm120_roles_kernel<64>")
    with monkeypatch.context() as m:
        m.setattr(launch_plan, "AUTO_CONFIGS", first_only)
        only_first = kt.table("ours", GPU)
    assert mixed.impl == "cuda_sm120 + cuda_sm120_roles" and "roles" in mixed.source
    for r in sm120.rows:
        shape = (r["B"], r["L"], r["N"], r["H"])
        want = kt._predicted(dict(r, ms=r["ms"] / 2), card_model.card(GPU), "cuda_sm120_roles") \
            if r["N"] * r["H"] > 32 else only_first.ms(*shape)
        assert mixed.ms(*shape) == pytest.approx(want, rel=1e-12)
    assert only_first.impl == "cuda_sm120"

    def no_roles(impl):
        if impl == "cuda_sm120_roles":
            raise kt.KernelTimeError("impl cuda_sm120_roles: no committed issue grid holds its rows")
        return real(impl)

    monkeypatch.setattr(kt, "committed_grid", no_roles)
    with pytest.raises(kt.KernelTimeError, match="cuda_sm120_roles"):
        kt.table("ours", GPU)


def test_interpolation_is_exact_at_grid_points_between_neighbours_and_flags_extrapolation():
    h200 = kt.tables("h200")["ours"]
    rows = {(r["B"], r["L"], r["N"], r["H"]): r["ms"] for r in kt.committed_grid("cuda").rows}
    for (b, length, n, h), ms in rows.items():
        assert h200.ms(b, length, n, h) == pytest.approx(ms)
    mid = h200.ms(1, 100_000, 8, 8)
    corners = [rows[(1, length, n, 8)] for length in (32_768, 200_000) for n in (4, 16)]
    assert min(corners) <= mid <= max(corners)
    assert h200.lookup(1, 250_000, 16, 8)[1] and not h200.lookup(1, 150_000, 16, 8)[1]
    with pytest.raises(kt.KernelTimeError, match="heads"):
        h200.ms(1, 4096, 4, 12)
    with pytest.raises(kt.KernelTimeError, match="nodes"):
        h200.ms(1, 4096, 65, 8)


def test_experts_touched_against_enumeration():
    experts, k = 4, 2
    subsets = list(itertools.combinations(range(experts), k))
    for tokens in (1, 2, 3):
        mean = sum(len(set().union(*c)) for c in itertools.product(subsets, repeat=tokens)) / len(subsets) ** tokens
        assert st.experts_touched(tokens, experts, k) == pytest.approx(mean)
    assert st.experts_touched(1, 384, 8) == pytest.approx(8)
    assert st.experts_touched(10_000, 384, 8) == pytest.approx(384)


def test_weight_bytes_from_the_architecture(reference):
    """A second derivation of the routed experts at one token: 8 experts x 3 x 7168 x 2048 int4 (0.5625 B) over TP 8,
    60 MoE layers, at the card's weight bandwidth."""
    t = reference.target
    part = next(p for p in st.weight_parts(t, 1) if p.name == "weights: routed experts")
    want_ms = 60 * 8 * 3 * 7168 * 2048 / 8 * 0.5625 / (t.weights_gbps * 1e9) * 1e3
    assert part.ms == pytest.approx(want_ms, rel=1e-9)
    assert t.heads == 8


def test_step_units_and_parts(reference):
    s = reference
    one = st.step(s.target, s.tables, 32_768, 1, s.fixed)
    assert one.ms == pytest.approx(sum(p.ms for p in one.parts))
    assert one.tokens_per_s == pytest.approx(1e3 / one.ms)
    tree = sw.spec_step(s, 32_768, "ours", 16)
    assert tree.tokens_per_s == pytest.approx(tree.tokens / tree.ms * 1e3)
    assert all(p.ms >= 0 and p.source for p in tree.parts) and tree.label == st.MODEL_LABEL
    eight = st.step(s.target, s.tables, 32_768, 8, s.fixed)
    assert eight.aggregate_tokens_per_s == pytest.approx(8 * eight.tokens_per_s)


@pytest.mark.parametrize("today", [False, True], ids=["sglang decode", "today"])
@pytest.mark.parametrize("kernel", [None, "ours", "ours-fp8", "sglang", "decode rows"])
def test_step_time_grows_with_context_nodes_and_batch(reference, kernel, today):
    s = reference
    draft = sw.draft_part(s, 4, True, 4096)
    now = s.today if today else None

    def ms(context, batch, nodes):
        if kernel is None:
            return st.step(s.target, s.tables, context, batch, s.fixed, today=now).ms
        return st.step(s.target, s.tables, context, batch, s.fixed, kernel, nodes, 2.0, draft, today=now).ms

    contexts = [4096, 16_384, 32_768, 100_000, 200_000, 262_144]
    small = kernel == "decode rows" and not today  # SGLang's decode grid: B x N <= 48
    for batch, nodes in ((1, 4), (1, 16), (8, 4) if small else (8, 16)):
        times = [ms(c, batch, nodes) for c in contexts]
        assert all(b >= a for a, b in zip(times, times[1:])), (batch, nodes, times)
    if kernel is not None:
        # SGLang's measured verify is flat in N within its noise (each program computes 32 rows whatever N is)
        slack = 0.05 if kernel == "sglang" else 1e-9
        for c in (4096, 200_000):
            times = [ms(c, 1, n) for n in ((4, 8, 16, 32) if small else (4, 8, 16, 32, 64))]
            assert all(b >= a * (1 - slack) for a, b in zip(times, times[1:])), times
    assert ms(32_768, 8, 4) >= ms(32_768, 1, 4)


def test_the_fixed_part_reproduces_the_measured_step(reference):
    s = reference
    fixed = st.fixed_from(s.target, s.tables, 14.0, 30_000, 1, "test")
    assert st.step(s.target, s.tables, 30_000, 1, fixed).ms == pytest.approx(14.0)
    low = st.fixed_from(s.target, s.tables, 1.0, 30_000, 1, "test")  # below the model's own parts
    assert low.ms == 0 and "exceeds" in low.source
    with pytest.raises(st.StepInputError, match="step_ms"):
        st.fixed_from(s.target, s.tables, 0.0, 30_000, 1, "test")


def test_the_reference_deployment_takes_today_s_fixed_part_and_a_given_step_replaces_it(reference):
    s = reference
    assert s.today is not None and s.fixed is s.today.fixed and s.fixed.ms == s.today.preset.fixed_ms
    given = sw.setup(GPU, MODEL, TP, step_ms=13.0, step_context=16_384)
    assert st.step(given.target, given.tables, 16_384, 1, given.fixed, today=given.today).ms == pytest.approx(13.0)
    assert given.today.fixed is given.fixed
    other = sw.setup("h200", MODEL, TP)  # not a published deployment: no fixed part, lower bounds
    assert other.fixed is st.NO_FIXED and other.today is None


@pytest.mark.parametrize("bad, match", [
    (dict(gpu="a100"), "gpu"), (dict(model="llama"), "model"), (dict(tp=3), "tp"), (dict(quant="fp4"), "quant"),
    (dict(batch=0), "batch"), (dict(draft="medusa"), "draft"), (dict(nodes=(1, 4)), "nodes"),
    (dict(accept_length=2.0), "accept_length"), (dict(step_ms=12.0), "step_context"),
    (dict(draft_ms=-1.0), "draft_ms"), (dict(gpu="b200"), "b200"),
])
def test_setup_refuses_bad_input_by_name(bad, match):
    args = dict(gpu=GPU, model=MODEL, tp=TP) | bad
    with pytest.raises(ValueError, match=match):
        sw.setup(**args)


def test_sweep_best_tree_is_the_fastest_and_break_even_is_a_crossing(reference):
    res = sw.sweep(reference, (4096, 65_536, 262_144))
    assert res["label"] == st.MODEL_LABEL
    for row in res["rows"]:
        for k in sw.KERNELS:
            variants = [v for v in (row["chain"][k], *row["trees"][k].values()) if v["fits"]]
            if variants:
                assert row["best"][k]["tokens_per_s"] == max(v["tokens_per_s"] for v in variants)
            else:
                assert row["best"][k] is None
    assert res["rows"][-1]["best"]["ours"] is None and res["rows"][-1]["best"]["ours-fp8"] is not None
    for k, b in res["break_even"].items():
        if b["status"] == "stops paying":
            c = b["context"]
            below, above = (sw.evaluate(reference, int(x), (k,)) for x in (c * 0.98, c * 1.02))
            assert sw.best(reference, below, k).tokens_per_s > below["no_spec"].tokens_per_s
            assert sw.best(reference, above, k).tokens_per_s < above["no_spec"].tokens_per_s
    assert {i["input"] for i in res["inputs"]} >= {"weight bandwidth", "tensor rate", "acceptance",
                                                  "draft cost", "fixed part per step", "today: MoE efficiency"}
    assert all(i["source"] for i in res["inputs"]) and not [i for i in res["inputs"] if "{" in i["value"]]


def test_measured_acceptance_replaces_the_preset_level():
    s = sw.setup(GPU, MODEL, TP, draft="eagle3-kimi-k26", accept_length=2.8, accept_nodes=4)
    assert sw.spec_step(s, 4096, "ours", 4, chain=True).tokens == pytest.approx(2.8, abs=1e-6)
    assert "measured" in s.acceptance_source
    assert not math.isnan(sw.spec_step(s, 4096, "ours", 16).tokens)


def test_times_measured_here_are_used_and_missing_sglang_rows_fall_back_to_committed():
    grid = kt.committed_grid("cuda")
    fake = {"ceilings": grid.ceilings, "rows": [dict(r, ms=r["ms"] * 2) for r in grid.rows]}  # no SGLang rows
    ours = kt.table("ours", "h200", fake)
    assert not ours.predicted and ours.source == "measured in this run"
    assert ours.ms(1, 32_768, 16, 8) == pytest.approx(2 * kt.tables("h200")["ours"].ms(1, 32_768, 16, 8))
    sglang = kt.table("sglang", "h200", fake)
    assert sglang.source == kt.committed_grid(kt.SGLANG_VERIFY).source


def test_measuring_needs_the_named_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the refusal without one cannot be shown here")
    measured, why = kt.measure_here("rtx-pro-6000", 8, 1)
    assert measured is None and "needs a CUDA GPU" in why
    assert kt.batches_for(1) == (1,) and kt.batches_for(4) == (1, 8)


def test_the_fp8_pool_ratio_comes_from_a_run_made_to_compare_pools():
    """A peer's preset (b12x's) times ours over both pools on its own narrow shapes: the step model's fp8 / bf16 ratio
    reads only the presets made for that comparison."""
    import json

    from kdtree_lab.core.paths import ROOT
    from kdtree_lab.speculate import kernel_times

    ratio, src, n = kernel_times.pool_ratio("cuda")
    assert json.loads((ROOT / src).read_text())["preset"] in kernel_times.POOL_PRESETS and n >= 10 and 0 < ratio < 1.5
    assert "b12x" not in src
