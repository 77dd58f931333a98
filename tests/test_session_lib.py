"""scripts/session_lib.sh's gate_tests, the piece of every device gate call that runs GPU tests: a per-test log as the
tests run, the XML at the end, and, when the call's time runs out, an interrupted summary of what ran (pytest gets
SIGINT, so it still writes both) rather than nothing. Run here on stand-in tests marked `gpu` that need no GPU."""

import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STAND_IN = '''
import time
import pytest

@pytest.mark.gpu
def test_quick():
    pass

@pytest.mark.gpu
def test_slow():
    time.sleep(float(__import__("os").environ.get("STAND_IN_SLEEP", "0")))

@pytest.mark.gpu
def test_after():
    pass
'''


def _gate(tmp_path, sleep: float, timeout: int) -> tuple[str, str, ET.Element]:
    (tmp_path / "test_stand_in.py").write_text(STAND_IN)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "GATE_TIMEOUT": str(timeout),
           "STAND_IN_SLEEP": str(sleep), "OUT": str(tmp_path / "out")}
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && gate_tests "
                          f"{tmp_path / 'gates-x'} test_stand_in.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout, (tmp_path / "gates-x.log").read_text(), ET.parse(tmp_path / "gates-x.xml").getroot()


def _passed(xml: ET.Element) -> list[str]:
    return [c.get("name") for c in xml.iter("testcase") if len(c) == 0 and c.get("name")]


def test_a_gate_that_finishes_reports_every_test(tmp_path):
    line, log, xml = _gate(tmp_path, sleep=0, timeout=100)
    assert "rc=0" in line and "3 passed" in line
    assert "test_stand_in.py::test_slow PASSED" in log and "INTERRUPTED" not in log
    assert _passed(xml) == ["test_quick", "test_slow", "test_after"]


@pytest.mark.slow
def test_a_gate_past_its_time_says_so_and_keeps_what_ran(tmp_path):
    line, log, xml = _gate(tmp_path, sleep=60, timeout=8)
    assert "rc=124" in line and "INTERRUPTED" in line
    assert "test_stand_in.py::test_quick PASSED" in log and "test_after" not in log
    assert _passed(xml) == ["test_quick"]


@pytest.mark.parametrize("parallel", ["0", "1"])
def test_the_sanitizers_report_one_line_per_tool_in_order(tmp_path, parallel):
    """run_sanitizers against a stand-in compute-sanitizer (it names its tool in an ERROR SUMMARY line, racecheck
    with errors): a log per tool, the summary lines in the tools' order, at once (SANITIZE_PARALLEL=1) or in turn."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"
    fake.write_text('#!/usr/bin/env bash\ntool=$2\nsleep 0.$((RANDOM % 5))\n'
                    '[ "$tool" = racecheck ] && { echo "RACECHECK SUMMARY: 2 hazards"; exit 9; }\n'
                    'echo "$tool ran: $*"; echo "========= ERROR SUMMARY: 0 errors"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SANITIZE_PARALLEL": parallel,
           "OUT": str(tmp_path / "out")}
    tools = "memcheck racecheck synccheck initcheck"
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && "
                          f"run_sanitizers '{tools}' cuda_sm120 {tmp_path} -x"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == tools.split()
    assert "racecheck rc=9 RACECHECK SUMMARY: 2 hazards" in lines
    assert all("rc=0 ========= ERROR SUMMARY: 0 errors" in ln for ln in lines if not ln.startswith("racecheck"))
    assert "--quick" in (tmp_path / "sanitizer-initcheck-x.log").read_text()
    assert "--impl cuda_sm120" in (tmp_path / "sanitizer-memcheck-x.log").read_text()
    assert not list(tmp_path.glob(".sanitizer-*"))


@pytest.mark.parametrize("only", ["", "fp8"])
def test_the_short_calls_time_what_they_name(tmp_path, only):
    """time_short_calls against a stand-in python3 that records its arguments: the fp8 fixed cost and bench always,
    the bf16 picks' only without `fp8`, every command on the timing library, each result named by the tag; then
    build_libs: the normal and the timing library's reports."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(f'#!/usr/bin/env bash\necho "${{KDT_E4M3_TIMING:-0}} $*" >> {tmp_path}/calls\n')
    fake.chmod(0o755)
    results = tmp_path / "r"  # what pack tars: outside $OUT, where the tarball is written
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "KDT_PACK_DIR": str(results)}
    (tmp_path / "out").mkdir()
    results.mkdir()
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && time_short_calls main-1 "
                          f"{results} {only} && build_libs main {results}"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    timed, builds = calls[:-2], calls[-2:]
    assert all(c.startswith("1 ") for c in timed)
    assert any("--kv fp8" in c and "fixed-fp8-main-1.json" in c for c in timed)
    assert any("bench-fp8-main-1.json" in c and "1,200000,16,8,fp8" in c for c in timed)
    bf16 = [c for c in timed if "bf16-main-1" in c]
    assert len(bf16) == (0 if only else 2)
    assert builds == ["0 -m kdtree_lab build --json", "1 -m kdtree_lab build --json"]
    assert (tmp_path / "out" / "results.tar.gz").exists()


def _with_stand_ins(tmp_path, python3: str, command: str) -> tuple[subprocess.CompletedProcess, list[str], Path]:
    """Run a session_lib COMMAND with python3 (its bash body, after it logs "python3 ARGS" to the calls file) and git
    (logs "git ARGS") as stand-ins and kernels_restore logging "restore": (the run, the calls in order, the results
    folder KDT_PACK_DIR)."""
    bin_dir, results = tmp_path / "bin", tmp_path / "r"
    bin_dir.mkdir()
    results.mkdir()
    (tmp_path / "out").mkdir()
    log = tmp_path / "calls"
    log.touch()
    for name, body in (("python3", f'echo "python3 $*" >> {log}\n' + python3), ("git", f'echo "git $*" >> {log}\n')):
        (bin_dir / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "KDT_PACK_DIR": str(results)}
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && "
                          f"kernels_restore() {{ echo restore >> {log}; }} && {command.format(results=results)}"],
                         env=env, capture_output=True, text=True, timeout=60)
    return out, log.read_text().splitlines(), results


@pytest.mark.parametrize("same", [True, False])
def test_a_patch_is_timed_only_where_its_outputs_are_mains(tmp_path, same):
    """ab_patch against stand-ins (python3 and git record their arguments; the digests' comparison answers `same`):
    main's libraries and digests, then the patch's, each configuration compared; identical: main, the patch and main
    again timed, the patch applied before its round and kernels/ restored before main's; different: no timing, rc 1."""
    out, calls, _ = _with_stand_ins(tmp_path, f'[[ "$*" == *--compare* ]] && exit {0 if same else 1}\nexit 0\n',
                                    "ab_patch p.patch {results} 20 fp8 cuda_sm120_e4m3:fp8 cuda_sm120:bf16")
    assert out.returncode == (0 if same else 1), out.stderr
    digests = [c for c in calls if "--out" in c and "output_identity" in c]
    assert [c.split("--out ")[1].rsplit("/", 1)[1] for c in digests] == [
        "digest-main-cuda_sm120_e4m3.json", "digest-main-cuda_sm120.json", "digest-patch-cuda_sm120_e4m3.json",
        "digest-patch-cuda_sm120.json"]
    assert "--kv fp8 --cases 20" in digests[0] and "--kv bf16" in digests[1]
    applied = calls.index("git apply p.patch")
    assert all(calls.index(d) > applied for d in digests[2:]) and all(calls.index(d) < applied for d in digests[:2])
    fixed = [c.split("--out ")[1].split()[0].rsplit("/", 1)[1] for c in calls if "fixed_cost.py" in c]
    if same:
        assert fixed == ["fixed-fp8-main-1.json", "fixed-fp8-patch-1.json", "fixed-fp8-main-2.json"]  # fp8 only
        assert calls.count("git apply p.patch") == 2 and calls.count("restore") == 2
    else:
        assert fixed == [] and "no timing" in out.stdout and calls[-1] == "restore"


def test_the_phase_clocks_time_main_then_the_patch_on_the_phase_build(tmp_path):
    """phase_ab against stand-ins (python3 also logs the build switches): main's phase build and clocks, then the
    patch applied and its, each named by the tree, both shapes; kernels/ restored at the end."""
    out, calls, results = _with_stand_ins(tmp_path, 'echo "switches ${KDT_PHASE_CLOCKS:-0}${KDT_E4M3_TIMING:-0}" >> '
                                          f'{tmp_path / "calls"}\n', "phase_ab p.patch {results} split")
    assert out.returncode == 0, out.stderr
    assert [c for c in calls if c.startswith("switches")] == ["switches 11"] * 4
    calls = [c for c in calls if not c.startswith("switches")]
    assert calls.index("git apply p.patch") == 2 and calls[-1] == "restore"
    clocks = [c for c in calls if "phase_clocks" in c]
    assert [c.split("--out ")[1].rsplit("/", 1)[1] for c in clocks] == ["phase-e4m3-64-main.json",
                                                                         "phase-e4m3-64-patch.json"]
    assert all("--shape 1,128,16,8 --shape 1,4096,16,8" in c and "--impl cuda_sm120_e4m3" in c for c in clocks)
    assert (results / "build-phase-main.json").exists() and (results / "build-phase-patch.json").exists()


def test_a_calls_results_folder_starts_empty(tmp_path):
    """device_prologue.sh against a stand-in python3 (wheels, provenance and build all no-ops): a KDT_PACK_DIR under
    /tmp is emptied first (a warm machine keeps /tmp between calls, and pack would ship the last call's files again);
    one elsewhere, or named through /tmp/.. to elsewhere, is left as it is; either way the prologue writes its
    provenance.json and build.json there, not in $OUT."""
    import tempfile
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/usr/bin/env bash\nexit 0\n")
    (bin_dir / "python3").chmod(0o755)
    under_tmp = Path(tempfile.mkdtemp(dir="/tmp")) / "r"
    elsewhere = tmp_path / "cwd" / "rel" / "r"
    escaping = Path(tempfile.mkdtemp(dir="/var/tmp")) / "r"  # named through /tmp/..: outside /tmp, left as it is
    try:
        for folder, relative in ((under_tmp, str(under_tmp)), (elsewhere, "rel/r"),
                                 (escaping, f"/tmp/..{escaping}")):
            folder.mkdir(parents=True)
            (folder / "fixed-fp8-main-1.json").write_text("{}")
            env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
                   "KDT_PACK_DIR": relative}
            cwd = tmp_path / "cwd"
            (cwd / "scripts").mkdir(parents=True, exist_ok=True)
            for name in ("device_prologue.sh", "session_lib.sh"):
                (cwd / "scripts" / name).write_text((ROOT / "scripts" / name).read_text())
            out = subprocess.run(["bash", "-c", "source scripts/device_prologue.sh 'a call'"], cwd=cwd, env=env,
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert folder.is_dir()
            kept = [] if folder == under_tmp else ["fixed-fp8-main-1.json"]
            assert sorted(p.name for p in folder.iterdir()) == sorted(kept + ["build.json", "provenance.json"])
            assert not list((tmp_path / "out").glob("*.json"))  # the prologue's files are in the results folder
    finally:
        import shutil
        shutil.rmtree(under_tmp.parent, ignore_errors=True)
        shutil.rmtree(escaping.parent, ignore_errors=True)


def test_the_role_split_checks_and_its_ab_run_what_the_run_scripts_name(tmp_path):
    """roles_checks and roles_ab (the role split's run scripts, e.g. those in data/results/h100/2026-12-06-pv-rows/)
    against stand-ins (python3 and compute-sanitizer record their arguments): the role split's smoke, its parity tests
    and two sanitizers on the tree as it is, then the interleaved A/B of build-TAG.json against build-patch.json at
    five shapes, each into the results folder, which is packed."""
    bin_dir, results = tmp_path / "bin", tmp_path / "r"
    bin_dir.mkdir()
    results.mkdir()
    (tmp_path / "out").mkdir()
    log = tmp_path / "calls"
    for name in ("python3", "compute-sanitizer"):
        (bin_dir / name).write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> {log}\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "KDT_PACK_DIR": str(results), "SANITIZE_PARALLEL": "0"}
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && roles_checks {results} && "
                          f"roles_ab rows {results}"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    assert "--configs cuda_sm120_roles --smoke 40" in calls[0] and f"{results}/smoke-patch.json" in calls[0]
    assert "tests/test_gpu.py" in calls[1] and "and roles" in calls[1] and "gpu-parity-patch.xml" in calls[1]
    tools = [c.split("--tool ")[1].split()[0] for c in calls if c.startswith("compute-sanitizer")]
    assert tools == ["racecheck", "synccheck"] and all("cuda_sm120_roles" in c for c in calls[2:4])
    ab = calls[-1]
    assert ab.startswith("python3 -m kdtree_lab.checks.ab_interleave") and f"--lib-a {results}/build-rows.json" in ab
    assert f"--lib-b {results}/build-patch.json" in ab and ab.count("--shape ") == 5
    assert f"{results}/ab-interleave-rows-patch.json" in ab and "--rounds 8" in ab
    assert (tmp_path / "out" / "results.tar.gz").exists()


E4M3_AB_SHAPES = {
    "e4m3_ab": ("cuda_sm120_e4m3", ["1,200000,16,8,fp8", "8,200000,16,8,fp8", "1,32768,16,8,fp8", "1,4096,16,8,fp8"]),
    "e4m3_32_ab": ("cuda_sm120_e4m3_32", ["1,200000,4,8,fp8", "8,200000,4,8,fp8", "1,32768,4,8,fp8", "8,32768,4,8,fp8"]),
}


@pytest.mark.parametrize("fn", sorted(E4M3_AB_SHAPES))
def test_the_e4m3_ab_runs_a_forms_timing_libraries_at_its_four_shapes(tmp_path, fn):
    """e4m3_ab (the 64-row e4m3 form's A/B: the headline, B = 8, 1 x 32k and 1 x 4k) and e4m3_32_ab (the 32-row form's:
    issue 52's four ratio shapes), both through timing_ab, against a stand-in python3 that records its arguments:
    build-timing-A.json against build-timing-B.json, the form over fp8 at its shapes in order, eight rounds, into the
    results folder, which is packed."""
    impl, want = E4M3_AB_SHAPES[fn]
    bin_dir, results = tmp_path / "bin", tmp_path / "r"
    bin_dir.mkdir()
    results.mkdir()
    (tmp_path / "out").mkdir()
    log = tmp_path / "calls"
    (bin_dir / "python3").write_text(f'#!/usr/bin/env bash\necho "python3 $*" >> {log}\n')
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "KDT_PACK_DIR": str(results)}
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && {fn} main patch {results}"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (ab,) = log.read_text().splitlines()
    assert ab.startswith("python3 -m kdtree_lab.checks.ab_interleave") and f"--impl {impl} " in ab
    assert f"--lib-a {results}/build-timing-main.json" in ab and f"--lib-b {results}/build-timing-patch.json" in ab
    shapes = [s.split()[0] for s in ab.split("--shape ")[1:]]
    assert shapes == want
    assert f"{results}/ab-interleave-main-patch.json" in ab and "--rounds 8" in ab
    assert (tmp_path / "out" / "results.tar.gz").exists()


def test_pack_names_its_tarball(tmp_path):
    """KDT_PACK_NAME picks the tarball pack writes (two run scripts in one call keep both); results.tar.gz without it."""
    (tmp_path / "out").mkdir()
    results = tmp_path / "r"
    results.mkdir()
    (results / "a.json").write_text("{}")
    for name, want in (("vearly", "vearly.tar.gz"), ("", "results.tar.gz")):
        env = {**os.environ, "OUT": str(tmp_path / "out"), "KDT_PACK_DIR": str(results), "KDT_PACK_NAME": name}
        if not name:
            env.pop("KDT_PACK_NAME")
        out = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts/session_lib.sh'} && pack"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        with tarfile.open(tmp_path / "out" / want) as tar:
            assert "./a.json" in tar.getnames()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.tar.gz", "vearly.tar.gz"]
