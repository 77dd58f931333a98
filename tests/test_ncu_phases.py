"""scripts/ncu_phases.py groups Nsight Compute's per-SASS warp samples by execution count (CPU)."""

import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ncu_phases  # noqa: E402

HEAD = ('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
        '"stall_long_sb","stall_wait","stall_long_sb (Not Issued)"\n')


def _csv(rows):
    return HEAD + "".join(f'"0x{i:x}","X","{s}","{e}","{lsb}","{w}","0"\n' for i, (s, e, lsb, w) in enumerate(rows))


def test_phases_group_by_execution_count_and_rank_by_samples():
    text = _csv([(10, 8, 6, 4), (30, 8, 20, 10), (5, 1, 5, 0), (0, 0, 0, 0)])
    got = ncu_phases.phases(text)
    assert [(r["executed"], r["instructions"], r["samples"]) for r in got] == [(8, 2, 40), (1, 1, 5), (0, 1, 0)]
    assert abs(got[0]["share"] - 40 / 45) < 1e-12
    assert got[0]["top_stalls"] == "long_sb 26, wait 14" and got[1]["top_stalls"] == "long_sb 5"


def test_cli_reads_gzip_and_refuses_a_missing_file(tmp_path, capsys):
    f = tmp_path / "x.csv.gz"
    f.write_bytes(gzip.compress(_csv([(3, 2, 3, 0)]).encode()))
    assert ncu_phases.main([str(f)]) == 0
    assert "| 2 | 1 | 3 | 100% | long_sb 3 |" in capsys.readouterr().out
    assert ncu_phases.main([str(tmp_path / "missing.csv")]) == 2
    assert "csv: expected an ncu source-page export" in capsys.readouterr().err


def test_instructions_lists_a_loops_body_in_address_order(tmp_path, capsys):
    text = _csv([(10, 8, 6, 4), (0, 1, 0, 0), (30, 8, 20, 10), (5, 9, 0, 5)])
    got = ncu_phases.loop_instructions(text, 8)
    assert [(r["address"], r["executed"], r["samples"]) for r in got] == [("0x0", 8, 10), ("0x2", 8, 30), ("0x3", 9, 5)]
    assert got[1]["top_stalls"] == "long_sb 20, wait 10" and got[2]["top_stalls"] == "wait 5"
    f = tmp_path / "x.csv"
    f.write_text(text)
    assert ncu_phases.main([str(f), "--instructions", "8"]) == 0
    assert "| 0x2 | 8 | 30 | `X` | long_sb 20, wait 10 |" in capsys.readouterr().out
    assert ncu_phases.main([str(f), "--instructions", "100"]) == 2
    assert "--instructions: expected instructions executed at least 100 times" in capsys.readouterr().err
