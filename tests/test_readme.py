"""The README and docs/: the two set-up commands, a table of contents that matches, generated tables equal to what
the committed results give today, the results index naming every folder, the CPU times the manifest holds, and
none of the statements that went stale."""

import importlib.util
import json
import re

import pytest
import yaml

from kdtree_lab.core.paths import NOTEBOOKS, RESULTS, ROOT

_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)
BLOCKS, FILES, render = readme_tables.BLOCKS, readme_tables.FILES, readme_tables.render
import docs_tables.rtx as rtx_tables  # noqa: E402  (readme_tables put scripts/ on sys.path)
import docs_tables.card_floor as card_floor_tables  # noqa: E402
import docs_tables.runs as runs_of_record  # noqa: E402
README = (ROOT / "README.md").read_text()
DOCS = {p.name: p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}


def test_readme_has_exactly_two_setup_commands():
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", README, re.S).group(1)
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.split("#")[0].strip()]
    assert commands == ["make run", "make test"]


def test_readme_table_of_contents_matches_its_sections():
    headings = re.findall(r"(?m)^## (.+)$", README)
    assert headings[0] == "Contents"
    toc = re.findall(r"(?m)^- \[(.+?)\]\(#([\w-]+)\)$", README.split("## Contents", 1)[1].split("\n## ", 1)[0])
    assert [t for t, _ in toc] == headings[1:]
    for title, anchor in toc:  # GitHub's anchors: lower case, spaces to hyphens, punctuation dropped
        assert anchor == re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"), (title, anchor)
    assert len(README.splitlines()) < 260, "the README is for a newcomer: the depth belongs in docs/"


def test_docs_tables_are_generated_from_committed_results():
    for path in FILES:  # README.md and the docs pages with generated blocks
        text = path.read_text()
        assert render(text) == text, f"{path.name} is stale: run python scripts/readme_tables.py"
        for name in BLOCKS:
            assert f"<!-- BEGIN {name} -->\n<!-- END {name} -->" not in text, f"{path.name}: empty {name} block"
    where = {"README.md": ("headline", "rtx_headline"),
             "results.md": ("current", "sm120", "sm120_targets", "rtx_prediction", "card_model", "sm120_checks"),
             "kernels.md": ("configs",), "performance.md": ("floors", "sm120_fp8", "issue18_targets", "xqa_peer",
                                                         "issue52_targets", "issue52_h100"),
             "performance-history.md": ("versions", "v5", "targets", "fixed_cost"),
             "speculation.md": ("speculation",)}
    for page, names in where.items():
        text = README if page == "README.md" else DOCS[page]
        assert all(f"<!-- BEGIN {name} -->" in text for name in names), page
    assert {p.name for p in FILES} >= {"README.md", *(n for n in where if n != "README.md")}


def test_the_current_defaults_table_follows_the_default():
    """The docs' main table is of the kernel `cuda` selects on the H200 today, and the headline sentence names it."""
    from kdtree_lab.checks.bench_results import committed_grid
    from kdtree_lab.kernels.launch_plan import AUTO_CONFIGS

    grid = committed_grid("cuda")
    assert {r["kernel"] for r in grid.rows} == {AUTO_CONFIGS[0].config.name}  # v5: the first automatic choice
    assert f"`{AUTO_CONFIGS[0].config.name}`" in README and grid.source in DOCS["results.md"]


def test_the_rtx_predictions_follow_the_per_shape_choice(monkeypatch):
    """Each row of the RTX prediction table is what the launcher selects on those cards for that shape and pool (the
    first sm_120 kernel at 32 rows and fewer, the second generation above; over fp8 the e4m3 configurations, the
    32-row form and the 64-row one), timed in the newest committed grid holding its rows; a configuration sm_120 selects whose rows
    no committed grid holds is refused."""
    from kdtree_lab.budget.presets import gpus

    card = gpus()["rtx-pro-6000"]
    runs = {k: readme_tables.sm120_impl(k, card) for k in runs_of_record.SM120_SHAPES}
    assert runs == {k: "cuda_sm120" if k[2] * k[3] <= 32 else "cuda_sm120_roles" for k in runs}
    table = rtx_tables.rtx_prediction_table()
    fp8 = {"cuda_sm120": "cuda_sm120_e4m3_32", "cuda_sm120_roles": "cuda_sm120_e4m3"}
    for (b, length, n, h), impl in runs.items():
        assert re.search(rf"(?m)^\| {b}, {length}, {n}, {h} \| `{impl}` / `{fp8[impl]}` \|", table), (b, length, n, h)
    real = rtx_tables.grid_rows

    def no_roles(impl, kv="bf16"):
        if impl == "cuda_sm120_roles":
            raise LookupError("impl cuda_sm120_roles: no committed issue grid holds its rows")
        return real(impl, kv)

    monkeypatch.setattr(rtx_tables, "grid_rows", no_roles)
    with pytest.raises(ValueError, match="no committed issue grid holds the rows of cuda_sm120_roles, which sm_120 "
                                         "selects"):
        rtx_tables.rtx_prediction_table()


def test_the_h100_table_has_a_row_per_grid_call_and_refuses_what_it_cannot_read(tmp_path, monkeypatch):
    """Issue 52's H100 table: one row per committed card-floor grid, oldest first, with the fixed cost run beside it
    (or "no run"); a grid lacking a shape the targets read, a fixed-cost run under another carveout than its name or
    off the timing library, and another GPU's grid are refused by folder."""
    calls = sorted((f.parent for f in (RESULTS / "h100").rglob("bench-card-floor.json")),
                   key=lambda c: json.loads((c / "bench-card-floor.json").read_text())["provenance"]["date_utc"])
    table = card_floor_tables.issue52_h100_table()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert calls and [r.split("`")[1] for r in rows] == [str(c.relative_to(RESULTS / "h100")) for c in calls]
    src = calls[-1]
    grid = json.loads((src / "bench-card-floor.json").read_text())
    monkeypatch.setattr(card_floor_tables, "RESULTS", tmp_path)

    def one(grid: dict, fixed: dict | None = None) -> str:
        folder = tmp_path / "h100" / "x"
        folder.mkdir(parents=True, exist_ok=True)
        for f in folder.iterdir():
            f.unlink()
        (folder / "bench-card-floor.json").write_text(json.dumps(grid))
        for name, data in (fixed or {}).items():
            (folder / name).write_text(json.dumps(data))
        return card_floor_tables.issue52_h100_table()

    driver = json.loads((src / "fixed-cost-driver.json").read_text())
    assert "| no run (no KDT_CARVEOUT=100 run) |" in one(grid)
    assert "(no KDT_CARVEOUT=100 run) |" in one(grid, {"fixed-cost-driver.json": driver})
    with pytest.raises(LookupError, match="x/fixed-cost-100.json: expected KDT_CARVEOUT=100, found None"):
        one(grid, {"fixed-cost-driver.json": driver, "fixed-cost-100.json": driver})
    with pytest.raises(LookupError, match="x/fixed-cost-driver.json: its e4m3 rows are the H100's emulation"):
        one(grid, {"fixed-cost-driver.json": {**driver, "timing_library": False}})
    with pytest.raises(LookupError, match="x/bench-card-floor.json: expected an H100 run, found NVIDIA H200"):
        one({**grid, "provenance": {**grid["provenance"], "gpu": "NVIDIA H200"}})
    short = {**grid, "rows": [r for r in grid["rows"] if not (r["impl"] == "cuda_sm120_e4m3" and r["B"] == 1
                                                               and r["N"] == 16 and r["L"] == 200_000 and r["H"] == 8)]}
    with pytest.raises(LookupError, match="x: no cuda_sm120_e4m3 row over fp8"):
        one(short)


def test_issue52_table_and_fp8_sentence_read_one_run_where_a_card_floor_grid_holds_their_rows(monkeypatch):
    """The issue asks for its figures from one run: the newest card-floor grid serves every row it holds (an issue
    grid only the rows it lacks), and the README's fp8 sentence takes both pools from that grid; without one, both
    fall back to the newest issue grids and say so."""
    from kdtree_lab.checks.bench_results import committed_grid
    import docs_tables.fp8 as fp8_tables

    floor = committed_grid("cuda_sm120_e4m3", "fp8", ("card-floor",)).source
    table = card_floor_tables.issue52_targets_table()
    assert f"from `{floor}`" in table and ": one run;" in table
    assert f"both from `{floor}`" in fp8_tables.fp8_headline_sentence()
    src = card_floor_tables._Sources()  # a row the card-floor preset does not time comes from the newest issue grid
    short = (1, 4096, 16, 8)
    assert short not in card_floor_tables.grid_rows("cuda_sm120_roles", "bf16", ("card-floor",))[1]
    row, _ = src.row("cuda_sm120_roles", "bf16", short)
    issue = committed_grid("cuda_sm120_roles", "bf16")
    assert row in issue.rows and list(src.used) == [issue.source]

    real = card_floor_tables.grid_rows

    def no_card_floor(impl, kv="bf16", presets=()):
        if presets == ("card-floor",):
            raise LookupError("no card-floor grid")
        return real(impl, kv, tuple(p for p in presets if p != "card-floor"))

    monkeypatch.setattr(card_floor_tables, "grid_rows", no_card_floor)
    assert floor not in card_floor_tables.issue52_targets_table()
    monkeypatch.setattr(fp8_tables, "_headline_run", lambda: None)
    sentence = fp8_tables.fp8_headline_sentence()
    assert "both from" not in sentence and "the bf16 ones `" in sentence


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_results_index_lists_every_folder(gpu):
    index = (RESULTS / gpu / "README.md").read_text()
    listed = set(re.findall(r"(?m)^\| `([\w.-]+)/` \|", index))
    folders = {p.name for p in (RESULTS / gpu).iterdir() if p.is_dir()}
    assert folders == listed, f"missing from the index: {sorted(folders - listed)}; not on disk: {sorted(listed - folders)}"
    for folder in folders:
        assert list((RESULTS / gpu / folder).glob("README.md")) or "provenance" in index, folder


def test_every_gpu_results_folder_is_indexed():
    assert {p.name for p in RESULTS.iterdir() if p.is_dir()} == {"cpu", "h100", "h200"}


def _readme_seconds(cell: str) -> float:
    m = re.fullmatch(r"([\d.]+) (s|min)", cell.strip())
    assert m, cell
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


def test_readme_cpu_times_are_the_manifests():
    manifest = {e["name"]: e["cpu_minutes"] for e in yaml.safe_load((NOTEBOOKS / "manifest.yaml").read_text())["notebooks"]}
    rows = re.findall(r"(?m)^\| `(\d\d_\w+)` \|.*\| ([^|]+) \|$", README.split("## The notebooks", 1)[1].split("\n## ", 1)[0])
    assert {name for name, _ in rows} == set(manifest)
    for name, cell in rows:
        assert _readme_seconds(cell) == pytest.approx(manifest[name] * 60, rel=0.15, abs=1.5), (name, cell)


@pytest.mark.parametrize("stale", ["loader.default_nsplit", "shared/research", "sm_120 configuration (`cuda_narrow`",
                                   "the sm_120 configuration", "v4 (`cuda`", "kAutoConfigs", "index constant",
                                   "11 minutes on 2 cores"])
def test_no_stale_statement(stale):
    texts = {"README.md": README, **{f"docs/{k}": v for k, v in DOCS.items()}}
    texts |= {str(p.relative_to(ROOT)): p.read_text() for d in ("kdtree_lab", "scripts") for p in (ROOT / d).rglob("*.py")}
    texts |= {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "data" / "presets").glob("*.yaml")}
    hits = [name for name, text in texts.items() if stale in text and name != "tests/test_readme.py"]
    if stale == "index constant":  # "no index constants" is how docs/kernels.md says there are none
        hits = [h for h in hits if "no index constants" not in texts[h]]
    assert not hits, hits


def test_issue52_table_gives_each_cards_prediction_beside_the_h200_figure():
    """Beside the fp8 and bf16 headlines and the 32-row ratios, the card model's prediction for each RTX card from
    the same rows (the terms that bound it named), labelled a prediction; "met" still reads the H200's figure."""
    from kdtree_lab.speculate.card_model import cards, predict, verify_work

    table = card_floor_tables.issue52_targets_table()
    assert "a prediction, no sm_120 card has run these" in table
    runs, src = card_floor_tables._picks(), card_floor_tables._Sources()
    key = card_floor_tables.HEADLINE
    for kv, impl in zip(("bf16", "fp8"), runs[key]):
        ms = src.row(impl, kv, key)[0]["ms"]
        for c in cards().values():
            p = predict(ms, verify_work(impl, *key, kv), c)
            assert f"{c.label} {p.ms:.3f} ms ({p.bound}-bound: bytes {p.bytes_ms:.3f}, MMAs {p.tensor_ms:.3f}" in table
    for c in cards().values():
        cells = []
        for k in card_floor_tables.CHAINS_32:
            (bi, fi), preds = runs[k], []
            for i, kv in ((fi, "fp8"), (bi, "bf16")):
                preds.append(predict(src.row(i, kv, k)[0]["ms"], verify_work(i, *k, kv), c))
            cells.append(f"{preds[0].ms / preds[1].ms:.2f}x (fp8 {preds[0].bound}-bound)")
        assert f"{c.label} " + " / ".join(cells) in table
    assert table.count("**not met**") + table.count("| met |") == 5


def test_a_run_of_record_of_other_kernels_says_so(tmp_path, monkeypatch):
    """The issue-52 table reads a run of record; after a kernel change, until that run is redone, its caption says the
    run's kernels are not the tree's (its build.json's library name against library_name of the tree with the run's
    nvcc and archs), and says nothing where they are."""
    from kdtree_lab.kernels.build import library_name

    monkeypatch.setattr(card_floor_tables, "ROOT", tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    assert card_floor_tables._kernels_then("run/bench-card-floor.json") == ""  # no build.json: nothing to say
    archs, nvcc = ["sm_120a", "sm_90a"], "V13.0.88"
    for lib, stale in ((library_name(archs, nvcc), False), ("libkdtree_verify-0000000000000000.so", True)):
        (run / "build.json").write_text(json.dumps({"build": {"library": f"/x/build/{lib}", "archs": archs,
                                                              "nvcc_version": nvcc}}))
        words = card_floor_tables._kernels_then("run/bench-card-floor.json")
        assert bool(words) == stale and ("libkdtree_verify-0000000000000000 then" in words) == stale
