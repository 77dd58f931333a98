"""One implementation registry, one dispatch: every module that runs an implementation by name goes through
kdtree_lab.kernels.dispatch, which serves each name of impls.IMPLS."""

import re

import pytest

from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.checks.parity import within_tolerance
from kdtree_lab.core.paths import ROOT
from kdtree_lab.kernels import dispatch
from kdtree_lab.kernels.attention import runner
from kdtree_lab.kernels.impls import IMPLS

CALLS = re.compile(r"(loader\.verify|triton_verify\.(verify|launch)|torch\.ops\.kdtree_lab\.verify)\(")
# where a kernel entry point may be called by name: the dispatch itself, the modules that define the entry
# points, the SGLang hook (it holds the CUDA op only: its slot is CUDA-only by construction), and the kernel
# profile script, which walks the library's configuration table by index, below the registry's names
ALLOWED = {"kdtree_lab/kernels/dispatch.py", "kdtree_lab/kernels/loader.py", "kdtree_lab/kernels/triton_verify.py",
           "kdtree_lab/sglang/hook.py", "scripts/kernel_profile.py"}


def test_nothing_outside_dispatch_calls_a_kernel_entry_point():
    files = [*(ROOT / "kdtree_lab").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.relative_to(ROOT).as_posix() not in ALLOWED
                 for i, line in enumerate(p.read_text().splitlines(), 1) if CALLS.search(line)]
    assert offenders == [], offenders


def test_every_registered_implementation_reaches_its_own_kernel(monkeypatch):
    """Each name of the registry is launched through its family's entry point, a CUDA one with the configuration
    it names forced around the launch (the entry points are stubs here: nothing runs)."""
    from contextlib import contextmanager

    import torch

    from kdtree_lab.kernels import loader, triton_verify

    calls = []

    @contextmanager
    def forced(impl):
        calls.append(("force", impl))
        yield {}

    monkeypatch.setattr(loader, "impl_config", forced)
    monkeypatch.setattr(torch.ops.kdtree_lab, "verify", lambda *a: calls.append(("cuda op", len(a))))
    monkeypatch.setattr(triton_verify, "launch", lambda *a: calls.append(("triton", len(a))))
    for name, impl in IMPLS.items():
        calls.clear()
        dispatch.launch(name, *range(16))
        want = [("force", name), ("cuda op", 16)] if impl.family == "cuda" else [("triton", 16)]
        assert calls == want, name
    assert {i.family for i in IMPLS.values()} == {"cuda", "triton"}
    with pytest.raises(ValueError, match="impl: expected one of"):
        dispatch.launch("cuda_nonesuch")


def test_the_triton_runner_on_the_cpu_matches_the_oracle():
    b = build_verify_batch([33, 5], 4, 2, seed=11, device="cpu")
    out, flags = runner("triton")(b, 2)
    assert flags == 0 and within_tolerance(compare(out, reference(b)))
