"""The benchmark module's arithmetic (no GPU): floors, roofline fractions, shape grids and the streaming fit."""

import json

import pytest

from kdtree_lab.checks import bench_presets, bench_results, roofline, timing
from kdtree_lab.checks.bench import Timing
from kdtree_lab.checks.roofline import Ceilings, Shape
from kdtree_lab.core.paths import RESULTS

CEIL = Ceilings(copy_gbps=4000.0, gemm_tflops=800.0)


def test_shape_bytes_and_flops():
    s = Shape(2, 1000, 16, 8)
    assert s.kv_bytes == 2 * 1000 * 576 * 2
    assert s.flops == 2.0 * (576 + 512) * 2 * 16 * 8 * (1000 + 16)


def test_timing_row_floor_bound_and_fraction():
    mem = Shape(1, 200_000, 4, 8)  # 1.89 x 32 FLOP/byte: memory-bound at these ceilings
    t_mem = mem.kv_bytes / (CEIL.copy_gbps * 1e9) * 1e3  # ms
    row = Timing("cuda", mem, ms=2 * t_mem, ms_samples=20, nsplit=7, method="graph", kernel="k").row(CEIL)
    assert row["bound"] == "memory" and row["of_roofline"] == pytest.approx(0.5, abs=1e-3)
    assert row["floor_ms"] == pytest.approx(t_mem, rel=1e-3) and row["kernel"] == "k" and row["timing"] == "graph"
    comp = Shape(1, 200_000, 64, 128)
    row = Timing("triton", comp, ms=10.0, ms_samples=20).row(CEIL)
    assert row["bound"] == "compute" and "kernel" not in row
    assert row["TFLOP/s"] == pytest.approx(comp.flops / 1e-2 / 1e12, rel=1e-3)


def test_issue_grid_has_every_shape_once():
    shapes = [s for s, _ in bench_presets.preset("issue")]
    assert len(shapes) == len(set(shapes)) == 4 * 3 * 3 * 3
    assert all("cuda" in impls and "triton" in impls for _, impls in bench_presets.preset("issue"))
    with pytest.raises(ValueError, match="preset"):
        bench_presets.preset("nope")


def test_streaming_fit_recovers_rate_and_fixed_cost():
    """Rows made from t = t0 + bytes / BW give back BW and t0; a series with one length is left out; a series whose
    time grows faster than its bytes gets no negative fixed cost."""
    bw, t0 = 3000e9, 0.025  # bytes per second, ms
    rows = []
    for b, n, h in ((1, 4, 8), (8, 16, 8)):
        for length in (4096, 32_768, 200_000):
            s = Shape(b, length, n, h)
            rows.append({"impl": "cuda", "B": b, "L": length, "N": n, "H": h, "ms": t0 + s.kv_bytes / bw * 1e3})
    for length, ms in ((4096, 0.001), (200_000, 1.0)):  # superlinear: the best line would start below zero
        rows.append({"impl": "cuda", "B": 1, "L": length, "N": 64, "H": 128, "ms": ms})
    rows.append({"impl": "cuda", "B": 48, "L": 200_000, "N": 4, "H": 8, "ms": 1.0})  # one length only
    rows.append({"impl": "triton", "B": 1, "L": 32_768, "N": 4, "H": 8, "ms": 9.0})  # another impl
    fits = bench_results.streaming_fits(rows, {"copy_gbps": 4000.0, "gemm_tflops": 800.0})
    assert [(f["B"], f["N"], f["H"]) for f in fits] == [(1, 4, 8), (1, 64, 128), (8, 16, 8)]
    for f in (fits[0], fits[2]):
        assert f["GB/s"] == pytest.approx(3000, rel=1e-3) and f["of_copy"] == pytest.approx(0.75, abs=1e-3)
        assert f["fixed_us"] == pytest.approx(t0 * 1e3, abs=0.1) and f["worst_misfit"] < 1e-3
    assert fits[1]["fixed_us"] == 0 and fits[1]["worst_misfit"] > 0


def test_timed_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="timing method"):
        timing.timed(lambda i: None, 1, method="wall")


def test_one_token_decode_rows_are_credited_with_one_token():
    shape = roofline.Shape(8, 200_000, 16, 8)
    ceil = {"copy_gbps": 4000.0, "gemm_tflops": 800.0}
    dec, ours = roofline.derived("sglang_decode_1tok", shape, 1.0, ceil), roofline.derived("cuda", shape, 1.0, ceil)
    one = roofline.Shape(8, 200_000, 1, 8, "causal")
    assert dec["work_N"] == 1 and "work_N" not in ours
    assert dec["TFLOP/s"] == round(one.flops / 1e-3 / 1e12, 2) and ours["TFLOP/s"] == round(shape.flops / 1e9, 2)
    assert dec["GB/s"] == ours["GB/s"]  # the same KV is read
    assert dec["bound"] == "memory" and dec["of_roofline"] == round(one.kv_bytes / 4000e9 / 1e-3, 3)


@pytest.mark.parametrize("path", sorted(RESULTS.rglob("bench*.json")), ids=lambda p: str(p.relative_to(RESULTS)))
def test_no_committed_row_claims_more_than_its_roofline(path):
    """Every committed benchmark file as it is: no row above its roofline, every one-token decode row credited with
    one token of work, and nothing left for re-crediting to change."""
    result = json.loads(path.read_text())
    worst = max(result["rows"], key=lambda r: r["of_roofline"])
    assert worst["of_roofline"] <= 1.0, worst
    assert all(r.get("work_N") == 1 for r in result["rows"] if r["impl"] == "sglang_decode_1tok")
    assert bench_results.recredit(result) == 0


def test_summary_is_one_line_per_implementation():
    rows = [{"impl": "cuda", "of_roofline": x, "speedup_vs_sglang_verify": 2.0} for x in (0.2, 0.5, 0.9)]
    rows.append({"impl": "sglang_extend", "of_roofline": 0.1})
    s = bench_results.summary(rows)
    assert [r["impl"] for r in s] == ["cuda", "sglang_extend"]
    assert (s[0]["of roofline: worst"], s[0]["median"], s[0]["best"]) == (0.2, 0.5, 0.9)
    assert s[1]["median speed-up vs SGLang verify"] is None


def test_fp8_shapes_are_credited_with_their_own_bytes():
    bf16, fp8 = Shape(8, 32_768, 4, 16), Shape(8, 32_768, 4, 16, kv="fp8")
    assert fp8.kv_bytes * 2 == bf16.kv_bytes == 8 * 32_768 * 576 * 2 and fp8.flops == bf16.flops
    c = Ceilings(copy_gbps=4000.0, gemm_tflops=700.0)
    row = Timing("cuda_sm120", fp8, 0.1, 5).row(c)
    assert row["kv"] == "fp8" and row["GB/s"] == round(fp8.kv_bytes / 1e-4 / 1e9, 1)
    assert "kv" not in Timing("cuda_sm120", bf16, 0.1, 5).row(c)  # bf16 rows keep the form of earlier results
    assert roofline.work_shape("sglang_decode_1tok", fp8).kv == "fp8"


def test_fp8_preset_pairs_every_shape_over_both_pools():
    items = bench_presets.preset("fp8")
    keys = [(s.batch, s.prefix, s.draft, s.heads) for s, _ in items]
    assert len(items) == 12 and all(keys.count(k) == 2 for k in keys)
    assert {s.kv for s, _ in items} == {"bf16", "fp8"} and all("sglang_extend" in i for _, i in items)
    assert any(s.draft * s.heads <= 64 for s, _ in items) and any(s.draft * s.heads >= 128 for s, _ in items)


def test_hopper_fp8_preset_times_the_default_over_both_pools():
    items = bench_presets.preset("hopper-fp8")
    keys = [(s.batch, s.prefix, s.draft, s.heads) for s, _ in items]
    assert len(items) == 72 and all(keys.count(k) == 2 for k in keys)  # the issue-fp8 rows, over both pools
    assert {s.kv for s, _ in items} == {"bf16", "fp8"} and all(i == ["cuda"] for _, i in items)
    with pytest.raises(ValueError, match="expected one of quick, issue, issue-fp8, hopper-fp8, fp8, chain"):
        bench_presets.preset("hopper")


def test_card_floor_preset_times_the_sm120_forms_over_both_pools_targets_first():
    items = bench_presets.preset("card-floor")
    keys = [(s.batch, s.prefix, s.draft, s.heads) for s, _ in items]
    assert len(items) == 48 and all(keys.count(k) == 2 for k in keys)  # the 24 TP8 / TP4 rows at L >= 32k, twice
    assert min(s.prefix for s, _ in items) == 32_768 and {s.heads for s, _ in items} == {8, 16}
    assert keys[::2][:6] == list(bench_presets.CARD_FLOOR_FIRST)  # issue 52's shapes first: a run cut short keeps them
    for s, impls in items:
        if s.kv == "bf16":
            assert impls == ["cuda_sm120", "cuda_sm120_roles"]
        else:  # the 32-row e4m3 form only where it can be chosen (32 rows and fewer)
            assert impls == ["cuda_sm120_e4m3", *(["cuda_sm120_e4m3_32"] if s.draft * s.heads <= 32 else [])]


def test_card_floor_needs_the_timing_library_only_where_e4m3_mma_is_emulated():
    from kdtree_lab.cli.bench import card_floor_problem

    assert "expected KDT_E4M3_TIMING=1" in card_floor_problem(9, False)  # an H100 / H200: ptxas emulates e4m3
    assert card_floor_problem(9, True) is None and card_floor_problem(12, False) is None  # an sm_120 card: its own


def test_fp8_speedups_pair_rows_over_both_pools_and_summary_keeps_them_apart():
    rows = [{"impl": "cuda_sm120", "B": 1, "L": 200_000, "N": 4, "H": 8, "ms": 0.09, "bound": "memory",
             "of_roofline": 0.5},
            {"impl": "cuda_sm120", "B": 1, "L": 200_000, "N": 4, "H": 8, "kv": "fp8", "ms": 0.05, "bound": "memory",
             "of_roofline": 0.45},
            {"impl": "triton", "B": 1, "L": 200_000, "N": 4, "H": 8, "kv": "fp8", "ms": 0.2, "bound": "memory",
             "of_roofline": 0.1}]
    assert bench_results.fp8_speedups(rows) == [{"impl": "cuda_sm120", "B": 1, "L": 200_000, "N": 4, "H": 8, "bf16 ms": 0.09,
                                         "fp8 ms": 0.05, "bf16 / fp8": 1.8, "bound (fp8)": "memory"}]
    assert [s["impl"] for s in bench_results.summary(rows)] == ["cuda_sm120", "cuda_sm120 (fp8 KV)", "triton (fp8 KV)"]


def test_the_speedup_figure_labels_stay_inside_their_panel_and_apart(tmp_path):
    """06_speedup.png over the committed results (what a CPU run shows): every end-of-line label inside its own
    panel, none overprinting another ("209x"/"199x" once did, and spilled into the next panel), the legend and
    tick labels inside the figure."""
    import matplotlib

    matplotlib.use("Agg")
    from kdtree_lab.checks import bench_results
    from kdtree_lab.core.display import figure_problems
    from kdtree_lab.lab import plots

    rows = bench_results.committed_current()["rows"]
    fig = plots.speedup_vs_length(rows, tmp_path / "06_speedup.png")
    assert figure_problems(fig) == []
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(labels) >= 10 and all(t.endswith("x") for t in labels)
    close = [{"impl": i, "H": 8, "N": 4, "L": length, "speedup_vs_sglang_verify": s * length / 4096}
             for i, s in (("a", 100), ("b", 101), ("c", 99), ("d", 102)) for length in (4096, 200_000)]
    assert figure_problems(plots.speedup_vs_length(close)) == []  # four lines ending within 3%: spread apart
    r = bench_results.committed_current()
    assert figure_problems(plots.roofline(r["rows"], r["ceilings"])) == []
    errors = {i: [{"L_max": 2 ** k, "rel_l2": 1e-4 * (1 + k % 3)} for k in range(18)] for i in ("cuda", "triton")}
    assert figure_problems(plots.parity_errors(errors, 0.02)) == []  # 03_parity_errors.png


def test_figure_problems_finds_text_outside_the_figure_and_overprinted(tmp_path):
    """The check itself: a legend hanging off the figure and two labels on top of each other are both reported."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kdtree_lab.core.display import figure_problems

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2], [1, 2], label="a line with a label long enough to hang off the right edge of a small figure")
    ax.legend(loc="upper left", bbox_to_anchor=(0.5, 1.0))
    ax.annotate("209x", (2, 2), xytext=(4, 0), textcoords="offset points")
    ax.annotate("199x", (2, 1.99), xytext=(4, 0), textcoords="offset points")
    found = figure_problems(fig)
    assert any(p.startswith("legend") and "leaves the figure" in p for p in found), found
    assert "'209x' overlaps '199x'" in found and "annotation '209x' leaves its axes" in found


def test_chain_preset_times_both_peers_beside_ours_on_chains_only():
    items = bench_presets.preset("chain")
    assert len(items) == len(bench_presets.CHAIN_SHAPES) == 7
    assert all(s.mask == "chain" and s.kv == "bf16" for s, _ in items)
    assert all(impls == ["cuda", "sglang_extend", "sglang_verify_mla", "flashmla", "b12x"] for _, impls in items)
    assert (1, 200_000, 4, 8) in [(s.batch, s.prefix, s.draft, s.heads) for s, _ in items]


def test_flashmla_paged_layout_is_the_verify_batch_at_equal_rows():
    """The peer's input: the chain batch's prefix rows (in kv_indices order) then its draft keys, in 64-token pages
    in a random order; FlashMLA's causal decode over it is the verify step's attention (the oracle's)."""
    from kdtree_lab.checks import flashmla
    from kdtree_lab.checks.batch import build_verify_batch
    from kdtree_lab.checks.oracle import compare, reference
    from kdtree_lab.checks.paged import paged_reference

    b = build_verify_batch([130, 1, 64], 4, 8, mask="chain", seed=3)
    p = flashmla.paged(b, seed=1)
    assert p.q.shape == (12, 8, 576) and p.shape == (3, 4, 8) and p.cache.shape[1:] == (64, 1, 576) and p.causal
    assert p.seqlens.tolist() == [134, 5, 68] and p.table.shape == (3, 3)
    used = p.table[0].tolist() + p.table[1, :1].tolist() + p.table[2, :2].tolist()
    assert sorted(used) == list(range(6))
    err = compare(paged_reference(p), reference(b))
    assert err["rel_l2"] < 1e-12 and err["nan"] == 0
    with pytest.raises(ValueError, match="chains"):
        flashmla.paged(build_verify_batch([9], 4, 8, mask="tree", seed=1))
    with pytest.raises(ValueError, match="bf16 cache"):
        flashmla.paged(build_verify_batch([9], 4, 8, mask="chain", kv_dtype="fp8"))


@pytest.mark.parametrize("peer, module, error", [
    ("flashmla", "flash_mla", OSError("libtorch_cuda.so: undefined symbol: _ZN3c10xyz")),
    ("b12x", "b12x", ModuleNotFoundError("No module named 'cutlass'")),
])
def test_a_peer_that_does_not_import_reports_the_exact_error(monkeypatch, peer, module, error):
    import builtins
    import importlib

    loader = importlib.import_module(f"kdtree_lab.checks.{peer}")
    real = builtins.__import__

    def fake(name, *a, **kw):
        if name == module or name.startswith(module + "."):
            raise error
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    assert loader.load() == (None, f"{type(error).__name__}: {error}")


def test_the_paged_layout_refuses_what_it_cannot_lay_out():
    """V is read as the first 512 of each cached key record, and padded requests have no place in the pages."""
    from kdtree_lab.checks.batch import build_verify_batch
    from kdtree_lab.checks.paged import paged

    with pytest.raises(ValueError, match=r"v_extend: .* found a v_extend that is not k_extend\[..., :512\]"):
        paged(build_verify_batch([9, 4], 4, 8, mask="chain", seed=1, v_extend_from_k=False), 1)
    with pytest.raises(ValueError, match="live_bs: .* takes no padded requests, found 2 live of 4"):
        paged(build_verify_batch([9, 4], 4, 8, mask="chain", seed=1, variant="capture", padded_bs=4), 1)


def test_sglangs_chain_verify_kernel_is_not_handed_a_tree():
    from kdtree_lab.checks import sglang_kernels
    from kdtree_lab.checks.batch import build_verify_batch

    with pytest.raises(ValueError, match="chains \\(topk 1\\) only"):
        sglang_kernels.verify_shared_kv(build_verify_batch([9], 4, 8, mask="tree", seed=1))


def test_b12x_layout_is_the_verify_batch_in_token_pages_and_over_fp8_writes_the_draft_keys_as_e4m3():
    """b12x's input: page size 1 (SGLang's token pool) by default or a multiple of 16; the fp64 attention over the
    layout is the oracle's over a bf16 pool; over an fp8 pool the draft keys enter the cache as e4m3 at k_scale (K and
    V share it), so that attention moves from the oracle's by e4m3's rounding of 4 of 134 keys and no more."""
    import torch

    from kdtree_lab.checks import b12x
    from kdtree_lab.checks.batch import build_verify_batch
    from kdtree_lab.checks.oracle import compare, reference
    from kdtree_lab.checks.paged import paged_reference

    b = build_verify_batch([130, 1, 64], 4, 8, mask="chain", seed=3)
    for page in (1, 16):
        p = b12x.paged(b, page=page, seed=2)
        assert p.page == page and p.seqlens.tolist() == [134, 5, 68]
        assert p.table.shape == (3, -(-134 // page)) and p.causal
        assert compare(paged_reference(p), reference(b))["rel_l2"] < 1e-12
        assert compare(b12x.reference(p), reference(b))["rel_l2"] < 1e-12  # bf16: no rounding of Q
    with pytest.raises(ValueError, match="pages of 1 or a multiple of 16 tokens, found 8"):
        b12x.paged(b, page=8)
    with pytest.raises(ValueError, match="custom_mask: b12x's dense MLA serves causal rows"):
        b12x.paged(build_verify_batch([9], 4, 8, mask="tree", seed=1))
    f = build_verify_batch([130, 1, 64], 4, 8, mask="chain", seed=3, kv_dtype="fp8", k_scale=0.5, v_scale=0.5)
    p = b12x.paged(f, seed=2)
    assert p.cache.dtype == torch.float8_e4m3fn and p.scale == 0.5
    own = p.cache[p.table[0, 130:134].long()].reshape(4, -1).float() * 0.5
    assert torch.allclose(own, f.k_extend[:4, 0].float(), rtol=2 ** -4, atol=2 ** -9)  # e4m3: 3 mantissa bits
    err = compare(paged_reference(p), reference(f))
    assert 0 < err["rel_l2"] < 0.05
    q_err = compare(b12x.reference(p), paged_reference(p))  # Q rounded to e4m3, as b12x rounds it
    assert 0 < q_err["rel_l2"] < 0.1


def test_b12x_preset_pairs_b12x_with_ours_on_chains_of_1_to_8_over_both_pools():
    from kdtree_lab.checks.bench_presets import preset

    items = preset("b12x")
    shapes = {(s.batch, s.prefix, s.draft, s.heads, s.kv) for s, _ in items}
    assert len(items) == len(shapes) == 72
    assert {s.draft for s, _ in items} == {1, 4, 8} and {s.heads for s, _ in items} == {8, 16}
    assert {s.prefix for s, _ in items} == {4096, 32_768, 200_000} and {s.batch for s, _ in items} == {1, 8}
    for s, impls in items:
        assert impls[0] == "cuda" and impls[-2:] == ["b12x", "b12x_p64"] and s.mask == ("chain" if s.draft > 1 else "causal")
        assert ("cuda_sm120_e4m3_32" in impls) == (s.kv == "fp8" and s.draft * s.heads <= 32)
        assert ("cuda_sm120_roles" in impls) == (s.kv == "bf16")
