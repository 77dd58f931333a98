"""The phase clocks (kernels/common/phase.cuh, kdtree_lab.checks.phase_clocks) without a GPU: the Python reader holds
the header's layout, splits a synthetic call as documented, and refuses a library or an environment without them."""

import json
import re

import numpy as np
import pytest

from kdtree_lab.checks import phase_clocks as pc
from kdtree_lab.core.paths import KERNELS

HEADER = (KERNELS / "common" / "phase.cuh").read_text()


def test_the_reader_holds_the_headers_marks_and_sizes():
    enum = HEADER.split("enum PhaseMark : int {", 1)[1].split("};", 1)[0]
    names = re.findall(r"(?m)^\s*PH_(\w+)", enum)
    assert names[-1] == "MARKS" and [n.lower() for n in names[:-1]] == list(pc.MARKS)
    sizes = dict(re.findall(r"(PHASE_\w+) = (\d+)", HEADER))
    assert (int(sizes["PHASE_CTAS"]), int(sizes["PHASE_WARPS"]), int(sizes["PHASE_KERNELS"])) == \
        (pc.PHASE_CTAS, pc.PHASE_WARPS, pc.PHASE_KERNELS)
    assert "stamp[PHASE_KERNELS][PHASE_CTAS][PHASE_WARPS][PH_MARKS]" in HEADER and "meta[PHASE_CTAS][4]" in HEADER


GHZ = 2.0  # the synthetic SM clock: cycles = 2 x ns


def _stamp(s, kernel, cta, warps, mark, ns):
    for w in warps:
        s.stamps[kernel, cta, w, pc.MARKS.index(mark)] = (int(ns * GHZ) + 7, ns)  # cycles offset per SM: cancels


def _synthetic():
    """Grid (1, 3, 1): split 0 a prefix CTA of 8 warps (4 tiles), split 1 empty, split 2 the draft block; a combine
    CTA of 4 warps. Times in ns from t0 = 10,000."""
    s = pc.decode(np.zeros(pc.buffer_bytes(), np.uint8))
    t0 = 10_000
    _stamp(s, 0, 0, range(8), "entry", t0)
    _stamp(s, 0, 0, range(8), "work", t0 + 800)
    _stamp(s, 0, 0, range(8), "ready", t0 + 900)
    _stamp(s, 0, 0, range(4), "prologue", t0 + 2500)
    _stamp(s, 0, 0, [3], "prologue", t0 + 2600)  # the QK group's last warp decides its time
    _stamp(s, 0, 0, range(4, 8), "prologue", t0 + 1100)
    _stamp(s, 0, 0, range(4), "first", t0 + 2700)
    _stamp(s, 0, 0, range(4, 8), "first", t0 + 3900)
    _stamp(s, 0, 0, range(8), "loop", t0 + 7000)
    _stamp(s, 0, 0, range(8), "done", t0 + 8000)
    s.meta[0] = (5, 4, 0, 1)
    _stamp(s, 0, 1, range(8), "entry", t0 + 300)  # empty split: entry only
    _stamp(s, 0, 2, range(8), "entry", t0 + 100)
    _stamp(s, 0, 2, range(8), "work", t0 + 900)
    _stamp(s, 0, 2, range(4), "prologue", t0 + 2100)  # the draft block's roles (the bf16 role split's marks)
    _stamp(s, 0, 2, range(4, 8), "prologue", t0 + 1300)
    _stamp(s, 0, 2, range(4), "loop", t0 + 6100)
    _stamp(s, 0, 2, range(4, 8), "loop", t0 + 7100)
    _stamp(s, 0, 2, range(8), "done", t0 + 9100)
    s.meta[2] = (7, 1, 1, 1)
    _stamp(s, 1, 0, range(4), "entry", t0 + 4000)
    _stamp(s, 1, 0, range(4), "prologue", t0 + 9300)
    _stamp(s, 1, 0, range(4), "done", t0 + 10_500)
    _stamp(s, 2, 0, range(6), "entry", t0 - 1500)  # the Q pass, before the split kernel
    _stamp(s, 2, 1, range(6), "entry", t0 - 1400)
    _stamp(s, 2, 1, range(6), "done", t0 + 1200)
    return s


def test_a_synthetic_call_splits_as_documented():
    out = pc.summarize(_synthetic(), (1, 3, 1))
    assert out["sm_clock_ghz"] == pytest.approx(GHZ)
    assert (out["clock_ctas"], out["timer_step_ns"]) == (2, 100)  # the empty CTA spans nothing
    assert out["prefix.qk.prologue.median_timer_us"] == pytest.approx(2.6)
    assert pc.summarize(_synthetic(), (1, 3, 1), ghz=1.0)["prefix.qk.prologue.median_us"] == pytest.approx(5.2)
    assert (out["ctas"], out["prefix.ctas"], out["draft.ctas"], out["empty.ctas"]) == (3, 1, 1, 1)
    assert out["prefix.tiles.median"] == 4
    assert out["prefix.qk.prologue.median_us"] == pytest.approx(2.6)
    assert out["prefix.pv.prologue.median_us"] == pytest.approx(1.1)
    assert out["prefix.pv.first.max_us"] == pytest.approx(3.9)
    assert out["prefix.qk.loop.median_us"] == pytest.approx(7.0)
    assert out["prefix.qk.tile0.median_us"] is None  # never stamped
    assert out["draft.done_us"] == pytest.approx(9.0)  # from the draft CTA's own entry (t0 + 100)
    assert (out["draft.qk.prologue_us"], out["draft.pv.prologue_us"]) == (pytest.approx(2.0), pytest.approx(1.2))
    assert (out["draft.qk.loop_us"], out["draft.pv.loop_us"]) == (pytest.approx(6.0), pytest.approx(7.0))
    assert out["draft.qk.first_us"] is None  # never stamped
    assert out["split.entry_spread_us"] == pytest.approx(0.3)
    assert out["split.end_us"] == pytest.approx(9.1)
    assert (out["split.last_cta"], out["split.last_cta_y"], out["split.last_cta_draft"]) == (2, 2, 1)
    assert out["combine.entry_us"] == pytest.approx(4.0)
    assert out["combine.wait_done_us"] == pytest.approx(9.3)
    assert out["combine.end_us"] == pytest.approx(10.5)
    assert (out["qpass.entry_us"], out["qpass.end_us"]) == (pytest.approx(-1.5), pytest.approx(1.2))
    assert out["split.entered_after_qpass"] == 0  # every CTA entered by 0.3 us, before the Q pass ended at 1.2
    assert out["split.entered_after_qpass_end_us"] is None
    text = pc.table(out)
    assert "prologue" in text and "2.60" in text and "SM clock 2.0 GHz over 2 CTAs" in text
    assert "Q pass -1.5 -> 1.2 us" in text
    assert "draft block (QK/PV us): prologue 2.00/1.20, loop 6.00/7.00" in text


def test_the_ctas_that_wait_for_the_q_pass_are_counted():
    """A split CTA entering after the Q pass's end (the empty split, moved to 1.5 us) is counted with its end."""
    s = _synthetic()
    s.stamps[0, 1] = 0
    _stamp(s, 0, 1, range(8), "entry", 10_000 + 1500)
    _stamp(s, 0, 1, range(8), "done", 10_000 + 9600)
    out = pc.summarize(s, (1, 3, 1))
    assert out["split.entered_after_qpass"] == 1
    assert out["split.entered_after_qpass_end_us"] == pytest.approx(9.6)
    s.stamps[2] = 0  # no Q pass: not asked
    out = pc.summarize(s, (1, 3, 1))
    assert (out["split.entered_after_qpass"], out["split.entered_after_qpass_end_us"]) == (None, None)


def test_repeated_calls_take_each_keys_median():
    runs = [{"a": 1.0, "b": None}, {"a": 3.0, "b": 2.0}, {"a": 2.0}]
    assert pc.median_summary(runs) == {"a": 2.0, "b": 2.0}


def test_a_call_without_stamps_is_refused():
    s = pc.decode(np.zeros(pc.buffer_bytes(), np.uint8))
    with pytest.raises(ValueError, match="no CTA of the split kernel"):
        pc.summarize(s, (1, 3, 1))
    with pytest.raises(ValueError, match="expected"):
        pc.decode(np.zeros(10, np.uint8))


class _Lib:
    def __init__(self, size):
        self.size = size

    def kdtree_verify_phase_clocks(self, dst, nbytes, clear):
        return self.size

    def kdtree_verify_strerror(self, code):
        return b"device query failed"


@pytest.mark.parametrize("size, match", [(0, "KDT_PHASE_CLOCKS=1"), (-8, "device query failed"),
                                         (12, "disagree")])
def test_a_library_without_the_clocks_is_named_in_one_line(size, match):
    with pytest.raises(RuntimeError, match=match):
        pc.read(_Lib(size))


def test_the_command_needs_the_phase_library(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("KDT_PHASE_CLOCKS", raising=False)
    assert pc.main(["--out", str(tmp_path / "x.json")]) == 2
    assert "KDT_PHASE_CLOCKS: expected 1" in capsys.readouterr().err
    monkeypatch.setenv("KDT_PHASE_CLOCKS", "1")
    assert pc.main(["--out", str(tmp_path / "x.json"), "--shape", "1,128,4"]) == 2
    assert "--shape: expected B,L,N,H" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_each_shape_is_written_as_it_ends_and_a_failed_one_is_recorded(monkeypatch, tmp_path, capsys):
    """A shape that raises is recorded with its error and the others still run; the file is whole after each."""
    def fake(impl, shape, nsplit, repeats):
        if shape.prefix == 4096:
            raise ValueError("phase clocks: no CTA of the split kernel stamped its entry")
        return {"impl": impl, "kernel": "k", "shape": vars(shape), "nsplit": 1, "grid": [1, 2, 1],
                "median": pc.summarize(_synthetic(), (1, 3, 1))}

    monkeypatch.setenv("KDT_PHASE_CLOCKS", "1")
    monkeypatch.setattr(pc, "measure", fake)
    out = tmp_path / "phase.json"
    assert pc.main(["--shape", "1,128,4,8", "--shape", "1,4096,4,8", "--out", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["complete"] and [("error" in r) for r in data["results"]] == [False, True]
    assert "no CTA of the split kernel" in capsys.readouterr().out


@pytest.mark.parametrize("path, role", [("mma_sync/verify_sm120_e4m3.cuh", "e4m3_qk"),
                                        ("mma_sync/verify_sm120_e4m3.cuh", "e4m3_pv"),
                                        ("mma_sync/verify_sm120_e4m3_32.cuh", "e4m3x32_qk"),
                                        ("mma_sync/verify_sm120_e4m3_32.cuh", "e4m3x32_pv")])
def test_every_role_of_both_e4m3_forms_stamps_each_of_its_marks_once(path, role):
    """Each role function stamps prologue, first, tile0, loop and done once each (the kernel stamps the rest): a
    mark missing in one form would leave its column empty in a device call."""
    src = (KERNELS / path).read_text()
    body = src.split(f"void {role}(", 1)[1].split("\n}\n", 1)[0]
    for mark in ("PROLOGUE", "FIRST", "TILE0", "LOOP", "DONE"):
        assert body.count(f"phase_mark(0, PH_{mark});") == 1, (role, mark)
    kernel = src.split("__global__", 1)[1]
    for mark in ("ENTRY", "WORK", "READY"):
        assert f"phase_mark(0, PH_{mark});" in kernel, mark


def _two_ctas(end_ns_by_sm: dict[int, int], tiles=(4, 4)):
    """Grid (2, 1, 1): two prefix CTAs of 8 warps on the given SMs, each entering at 10,000 ns, tile 0 done 1,000 ns
    later, the loop left 1,000 ns before its end."""
    s = pc.decode(np.zeros(pc.buffer_bytes(), np.uint8))
    for c, ((sm, end), n) in enumerate(zip(end_ns_by_sm.items(), tiles)):
        _stamp(s, 0, c, range(8), "entry", 10_000)
        _stamp(s, 0, c, range(8), "tile0", 11_000)
        _stamp(s, 0, c, range(8), "loop", end - 1_000)
        _stamp(s, 0, c, range(8), "done", end)
        s.meta[c] = (sm, n, 0, 1)
    return s


def test_each_prefix_cta_has_its_row():
    rows = pc.prefix_ctas(_two_ctas({3: 20_000, 9: 14_000}), (2, 1, 1), GHZ)
    assert [(r["cta"], r["sm"], r["x"], r["y"], r["tiles"]) for r in rows] == [(0, 3, 0, 0, 4), (1, 9, 1, 0, 4)]
    assert rows[0]["end_us"] == pytest.approx(10.0) and rows[1]["pv_done_us"] == pytest.approx(4.0)
    assert rows[0]["tile_us"] == pytest.approx((9.0 - 1.0) / 3, abs=1e-3)
    assert rows[1]["tile_us"] == pytest.approx((3.0 - 1.0) / 3, abs=1e-3)
    assert pc.prefix_ctas(_two_ctas({3: 20_000}, tiles=(1,)), (1, 1, 1), GHZ)[0]["tile_us"] is None
    assert pc.prefix_ctas(pc.decode(np.zeros(pc.buffer_bytes(), np.uint8)), (2, 1, 1), GHZ) == []


def test_the_spread_tells_a_slow_place_from_chance():
    grid = (2, 1, 1)
    same = [pc.prefix_ctas(_two_ctas({3: 20_000 + d, 9: 14_000 + d}), grid, GHZ) for d in (0, 100, 300)]
    # three SMs: the correlation needs more than two
    def three(ends):
        s = pc.decode(np.zeros(pc.buffer_bytes(), np.uint8))
        for c, (sm, end) in enumerate(ends.items()):
            _stamp(s, 0, c, range(8), "entry", 10_000)
            _stamp(s, 0, c, range(8), "done", end)
            s.meta[c] = (sm, 4, 0, 1)
        return pc.prefix_ctas(s, (3, 1, 1), GHZ)
    place = pc.spread([three({1: 20_000, 2: 15_000, 3: 14_000}), three({1: 21_000, 2: 15_500, 3: 14_200})])
    assert place["same_sm_r"] > 0.9 and place["slowest_sms"] == [1]
    chance = pc.spread([three({1: 20_000, 2: 14_000, 3: 17_000}), three({1: 14_000, 2: 20_000, 3: 17_000})])
    assert chance["same_sm_r"] < -0.9 and chance["slowest_sms"] == [1, 2]
    out = pc.spread(same)
    assert out["tiles"] == 4 and out["end_us.max"] == pytest.approx(10.1)
    assert out["pair_end_diff_us.median"] == pytest.approx(6.0)  # the two row tiles of split 0 end 6 us apart
    row = {"tiles": 4, "tile_us": 1.0, "sm": 1, "z": 0}
    lone = pc.spread([[row | {"y": 0, "end_us": 5.0}, row | {"y": 1, "end_us": 7.0, "sm": 2}]])
    assert lone["pair_end_diff_us.median"] is None  # two splits of one row tile each: no pair
    assert out["end_us.median"] == pytest.approx(((10.0 + 4.0) / 2 + (10.1 + 4.1) / 2) / 2, abs=0.06)
    assert out["end_over_median"] == pytest.approx(10.1 / 7.1, rel=1e-3)
    assert out["tile_us.max"] == pytest.approx(((20.3 - 1.0 - 11.0) / 1.0) / 3, rel=1e-3)
    assert pc.spread([]) == {}
