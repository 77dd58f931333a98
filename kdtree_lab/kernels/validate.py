"""The validate step, one home for the CUDA-graph runner and the SGLang hook: our output against a reference's,
the worst relative difference kept in a device scalar (graph-safe: no host read), checked after the step."""

from __future__ import annotations

import torch

VALIDATE_TOL = 2.0 ** -5  # max |ours - reference| / max(1, max |reference|): a few bf16 ULPs


def record_difference(err: torch.Tensor, ours: torch.Tensor, reference: torch.Tensor) -> None:
    """``err`` (an fp32 device scalar) becomes max(err, max |ours - reference| / max(1, max |reference|)).
    Device ops only: capture-safe."""
    worst = (ours.float() - reference.float()).abs().amax() / reference.float().abs().amax().clamp_min(1.0)
    torch.maximum(err, worst, out=err)
