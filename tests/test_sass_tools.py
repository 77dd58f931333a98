"""scripts/sass_identity.py's SASS parser and scripts/sass_census.py's loop census on cuobjdump-shaped text (no GPU,
no nvcc). The parser once kept only instructions at 4-digit addresses, so a kernel's code past 0xffff (the role
split's PV loop) was compared by half its encoding; a function's every instruction must come through."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import sass_census  # noqa: E402
import sass_identity  # noqa: E402

SASS = """
	code for sm_90a
		Function : _Z3fooPf
	.headerflags	@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*fff0*/                   MOV R1, c[0x0][0x28] ;                     /* 0x00000a0000017a02 */
                                                                              /* 0x000fe40000000f00 */
        /*10000*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;     /* 0x0000000c0804723c */
                                                                              /* 0x000fe20000041804 */
        /*10010*/                   LDSM.16.M88.4 R8, [R2] ;                  /* 0x000000000208783b */
                                                                              /* 0x000e220000000200 */
        /*10020*/                   LDL R3, [R1+0x4] ;                        /* 0x0000040001037983 */
                                                                              /* 0x000ea20000100800 */
        /*10030*/              @!P0 BRA 0x10000 ;                             /* 0xfffffffc00f08947 */
                                                                              /* 0x000fea000383ffff */
        /*10040*/                   EXIT ;                                    /* 0x000000000000794d */
                                                                              /* 0x000fea0003800000 */
		Function : _Z3barv
        /*0000*/                   EXIT ;                                     /* 0x000000000000794d */
                                                                              /* 0x000fea0003800000 */
"""


def test_every_instruction_of_a_function_comes_through_past_0xffff():
    fns = sass_identity.functions(SASS)
    assert set(fns) == {"_Z3fooPf", "_Z3barv"}
    foo = fns["_Z3fooPf"].splitlines()
    assert len(foo) == 12  # six instructions, two encoding lines each
    assert any("/*10030*/" in line and "BRA" in line for line in foo)


def test_the_census_finds_the_mma_loop_and_counts_its_classes():
    ins = sass_census.instructions(sass_identity.functions(SASS)["_Z3fooPf"])
    assert [a for a, _ in ins] == [0xfff0, 0x10000, 0x10010, 0x10020, 0x10030, 0x10040]
    [loop] = sass_census.mma_loops(ins)
    assert loop["start"] == "0x10000" and loop["instructions"] == 4
    assert (loop["MMA"], loop["LDSM"], loop["spill"], loop["global"]) == (1, 1, 1, 0)


def test_an_outer_loop_around_an_inner_mma_loop_is_not_counted_twice():
    outer = SASS.replace("        /*10040*/                   EXIT ;",
                         "        /*10040*/                   BRA 0xfff0 ;")
    loops = sass_census.mma_loops(sass_census.instructions(sass_identity.functions(outer)["_Z3fooPf"]))
    assert [lp["start"] for lp in loops] == ["0x10000"]


def test_the_census_reads_the_stall_ptxas_encoded_after_each_instruction():
    """Bits 41-44 of an instruction's second word: cycles before the warp's next instruction (sm_90a's f16 HMMA gets 6
    a warp's MMA, sm_120a's 15 and a NOP: the pipe's rate per scheduler there)."""
    body = sass_identity.functions(SASS)["_Z3fooPf"]
    stalls = sass_census.stall_counts(body)
    assert stalls == {0xfff0: 2, 0x10000: 1, 0x10010: 1, 0x10020: 1, 0x10030: 5, 0x10040: 5}
    [loop] = sass_census.mma_loops(sass_census.instructions(body), stalls)
    assert (loop["issue"], loop["mma_stall"]) == (1 + 1 + 1 + 5, 1)
    six = body.replace("0x000fe20000041804", f"{0x000fe20000041804 & ~(0xF << 41) | (6 << 41):#018x}")
    [loop] = sass_census.mma_loops(sass_census.instructions(six), sass_census.stall_counts(six))
    assert (loop["issue"], loop["mma_stall"]) == (6 + 1 + 1 + 5, 6)
    assert "issue" not in sass_census.mma_loops(sass_census.instructions(body))[0]  # no stalls given, none read


def test_the_census_measures_the_longest_chain_of_dependent_mmas():
    body = ["HMMA.16816.F32.BF16 R4, R8, R12, RZ", "HMMA.16816.F32.BF16 R16, R8, R14, RZ",  # two chains start
            "HMMA.16816.F32.BF16 R4, R20, R12, R4", "HMMA.16816.F32.BF16 R16, R20, R14, R16",
            "QMMA.SF.16832.F32.E4M3.E4M3.E8 R4, R24, R12, R4, R0, R0, URZ",  # the first one's third
            "FADD R16, R16, R2",  # a write that ends the second chain
            "HMMA.16816.F32.BF16 R16, R8, R14, R16"]
    assert sass_census.mma_chain(body) == 3
    assert sass_census.mma_chain(body[:2]) == 1  # independent MMAs
    assert sass_census.mma_chain(["HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24"]) == 0  # warpgroup MMAs: not counted
    overlap = ["HMMA.16816.F32.BF16 R4, R8, R12, RZ", "LDS.64 R6, [R2]",  # a load into the accumulator's upper half
               "HMMA.16816.F32.BF16 R4, R8, R12, R4"]
    assert sass_census.mma_chain(overlap) == 1
    kept = ["HMMA.16816.F32.BF16 R4, R8, R12, RZ", "STS.128 [R4], R8", "REDUX.OR UR5, R9",  # no register written
            "ISETP.GE.AND P0, PT, R4, R2, PT", "HMMA.16816.F32.BF16 R4, R8, R12, R4"]
    assert sass_census.mma_chain(kept) == 2


def test_the_load_census_counts_what_a_pass_issues_before_it_waits():
    ins = [(0x100, "LDG.E.64.CONSTANT R20, desc[UR10][R2.64]"), (0x110, "LDG.E.64.CONSTANT R22, desc[UR10][R2.64+0x20]"),
           (0x120, "FMUL R5, R21, R4"),  # the first load's upper register read: the pass waits here
           (0x130, "LDG.E.64.CONSTANT R24, desc[UR10][R2.64+0x40]"), (0x140, "STS.64 [R8], R20"),
           (0x150, "BRA 0x100"), (0x160, "LDGSTS.E.128 [R9], desc[UR10][R2.64]")]
    [loop] = sass_census.load_loops(ins)
    assert (loop["start"], loop["loads"], loop["ahead"]) == ("0x100", 3, 2)
    chase = [(0x100, "LDG.E.64 R20, desc[UR10][R2.64]"), (0x110, "LDG.E R22, desc[UR10][R20.64]"),  # index, then load
             (0x120, "BRA 0x100")]
    assert sass_census.load_loops(chase)[0]["ahead"] == 1
    cold = ins[:6] + [(0x170, "EXIT"), (0x180, "BRA 0x120")]  # code past the exit that branches into the loop
    assert [lp["start"] for lp in sass_census.load_loops(cold)] == ["0x100"]


def test_in_order_ignores_renaming_and_counts_moved_instructions():
    foo = sass_identity.functions(SASS)["_Z3fooPf"]
    renamed = foo.replace("R8", "R9").replace("R12", "R14").replace("P0", "P3").replace("0x4]", "0x8]")
    assert renamed != foo
    assert sass_identity.in_order(foo, renamed) == 1.0
    lines = foo.splitlines()  # two lines an instruction: move the LDSM (instruction 2) before the MOV (instruction 0)
    moved = "\n".join(lines[4:6] + lines[0:4] + lines[6:]) + "\n"
    assert sass_identity.shapes(moved)[0].startswith("LDSM")
    assert sass_identity.in_order(foo, moved) == 5 / 6
    assert sass_identity.in_order(foo, sass_identity.functions(SASS)["_Z3barv"]) == 1 / 6  # only EXIT in common


def _one(instructions: list[tuple[str, int]]) -> str:
    """cuobjdump-shaped text of (instruction, high encoding word) pairs."""
    return "".join(f"/*{16 * i:04x}*/ {t} ;   /* 0x0000000a2500720c */\n/* {hi:#018x} */\n"
                   for i, (t, hi) in enumerate(instructions))


HI = 0x000FE40002FA1270  # a compare's high word: control bits 0x7f2 (stall, yield, scoreboards) above bit 41
REUSE_A = 1 << 58  # its first operand's reuse flag


@pytest.mark.parametrize("after, verdict", [
    ([("ISETP.GT.AND P5, PT, R10, R37, P5", HI), ("@!P5 SEL R3, R3, R37, P5", HI), ("EXIT", HI)], "equivalent"),
    ([("ISETP.LT.AND P5, PT, R37, R10, P5", HI), ("@!P5 SEL R3, R3, R37, P5", HI), ("EXIT", HI)], "equivalent"),
    ([("ISETP.GT.AND P5, PT, R37, R10, P5", HI), ("@!P5 SEL R3, R3, R37, P5", HI), ("EXIT", HI)], "differ"),
    ([("ISETP.GT.AND P5, PT, R10, R37, P5", HI + (1 << 41)), ("@!P5 SEL R3, R3, R37, P5", HI), ("EXIT", HI)],
     "differ"),  # another stall count: another schedule
    ([("ISETP.GT.AND P5, PT, R10, R37, P5", HI), ("@P5 SEL R3, R3, R37, P5", HI), ("EXIT", HI)], "differ"),  # guard
])
def test_a_commuted_compare_and_reuse_hints_are_equivalent_and_nothing_else_is(tmp_path, after, verdict):
    main = _one([("ISETP.LT.AND P5, PT, R37.reuse, R10, P5", HI | REUSE_A), ("@!P5 SEL R3, R3, R37, P5", HI),
                 ("EXIT", HI)])
    for tree, body in (("a", main), ("b", _one(after))):
        (tmp_path / tree / "sass").mkdir(parents=True)
        (tmp_path / tree / "sass" / "sm_90a._Z3foov.sass").write_text(body)
        (tmp_path / tree / "ptxas.log").write_text("ptxas info    : Compiling entry function '_Z3foov' for 'sm_90a'\n"
                                                   "ptxas info    : Used 40 registers\n")
    r = sass_identity.compare(tmp_path / "a", tmp_path / "b")
    assert r["kernels"][0]["equivalent"] == (verdict == "equivalent") and not r["kernels"][0]["identical"]
    assert r["differ"] == (verdict == "differ")
    if verdict == "equivalent":  # the same code under another register budget is another kernel
        (tmp_path / "b" / "ptxas.log").write_text((tmp_path / "b" / "ptxas.log").read_text().replace("40", "48"))
        assert sass_identity.compare(tmp_path / "a", tmp_path / "b")["differ"] == 1


@pytest.mark.parametrize("text, canonical", [
    ("ISETP.GE.U32.AND P0, PT, R4, R5, PT", "ISETP.LE.U32.AND P0, PT, R5, R4, PT"),
    ("FSETP.GTU.FTZ.AND P1, PT, -R2, |R3|, PT", "FSETP.LTU.FTZ.AND P1, PT, |R3|, -R2, PT"),
    ("FSETP.NEU.FTZ.AND P2, PT, R7, -INF , PT", "FSETP.NEU.FTZ.AND P2, PT, R7, -INF, PT"),
    ("ISETP.GT.U32.AND.EX P0, PT, R1, R2, PT, P1", "ISETP.GT.U32.AND.EX P0, PT, R1, R2, PT, P1"),  # a chain: kept
    ("HSETP2.GT.AND P0, P1, R1, R2, PT", "HSETP2.GT.AND P0, P1, R1, R2, PT"),  # two halves: not swapped
])
def test_only_two_operand_compares_of_one_value_are_commuted(text, canonical):
    assert sass_identity.canonical(_one([(text, HI)])) == [f"{canonical} [0x7f2]"]


def test_build_without_cuobjdump_stops_in_one_line_before_nvcc(tmp_path, monkeypatch):
    """A machine without cuobjdump (the triton wheel's is found only from the venv) is told so before nvcc runs,
    not by a TypeError after minutes of it."""
    monkeypatch.setattr(sass_identity, "find_cuda_tool", lambda name: None)
    monkeypatch.setattr(sass_identity.subprocess, "run", lambda *a, **k: pytest.fail("nvcc ran"))
    with pytest.raises(SystemExit) as e:
        sass_identity.build(tmp_path / "out", tmp_path, timing=False)
    assert "expected nvcc and cuobjdump" in str(e.value) and "cuobjdump=None" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_the_timeline_shows_a_load_sunk_past_the_waits_in_program_order():
    """The read the e4m3-64-q-early experiment rests on: the loads' place among the cp.async wait, the named barrier
    and the mbarrier wait, with runs of one kind collapsed and each barrier its own row."""
    text = _one([("LDGSTS.E.BYPASS.128 [R0+0xd800], desc[UR20][R2.64+0x400]", HI),
                 ("LDGSTS.E.BYPASS.128 [R0+0xda00], desc[UR20][R2.64+0x600]", HI), ("LDGDEPBAR", HI),
                 ("DEPBAR.LE SB0, 0x0", HI), ("BAR.SYNC.DEFER_BLOCKING 0x4, 0x80", HI),
                 ("SYNCS.PHASECHK.TRANS64.TRYWAIT P6, [UR11+0x18420], R7", HI),
                 ("@P1 LDG.E.CONSTANT R20, desc[UR20][R4.64]", HI), ("LDG.E.CONSTANT R22, desc[UR20][R2.64+0x10]", HI),
                 ("HMMA.16816.F32.BF16 R4, R20, R12, R4", HI), ("LDG.E.128 R8, desc[UR4][R6.64]", HI),
                 ("LDG.E.64 R2, desc[UR4][R2.64]", HI), ("SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R10+URZ+0x17c38], RZ", HI),
                 ("BAR.SYNC.DEFER_BLOCKING 0x0", HI), ("BAR.SYNC.DEFER_BLOCKING 0x0", HI), ("EXIT", HI)])
    rows = sass_census.timeline(sass_census.instructions(text))
    assert [(r["event"], r["count"]) for r in rows] == [
        ("cp.async", 2), ("cp.async commit", 1), ("cp.async wait", 1), ("bar.sync 0x4, 0x80", 1), ("mbarrier wait", 1),
        ("LDG.32.nc", 2), ("MMA", 1), ("LDG.128", 1), ("LDG.64", 1), ("mbarrier arrive", 1), ("bar.sync 0x0", 1),
        ("bar.sync 0x0", 1), ("EXIT", 1)]
    assert rows[5]["start"] == hex(16 * 6)


def test_the_budget_sums_a_schedulers_mmas_and_other_instructions_over_its_warps():
    """GH100's usual measured issue (data/results/h100/2026-12-07-mma-issue-and-one-term/): 6 cycles a MMA, plus about
    one an other instruction; NOPs are the MMA's own interval, a skipped rescale's FMULs are left out on request, and
    so is a range of code the steady state does not run (`skip=`), each of its instructions by its class."""
    rows = [{"start": "0x100", "end": "0x230", "instructions": 20, "MMA": 8, "NOP": 2, "FMUL": 3},
            {"start": "0x400", "end": "0x5d0", "instructions": 30, "MMA": 4, "NOP": 1, "FMUL": 10}]
    b = sass_census.budget(rows, "0x100:1,0x400:2:nofmul", "sm_90a")
    assert b == {"mmas": 8 + 2 * 4, "others": (20 - 8 - 2) + 2 * (30 - 4 - 1 - 10), "mma_cycles": 16 * 6,
                 "serial": 16 * 6 + 40}
    assert sass_census.budget(rows, "0x400:1", "sm_120a")["mma_cycles"] == 4 * 16
    assert sass_census.budget(rows, "0x400:1", "sm_90a")["others"] == 30 - 4 - 1  # its FMULs counted unless nofmul
    ins = [(0x410, "FMUL R1, R2, R3"), (0x420, "IADD3 R4, R5, R6, RZ"), (0x430, "HMMA.16816.F32 R8, R12, R16, R8"),
           (0x440, "NOP"), (0x110, "IADD3 R4, R5, R6, RZ")]  # the last outside the skipped loop's range
    skipped = sass_census.budget(rows, "0x400:1:nofmul:skip=0x410-0x440", "sm_90a", ins)
    assert skipped["mmas"] == 4 - 1 and skipped["others"] == (30 - 4 - 1 - 10) - 1  # the FMUL not taken off twice
    assert sass_census.budget(rows, "0x400:1:skip=0x410-0x420+0x440-0x440", "sm_90a", ins)["others"] == 30 - 4 - 1 - 2
    for bad in ("0x101:1", "0x100", "0x100:1:fmul", "0x100:x", "zz:1", "0x100:0", "0x100:-1", "0x100:1,0x100:1",
                "0x100:1:skip=0x10", "0x100:1:skip=0x10-zz"):
        with pytest.raises(ValueError, match="--budget"):
            sass_census.budget(rows, bad, "sm_90a")
