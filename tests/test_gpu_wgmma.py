"""GPU tests of the sm_90a wgmma kernels (v4, impl ``cuda_wgmma``; v5, ``cuda_wgmma_v5``), forced, so that they
test each wherever the automatic choice falls (v4 is the default on compute capability 9.x when the library holds
sm_90a code, and tests/test_gpu.py covers it there as ``cuda``). Needs compute capability 9.x; elsewhere the
launcher refuses them."""

import pytest
import torch

from kdtree_lab.checks import parity
from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.kernels import dispatch, loader

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                 reason="the wgmma kernel runs on compute capability 9.x (sm_90a) only")]


WGMMA_IMPLS = ("cuda_wgmma", "cuda_wgmma_v5")


@pytest.mark.parametrize("impl", WGMMA_IMPLS)
def test_wgmma_small_case_first(impl):
    """One small case, checked before the grid: a wrong descriptor shows up here with a readable error."""
    b = build_verify_batch([300], 16, 8, seed=5, device="cuda")
    ws = dispatch.workspace(1, 16, 8, 4)
    with loader.impl_config(impl):
        out = loader.verify(b, ws, 4)
    torch.cuda.synchronize()
    err = compare(out, reference(b))
    assert parity.within_tolerance(err), err


@pytest.mark.parametrize("impl", WGMMA_IMPLS)
def test_wgmma_edge_grid_and_random(impl):
    report = parity.run_parity(impl, parity.gpu_grid(200, seed=404), "cuda")
    assert report.ok, report.summary()
