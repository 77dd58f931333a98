"""scripts/second_term_share.py (CPU): its model of the e4m3 forms' rounding puts main's error below SGLang's and
the one-term form's near it, error grows as steps leave the second term, and the result names every share."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import second_term_share  # noqa: E402


def test_error_grows_with_the_steps_left_in_one_term(tmp_path):
    out = tmp_path / "s.json"
    assert second_term_share.main(["--out", str(out), "--cases", "20", "--seed", "3"]) == 0
    rows = json.loads(out.read_text())["summary"]
    assert [r["steps_one_term"] for r in rows] == [0, 2, 3, 4, 6, 18]
    medians = [r["median"] for r in rows]
    assert medians == sorted(medians), medians
    assert medians[-1] - medians[0] > 0.2 and 0.8 < medians[-1] < 1.3, medians  # one term near SGLang, main below


def test_one_case_is_exact_where_q_is_exact():
    import torch

    gen = torch.Generator().manual_seed(0)
    r = second_term_share.case_ratios(gen, keys=64, rows=4, shares=(0.0, 1.0))
    assert set(r) == {0.0, 1.0} and 0 < r[0.0] < r[1.0]
