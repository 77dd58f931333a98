"""Ahead-of-time compilation of the Triton twin for sm_120 and sm_90 on this (GPU-less) machine."""

import pytest

from kdtree_lab.kernels import triton_aot


@pytest.mark.parametrize("cap", [120, 90])
def test_default_config_fits_and_does_not_spill(cap):
    r = triton_aot.check(triton_aot.compile_split_kernel(cap))
    assert 0 < r.shared_bytes <= 101_376
    assert r.local_bytes == 0 and r.stack_bytes == 0
    assert 0 < r.registers <= 255


def test_oversized_config_is_refused_with_arch_and_limit():
    r = triton_aot.compile_split_kernel(120, block_m=64, block_n=32)
    with pytest.raises(triton_aot.TritonResourceError, match=r"sm_120 .*shared memory > 101376 B per block"):
        triton_aot.check(r)
