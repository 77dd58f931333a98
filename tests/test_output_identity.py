"""kdtree_lab.checks.output_identity: digests of a case's output bits, and the comparison that a kernel change meant
to keep its arithmetic (a new schedule of the same values) must pass. Here on the Triton twin in the CPU
interpreter; the device call digests the CUDA configurations."""

import json

import pytest

from kdtree_lab.checks import output_identity as oi
from kdtree_lab.checks.parity import Case, fp8_cases

CASES = [Case("one", (40,), 4, 2, nsplit=2, seed=3), Case("two", (17, 70), 3, 2, mask="causal", nsplit=3, seed=4)]


@pytest.fixture(scope="module")
def digest_file():
    return {"impl": "triton", "cases": oi.digests("triton", CASES, "cpu")}


def test_the_same_build_gives_the_same_bits(digest_file):
    again = {"impl": "triton", "cases": oi.digests("triton", CASES, "cpu")}
    assert oi.compare(digest_file, again) == []
    assert [r["case"] for r in digest_file["cases"]] == ["one", "two"]
    assert all(r["flags"] == 0 and r["bytes"] > 0 for r in digest_file["cases"])


def test_other_data_gives_other_bits(digest_file):
    moved = {"impl": "triton", "cases": oi.digests("triton", [CASES[0], Case("two", (17, 70), 3, 2, mask="causal",
                                                                               nsplit=3, seed=5)], "cpu")}
    problems = oi.compare(digest_file, moved)
    assert len(problems) == 1 and problems[0].startswith("two: output")


def test_a_different_case_list_or_impl_is_named(digest_file):
    assert oi.compare(digest_file, {**digest_file, "impl": "cuda"})[0] == "impl: triton against cuda"
    fewer = {**digest_file, "cases": digest_file["cases"][:1]}
    assert "not the same list" in oi.compare(digest_file, fewer)[0]


def test_the_command_line_compares_and_exits_nonzero_on_a_difference(digest_file, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(digest_file))
    changed = json.loads(json.dumps(digest_file))
    changed["cases"][1]["flags"] = 4
    b.write_text(json.dumps(changed))
    assert oi.main(["--compare", str(a), str(a)]) == 0
    assert oi.main(["--compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "identical: 0 of 2 cases differ" in out and "DIFFERENT: 1 of 2 cases differ" in out
    assert "two: output" in out and "flags 0 / 4" in out


def test_an_fp8_pool_is_its_own_case_list(digest_file):
    """--kv fp8 takes the same cases over an fp8 pool (what the e4m3 forms read): other names, other bits, and a
    comparison with the bf16 file names the lists as different."""
    fp8 = {"impl": "triton", "cases": oi.digests("triton", fp8_cases(CASES), "cpu")}
    assert [r["case"] for r in fp8["cases"]] == ["one_fp8", "two_fp8"] and all(r["flags"] == 0 for r in fp8["cases"])
    assert {r["sha256"] for r in fp8["cases"]}.isdisjoint(r["sha256"] for r in digest_file["cases"])
    assert "not the same list" in oi.compare(digest_file, fp8)[0]
