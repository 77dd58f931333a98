"""The whole notebook sequence under the cpu profile, through the same command `make run` uses."""

import json
import subprocess
import sys

import pytest
import torch


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: run the GPU profile instead")
def test_cpu_profile_runs_every_notebook(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kdtree_lab", "run", "--profile", "cpu", "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    status = {n["notebook"]: n["status"] for n in summary["notebooks"]}
    assert status == {"00_environment": "passed", "01_dtype_audit": "passed", "02_kernel_build": "passed",
                      "04_memory_budget": "passed",
                      "03_eager_parity": "passed-with-skips", "05_cuda_graphs": "passed-with-skips",
                      "06_benchmark": "passed-with-skips", "07_speculation": "passed-with-skips",
                      "08_generation": "passed-with-skips"}
    parity = json.loads((out / "03_eager_parity.json").read_text())
    assert [s["what"] for s in parity["skipped"]] == ["CUDA kernel parity", "cuda over an fp8 pool"]
    assert parity["summaries"]["triton"]["cases"] >= 50 + 16
    assert parity["summaries"]["triton"]["passed"] == parity["summaries"]["triton"]["cases"]
    fp8 = parity["fp8_summaries"]["triton"]  # the twin over an e4m3 pool, scales other than 1
    assert fp8["cases"] >= 12 and fp8["passed"] == fp8["cases"]
    assert (out / "summary.md").read_text().count("|") > 20
    graphs = json.loads((out / "05_cuda_graphs.json").read_text())
    assert all(p["caught"] for p in graphs["plants"]) and graphs["enablement"] is None
    spec = json.loads((out / "07_speculation.json").read_text())  # the reference deployment, from committed results
    assert [s["what"] for s in spec["skipped"]] == ["kernel timing on this GPU"]
    assert spec["kernel_times"] == "committed results" and spec["label"].startswith("model")
    assert {r["context"] for r in spec["sweep"]["rows"]} >= {4096, 262144}
    from kdtree_lab.speculate.presets import published

    assert set(spec["sweep"]["break_even"]) == {"ours", "ours-fp8", "sglang"}
    shown = [p for p in published().values() if p.role in ("today", "historical")]  # superseded tables are not
    assert len(spec["published"]) == len(shown) and all(spec["explanations"].values())
    assert {r["context"] for r in spec["headline"]["rows"]} >= {0, 131072, 262144}
    for png in ("07_headline.png", "07_curves.png", "07_best.png", "07_published.png"):
        assert (out / png).stat().st_size > 10_000
    gen = json.loads((out / "08_generation.json").read_text())  # a short run verified by the fp32 reference
    assert gen["problems"] == [] and all(r["check"]["compared"] == 2 * 24 for r in gen["runs"])
    assert [s["what"] for s in gen["skipped"]] == ["verify paths ours, hook, sglang (our kernel, the SGLang hook, "
                                                  "SGLang's kernel)"]
    assert gen["committed_totals"]["unexplained"] == 0 and gen["committed_totals"]["compared"] >= 2048
    for png in ("08_margins.png", "08_speed.png"):
        assert (out / png).stat().st_size > 10_000
    for nb in status:
        assert (out / f"{nb}.ipynb").exists() and (out / f"{nb}.json").exists()
    check_clean(out, status)


def check_clean(out, status):
    """What a person sees in the executed notebooks: one line per progress loop with its final count, a sentence
    where a part was skipped, no stray return values, no exponents or None in tables, no stale widget; and
    index.html linking every notebook's HTML page with its status."""
    import re

    import nbformat

    index = (out / "index.html").read_text()
    for nb, st in status.items():
        assert f'data-notebook="{nb}" data-status="{st}"' in index and f'href="{nb}.html"' in index, nb
        assert (out / f"{nb}.html").stat().st_size > 10_000, nb
        cells = [c for c in nbformat.read(out / f"{nb}.ipynb", as_version=4).cells if c.cell_type == "code"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        texts = ["".join(o.get("text", "")) if o.output_type == "stream" else
                 "".join(o.get("data", {}).get("text/markdown", "")) for o in outputs]
        assert not [o for o in outputs if o.output_type == "execute_result" and
                    "PosixPath" in o["data"].get("text/plain", "")], nb
        assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})], nb
        assert not [t for t in texts if "\r" in t], f"{nb}: a progress bar stored frame by frame"
        tables = [ln for t in texts for ln in t.splitlines() if ln.startswith("|")]
        assert not [ln for ln in tables if re.search(r"\d[eE][+-]\d|\| None \|", ln)], nb
        results = json.loads((out / f"{nb}.json").read_text())
        for s in results["skipped"]:
            assert f"Skipped on this machine: {s['what']}." in "\n".join(texts), (nb, s)
        assert f"Results written to {out / nb}.json" in texts[-1], nb
    lines = [ln for o in nbformat.read(out / "03_eager_parity.ipynb", as_version=4).cells if o.cell_type == "code"
             for x in o.get("outputs", []) if x.output_type == "stream" for ln in "".join(x["text"]).splitlines()
             if ln.startswith("parity triton:")]
    assert len(lines) == 2 and all(re.match(r"parity triton: (\d+)/\1 cases in [\d.,]+ s$", ln) for ln in lines), lines
