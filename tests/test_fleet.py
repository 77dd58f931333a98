"""Spreading work over GPUs with Dask distributed, tested on a local cluster of CPU worker processes (the GPU
work itself is tested on GPUs elsewhere; here the Triton twin runs in the CPU interpreter)."""

import os

import pytest

from kdtree_lab.checks import parity
from kdtree_lab.lab import fleet

pytest.importorskip("distributed")


def test_parse_gpus():
    assert fleet.parse_gpus("all", visible=2) == ["0", "1"]
    assert fleet.parse_gpus("1,0", visible=2) == ["1", "0"]
    assert fleet.parse_gpus("cpu:3") == ["cpu0", "cpu1", "cpu2"]
    for bad, msg in (("all", "found none"), ("0,0", "distinct"), ("2", "GPU 2 not found"), ("cpu:0", "cpu:N"),
                     ("x", "expected all")):
        with pytest.raises(fleet.FleetError, match=msg):
            fleet.parse_gpus(bad, visible=0 if bad == "all" else 2)


def test_shard_and_unshard_keep_the_order():
    items = list(range(11))
    shards = fleet.shard(items, 3)
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert fleet.unshard(shards, 11) == items
    assert fleet.unshard([shards[0], [], shards[2]], 11) == [0, 2, 3, 5, 6, 8, 9]


@pytest.mark.slow
def test_parity_sharded_over_two_workers_matches_one_process():
    cases = parity.grid(4, 7, max_prefix=300, max_batch=4, max_draft=8, heads=(2,), budget_tokens=20_000)[:10]
    rep = fleet.parity("triton", cases, ["cpu0", "cpu1"])
    assert rep.complete and [o.gpu for o in rep.outcomes] == ["cpu0", "cpu1"]
    assert [r["name"] for r in rep.rows] == [c.name for c in cases]
    assert {r["gpu"] for r in rep.rows} == {"cpu0", "cpu1"} and all(r["ok"] for r in rep.rows)
    assert rep.rows[0]["gpu"] == "cpu0" and rep.rows[1]["gpu"] == "cpu1"


def _dies_on(label: str, victim: str) -> str:
    if label == victim:
        os._exit(1)  # the worker process dies mid-task
    return f"{label} done"


@pytest.mark.slow
def test_a_lost_worker_is_reported_and_the_others_finish():
    with fleet.cluster(2) as client:
        out = fleet.per_gpu(client, ["cpu0", "cpu1"], _dies_on, [("cpu0", "cpu1"), ("cpu1", "cpu1")])
    assert out[0].value == "cpu0 done" and out[0].error is None
    assert out[1].lost and "worker lost" in out[1].error
    rep = fleet.FleetReport(["cpu0", "cpu1"], out)
    assert not rep.complete and [s["status"] for s in rep.summary()] == ["done", "lost"]


def test_compare_flags_the_odd_gpu():
    rows = [{"notebook": "05", "gpu": g, "status": "passed", "figures": {"graph pool MiB": v, "sizes": 23}}
            for g, v in (("0", 100.0), ("1", 101.0), ("2", 150.0))]
    out = {(r["notebook"], r["figure"]): r for r in fleet.compare(rows)}
    assert out[("05", "graph pool MiB")]["outlier"] and not out[("05", "sizes")]["outlier"]
    assert not out[("05", "status")]["outlier"]
    rows[1]["status"] = "failed"
    assert {(r["notebook"], r["figure"]): r for r in fleet.compare(rows)}[("05", "status")]["outlier"]


@pytest.mark.slow
def test_cli_parity_over_cpu_workers_and_refusals(tmp_path):
    import json
    import subprocess
    import sys

    from kdtree_lab.core.paths import ROOT

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "kdtree_lab", "parity", "--impl", "triton", "--device", "cpu", "--no-edge",
           "--cases", "4", "--max-prefix", "200", "--heads", "2", "--max-draft", "4", "--gpus", "cpu:2", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["complete"] and len(doc["rows"]) == 4 and {r["gpu"] for r in doc["rows"]} == {"cpu0", "cpu1"}
    bad = subprocess.run(cmd[:-3] + ["--gpus", "0,0"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert bad.returncode == 2 and "distinct GPU indices" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_run_per_worker_writes_one_folder_per_gpu_and_a_comparison(tmp_path):
    from kdtree_lab.lab import runner
    from kdtree_lab.lab.profiles import load

    entries = runner.select(runner.manifest(), ["00"])
    rep = fleet.run(entries, load("cpu"), {}, tmp_path, ["cpu0", "cpu1"])
    assert rep.complete and {r["gpu"] for r in rep.rows} == {"cpu0", "cpu1"}
    assert (tmp_path / "gpu-cpu0" / "summary.json").exists() and (tmp_path / "gpu-cpu1" / "summary.json").exists()
    status = [r for r in fleet.compare(rep.rows) if r["figure"] == "status"]
    assert status and not status[0]["outlier"]
