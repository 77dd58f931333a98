"""Provenance records: every committed result names the command, date, versions and the code that ran."""

import re
import subprocess

from kdtree_lab.core import paths
from kdtree_lab.lab import provenance


def test_provenance_fields():
    p = provenance.provenance("kdtree-lab bench --preset quick")
    assert p["command"] == "kdtree-lab bench --preset quick"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", p["date_utc"])
    assert p["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", p["git_commit"])
    assert re.fullmatch(r"[0-9a-f]{64}", p["source_sha256"])
    for key in ("python", "torch", "triton", "driver", "gpu", "nvcc"):
        assert key in p


def test_source_digest_follows_the_kernel_source(tmp_path, monkeypatch):
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    monkeypatch.setattr(paths, "KERNELS", tmp_path)
    first = provenance.source_digest()
    assert provenance.source_digest() == first
    (tmp_path / "k.cu").write_text("__global__ void k() { int x = 1; }\n")
    assert provenance.source_digest() != first


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_git_state_of_the_tree_that_ran(tmp_path, monkeypatch):
    """A clean checkout, an edited tracked file, an untracked file alone, and a folder that is no repository."""
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert provenance._git_commit() is None and provenance._git_dirty() is None  # not a repository
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "a")
    assert re.fullmatch(r"[0-9a-f]{40}", provenance._git_commit()) and provenance._git_dirty() is False
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert provenance._git_dirty() is False  # untracked files do not make the code that ran differ
    (tmp_path / "a.py").write_text("x = 2\n")
    assert provenance._git_dirty() is True
    assert provenance.provenance("c")["git_dirty"] is True


def test_source_digest_names_each_file_by_its_path(tmp_path, monkeypatch):
    """A module moved to another subpackage changes the digest, though its name and bytes stay."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kdtree_lab" / "core").mkdir(parents=True)
    (tmp_path / "kdtree_lab" / "lab").mkdir()
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "KERNELS", tmp_path / "kernels")
    (tmp_path / "kdtree_lab" / "core" / "m.py").write_text("x = 1\n")
    before = provenance.source_digest()
    (tmp_path / "kdtree_lab" / "core" / "m.py").rename(tmp_path / "kdtree_lab" / "lab" / "m.py")
    assert provenance.source_digest() != before
