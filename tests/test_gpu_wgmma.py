"""GPU tests of the sm_90a wgmma kernel (v4, impl ``cuda_wgmma``), forced, so that they test it wherever the
automatic choice falls (it is the default on compute capability 9.x when the library holds sm_90a code, and
tests/test_gpu.py covers it there as ``cuda``). Needs compute capability 9.x; elsewhere the launcher refuses it."""

import pytest
import torch

from kdtree_lab import dispatch, loader, parity
from kdtree_lab.batch import build_verify_batch
from kdtree_lab.oracle import compare, reference

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                 reason="the wgmma kernel runs on compute capability 9.x (sm_90a) only")]


def test_wgmma_small_case_first():
    """One small case, checked before the grid: a wrong descriptor shows up here with a readable error."""
    b = build_verify_batch([300], 16, 8, seed=5, device="cuda")
    ws = dispatch.workspace(1, 16, 8, 4)
    with loader.impl_config("cuda_wgmma"):
        out = loader.verify(b, ws, 4)
    torch.cuda.synchronize()
    err = compare(out, reference(b))
    assert parity.within_tolerance(err), err


def test_wgmma_edge_grid_and_random():
    report = parity.run_parity("cuda_wgmma", parity.gpu_grid(200, seed=404), "cuda")
    assert report.ok, report.summary()
