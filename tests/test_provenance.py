"""Provenance records: every committed result names the command, date, versions and the code that ran."""

import re

from kdtree_lab.core import paths
from kdtree_lab.lab import provenance


def test_provenance_fields():
    p = provenance.provenance("kdtree-lab bench --preset quick")
    assert p["command"] == "kdtree-lab bench --preset quick"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", p["date_utc"])
    assert p["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", p["git_commit"])
    assert p["git_dirty"] in (True, False, None)
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
