"""scripts/ncu_phases.py groups Nsight Compute's per-SASS warp samples by execution count (CPU)."""

import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ncu_phases  # noqa: E402

HEAD = ('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
        '"stall_long_sb","stall_wait","stall_long_sb (Not Issued)"\n')


def _csv_src(rows):
    """The export of (SASS, samples, executed, long_sb, wait) rows."""
    return HEAD + "".join(f'"0x{i:x}","{src}","{s}","{e}","{lsb}","{w}","0"\n'
                          for i, (src, s, e, lsb, w) in enumerate(rows))


def _csv(rows):
    """The export of (samples, executed, long_sb, wait) rows, each instruction's SASS ``X``."""
    return _csv_src([("X", *r) for r in rows])


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


def test_mma_split_parts_a_loop_around_its_mmas(tmp_path, capsys):
    text = _csv_src([("LDSM.16.M88.4 R1, [R2]", 4, 8, 4, 0), ("HMMA.16816.F32 R4, R8, R12, R4", 10, 8, 2, 8),
                     ("FADD R1, R2, R3", 3, 8, 0, 3), ("@P0 HMMA.16816.F32 R4, R8, R12, R4", 6, 8, 0, 6),
                     ("BRA 0x0", 2, 8, 0, 2), ("QMMA.16832.F32.E4M3.E4M3 R4, R8, R12, R4", 5, 1, 0, 5)])
    got = ncu_phases.mma_split(text, 8)
    assert got["parts"] == {"before": {"instructions": 1, "samples": 4}, "mma": {"instructions": 2, "samples": 16},
                            "between": {"instructions": 1, "samples": 3}, "after": {"instructions": 1, "samples": 2}}
    assert got["mma_stalls"] == [("wait", 14), ("long_sb", 2)]
    assert ncu_phases.mma_split(text, 1)["parts"]["mma"] == {"instructions": 1, "samples": 5}
    assert ncu_phases.mma_split(text, 3) is None
    f = tmp_path / "x.csv"
    f.write_text(text)
    assert ncu_phases.main([str(f), "--mma-split", "8"]) == 0
    out = capsys.readouterr().out
    assert "| mma | 2 | 16 | 64% |" in out and "MMA stalls: wait 14 (88%), long_sb 2 (12%)" in out
    assert ncu_phases.main([str(f), "--mma-split", "3"]) == 2
    assert "--mma-split: expected MMAs" in capsys.readouterr().err
