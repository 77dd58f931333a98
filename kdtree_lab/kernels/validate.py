"""The validate step, one home for the CUDA-graph runner and the SGLang hook: our output against a reference's,
the worst relative difference kept in a device scalar (graph-safe: no host read), checked after the step."""

from __future__ import annotations

import torch

VALIDATE_TOL = 2.0 ** -5  # max |ours - reference| / max(1, max |reference|): a few bf16 ULPs
# e4m3 tensor-core math (Q and P rounded to e4m3) against an exact kernel or SGLang's own fp8 kernel (which rounds
# them too): each output is within about 2^-3 of the oracle (parity.E4M3_MAX_ABS), so the difference of two within
# 2^-2; a wrong row or key set still lands far outside
E4M3_VALIDATE_TOL = 2.0 ** -2


def validate_tol(e4m3: bool = False) -> float:
    """The validate step's tolerance for a kernel of exact (bf16) or e4m3 tensor-core math."""
    return E4M3_VALIDATE_TOL if e4m3 else VALIDATE_TOL


def record_difference(err: torch.Tensor, ours: torch.Tensor, reference: torch.Tensor) -> None:
    """``err`` (an fp32 device scalar) becomes max(err, max |ours - reference| / max(1, max |reference|)).
    Device ops only: capture-safe."""
    worst = (ours.float() - reference.float()).abs().amax() / reference.float().abs().amax().clamp_min(1.0)
    torch.maximum(err, worst, out=err)
