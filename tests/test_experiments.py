"""docs/experiments: every patch still applies to the tree, has its one-call run script, and is described."""

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
