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


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (a skip is not a pass: run pytest -m gpu on a GPU)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
