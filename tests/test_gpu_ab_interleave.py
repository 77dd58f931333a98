"""GPU: kdtree_lab.checks.ab_interleave end to end, both sides the process's own library (a build against itself):
the graphs of each side capture and replay in alternating rounds, the two write the same output bits, and the row
holds what the run scripts read. No speed is asserted."""

import json

import pytest

from kdtree_lab.checks import ab_interleave as ab
from kdtree_lab.kernels import loader

pytestmark = pytest.mark.gpu


def test_a_build_against_itself_runs_every_round_and_writes_the_same_bits(tmp_path):
    path = loader.library().path
    libs = ab._sides(path, path)
    row = ab.measure(libs, "cuda", ab.parse_shape("2,300,4,8"), rounds=4, iters=3)
    assert row["identical"] and row["plan_a"] == row["plan_b"]
    assert row["rounds"] == 4 and len(row["round_diffs_us"]) == 4 and 0 <= row["rounds_b_faster"] <= 4
    assert row["median_a_us"] > 0 and row["median_b_us"] > 0
    assert loader._LIBRARY is not None and loader._FORCED is None  # the process library is back, nothing forced
    out = tmp_path / "ab.json"
    assert ab.main(["--lib-a", str(path), "--lib-b", str(path), "--impl", "cuda", "--shape", "1,128,4,8",
                    "--rounds", "2", "--iters", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["complete"] and len(data["rows"]) == 1 and data["rows"][0]["identical"]
