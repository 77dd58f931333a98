"""docs/experiments: every patch still applies to the tree, still builds and passes the library's resource checks,
has its one-call run script, and is described."""

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


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (git apply)")
@pytest.mark.parametrize("patch", KERNEL_PATCHES, ids=lambda p: p.name)
def test_patch_builds_and_passes_the_resource_checks(patch, tmp_path):
    """A patch can still apply and no longer compile (the kernels it edits moved on beside it): the device call that
    measures it would then end at its build. Its kernels/ hunks on a copy of kernels/, the library's nvcc command for
    sm_120a and sm_90a, and the checks every build passes (symbols, tensor-core MMAs, no spills where the arch runs
    the kernel natively, registers per SM)."""
    from kdtree_lab.core.cuda_tools import find_nvcc
    from kdtree_lab.kernels import build

    nvcc = find_nvcc()
    if not nvcc:
        pytest.skip("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    out = subprocess.run(["git", "apply", "--include=kernels/*", str(patch)], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 0, f"{patch.name}: {out.stderr.strip()}"
    changed = subprocess.run(["diff", "-rq", str(ROOT / "kernels"), str(tmp_path / "kernels")], capture_output=True)
    assert changed.returncode == 1, f"{patch.name}: its kernels/ hunks changed nothing"
    archs = build.DEFAULT_ARCHS
    lib = tmp_path / "lib.so"
    proc = subprocess.run(build.nvcc_command(nvcc, archs, lib, tmp_path / "kernels"), capture_output=True,
                          text=True)
    assert proc.returncode == 0, f"{patch.name} does not build:\n{proc.stderr[-3000:]}"
    report = build.check_library(lib, archs)
    assert report.ok, f"{patch.name}: {report.problems}"
