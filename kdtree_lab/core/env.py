"""Runtime choices a notebook makes once, before any Triton kernel is defined."""

from __future__ import annotations

import os
import sys


def select_triton_mode() -> tuple[str, str]:
    """Return (device, how Triton runs). Without a CUDA GPU, set TRITON_INTERPRET=1 so the Triton twin runs in
    Triton's CPU interpreter; this must happen before ``kdtree_lab.kernels.triton_verify`` is imported."""
    import torch

    if torch.cuda.is_available():
        return "cuda", "compiled for " + torch.cuda.get_device_name()
    if "kdtree_lab.kernels.triton_verify" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("kdtree_lab.kernels.triton_verify was imported before select_triton_mode(); restart the kernel")
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu", "in the CPU interpreter (TRITON_INTERPRET=1)"
