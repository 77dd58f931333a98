"""docs/experiments: every patch still applies to the tree, still builds and passes the library's resource checks,
has its one-call run script, and is described; a run script that gates several patches together (its STACK line)
applies them together and builds. An experiment may be measured before it passes one check, where its run script
names the problem (`# ALLOWED-CHECK: ARCH KERNEL spills`, a known spill of a kernel on an arch): only that problem
is allowed, and it must still occur (a line that no longer matches fails). Landing needs every check."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "docs" / "experiments"
PATCHES = sorted(EXPERIMENTS.glob("*.patch"))


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_the_tree(patch):
    out = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"{patch.name} no longer applies: {out.stderr.strip()}"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_has_a_run_script_and_a_description(patch):
    run = EXPERIMENTS / f"{patch.stem}-run.sh"
    assert run.exists(), f"{patch.name}: no {run.name}"
    assert "scripts/device_prologue.sh" in run.read_text()
    assert f"`{patch.name}`" in (EXPERIMENTS / "README.md").read_text()


KERNEL_PATCHES = [p for p in PATCHES if "+++ b/kernels/" in p.read_text()]


def _stacks(folder: Path = EXPERIMENTS) -> list[tuple[Path, list[Path]]]:
    """(run script, its patches in order) for each run script in ``folder`` with a `STACK=(a.patch b.patch)` line; an
    empty `STACK=()` (main's gates, nothing applied) is not a stack. A patch may be named from the repository's root
    (`docs/experiments/a.patch`), as landing-run.sh takes it too."""
    found = []
    for run in sorted(folder.glob("*-run.sh")):
        m = re.search(r"^STACK=\(([^)]*)\)", run.read_text(), re.M)
        if m and m.group(1).split():
            found.append((run, [folder / name.removeprefix("docs/experiments/") for name in m.group(1).split()]))
    return found


STACKS = _stacks()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (git apply)")
@pytest.mark.parametrize("patch", KERNEL_PATCHES, ids=lambda p: p.name)
def test_patch_builds_and_passes_the_resource_checks(patch, tmp_path):
    """A patch can still apply and no longer compile (the kernels it edits moved on beside it): the device call that
    measures it would then end at its build. Its kernels/ hunks on a copy of kernels/, the library's nvcc command for
    sm_120a and sm_90a, and the checks every build passes (symbols, tensor-core MMAs, no spills where the arch runs
    the kernel natively, registers per SM), less the problems its run script allows."""
    _build_with([patch], tmp_path, allowed_problems(EXPERIMENTS / f"{patch.stem}-run.sh"))


def allowed_problems(run: Path) -> list[tuple[str, str]]:
    """(arch, kernel) of each `# ALLOWED-CHECK: ARCH KERNEL spills` line of a run script."""
    if not run.exists():
        return []
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^# ALLOWED-CHECK: (\S+) (\S+) spills$", run.read_text(), re.M)]


def _unallowed(problems: list[str], allowed: list[tuple[str, str]], name: str) -> list[str]:
    """The problems no allowance covers; an allowance that covers none fails (it would hide a later problem)."""
    def covers(a: tuple[str, str], problem: str) -> bool:
        return problem.startswith(f"{a[0]} {a[1]}: ") and problem.endswith("(limit 0: spills)")

    stale = [a for a in allowed if not any(covers(a, p) for p in problems)]
    assert not stale, f"{name}: ALLOWED-CHECK {stale} matches no problem of the build: remove the line"
    return [p for p in problems if not any(covers(a, p) for a in allowed)]


def test_an_allowance_covers_only_its_kernel_and_must_match():
    problem = "sm_90a verify_x<64>: 0 B local memory / 24 B stack per thread (limit 0: spills)"
    assert _unallowed([problem], [("sm_90a", "verify_x<64>")], "t") == []
    assert _unallowed([problem], [], "t") == [problem]
    other = "sm_90a verify_y<64>: 8 B local memory / 0 B stack per thread (limit 0: spills)"
    assert _unallowed([problem, other], [("sm_90a", "verify_x<64>")], "t") == [other]
    with pytest.raises(AssertionError, match="matches no problem"):
        _unallowed([other], [("sm_90a", "verify_x<64>")], "t")


def test_a_stack_line_is_found(tmp_path):
    """A run script's STACK line names its patches in order (landing-run.sh's)."""
    (tmp_path / "landing-run.sh").write_text("#!/usr/bin/env bash\nSTACK=(a.patch docs/experiments/b.patch)\nset -u\n")
    (tmp_path / "other-run.sh").write_text("#!/usr/bin/env bash\n# STACK=(c.patch) in a comment is not one\n")
    (tmp_path / "empty-run.sh").write_text("#!/usr/bin/env bash\nSTACK=()\n")
    assert _stacks(tmp_path) == [(tmp_path / "landing-run.sh", [tmp_path / "a.patch", tmp_path / "b.patch"])]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s[0].name)
def test_a_stack_applies_together_and_builds(stack, tmp_path):
    """A run script that gates several patches at once applies them in its order to one tree: each must exist, the
    tree must take them one after another (git apply checks a list in sequence), and the kernels with all of them
    must build and pass the checks."""
    run, patches = stack
    missing = [p.name for p in patches if not p.exists()]
    assert not missing, f"{run.name}: STACK names {missing}, not in docs/experiments"
    out = subprocess.run(["git", "apply", "--check", *map(str, patches)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"{run.name}: its STACK does not apply in order: {out.stderr.strip()}"
    _build_with(patches, tmp_path)


def _build_with(patches: list[Path], tmp_path: Path, allowed: list[tuple[str, str]] = ()) -> None:
    """The patches' kernels/ hunks in order on a copy of kernels/, the library's nvcc command over it for the default
    archs, then the checks every build passes (less the allowed problems)."""
    from kdtree_lab.core.cuda_tools import find_nvcc
    from kdtree_lab.kernels import build

    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    name = " + ".join(p.name for p in patches)
    for patch in patches:
        out = subprocess.run(["git", "apply", "--include=kernels/*", str(patch)], cwd=tmp_path, capture_output=True,
                             text=True)
        assert out.returncode == 0, f"{patch.name}: {out.stderr.strip()}"
    changed = subprocess.run(["diff", "-rq", str(ROOT / "kernels"), str(tmp_path / "kernels")], capture_output=True)
    assert changed.returncode == 1, f"{name}: its kernels/ hunks changed nothing"
    nvcc = find_nvcc()
    if not nvcc:
        pytest.skip("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    archs = build.DEFAULT_ARCHS
    lib = tmp_path / "lib.so"
    proc = subprocess.run(build.nvcc_command(nvcc, archs, lib, tmp_path / "kernels"), capture_output=True, text=True)
    assert proc.returncode == 0, f"{name} does not build:\n{proc.stderr[-3000:]}"
    report = build.check_library(lib, archs)
    problems = _unallowed(list(report.problems), list(allowed), name)
    assert not problems, f"{name}: {problems}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("gpu", ["NVIDIA H100 80GB HBM3", ""])
def test_the_record_mode_runs_nothing_off_an_h200(tmp_path, gpu):
    """`landing-run.sh record` is issue 52's run of record, an H200's: on another GPU (or none) it says what it found
    and exits 0 before the prologue installs or builds anything."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '{gpu}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = subprocess.run(["bash", str(EXPERIMENTS / "landing-run.sh"), "record"], cwd=ROOT, capture_output=True,
                         text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out")})
    assert out.returncode == 0, out.stderr
    assert "the run of record is an H200's" in out.stdout and (gpu or "no GPU") in out.stdout
    assert not (tmp_path / "out").exists()  # the prologue never ran
