"""Test configuration. Without a CUDA GPU the Triton twin runs in Triton's CPU interpreter, which must be chosen
before any Triton kernel is defined; GPU tests (marker ``gpu``) are skipped and pytest reports them as skipped."""

import os

import pytest

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    HAS_CUDA = False

if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")


def _wgmma_impls() -> set[str]:
    """Implementation names of the sm_90a wgmma configurations (the registry's kernel names say which)."""
    from kdtree_lab.kernels.impls import IMPLS, sm90a_only

    return {n for n in IMPLS if sm90a_only(n)}


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        # a test parametrized with a wgmma configuration runs it on compute capability 9.x only; elsewhere skipped
        # with the reason (the launcher would refuse it)
        if torch.cuda.get_device_capability()[0] != 9:
            wgmma = _wgmma_impls()
            skip = pytest.mark.skip(reason="the wgmma kernels run on compute capability 9.x only")
            for item in items:
                params = getattr(item, "callspec", None)
                if params and wgmma & {v for v in params.params.values() if isinstance(v, str)}:
                    item.add_marker(skip)
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (a skip is not a pass: run pytest -m gpu on a GPU)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
