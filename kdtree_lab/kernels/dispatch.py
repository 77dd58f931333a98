"""Run one implementation of the registry (``impls.IMPLS``): the one place that turns an implementation name into a
call, read by :class:`~kdtree_lab.kernels.attention.VerifyAttention` (and through it parity, the benchmark, the
CUDA-graph runner and the SGLang hook), the notebooks and the scripts.

A CUDA implementation goes through the C library, its configuration forced on the host before the launch (or the
one the device selects, for ``cuda``); ``triton`` goes through the Triton twin. Both lay the workspace out as
``launch_plan`` says, so one allocation, one status read and one split rule serve every implementation.
"""

from __future__ import annotations

import torch

from .impls import IMPLS
from .launch_plan import workspace_bytes

TRITON_ROW_TILE = 32  # the Triton twin's BLOCK_M on a GPU (16 in the CPU interpreter)


def check_impl(impl: str) -> None:
    """Refuse a name the registry does not have (one line naming the parameter)."""
    if impl not in IMPLS:
        raise ValueError(f"impl: expected one of {sorted(IMPLS)}, got {impl!r}")


def workspace(bs: int, num_draft: int, num_heads: int, nsplit: int,
              device: str | torch.device = "cuda") -> torch.Tensor:
    """A zeroed uint8 workspace for calls up to (bs, N, H, nsplit); allocate once, outside capture."""
    return torch.zeros(workspace_bytes(bs, num_draft, num_heads, nsplit), dtype=torch.uint8, device=device)


def read_status(ws: torch.Tensor) -> int:
    """The device status bits (abi.FLAG_*) a kernel OR-ed into the workspace header (a host read: syncs)."""
    return int(ws[:4].view(torch.int32).item())


def clear_status(ws: torch.Tensor) -> None:
    """Zero the status word (a device memset: capture-safe)."""
    ws[:4].zero_()


def launch(impl: str, *args, fp8_math: str = "auto") -> None:
    """The raw call (torch.ops.kdtree_lab.verify's arguments: q ... v_scale, workspace) on the current stream;
    ``fp8_math`` (abi.FP8_MATH) is the math an fp8 pool runs (the Triton twin's is exact)."""
    check_impl(impl)
    if IMPLS[impl].family == "cuda":
        from . import loader

        # the forced configuration and the fp8 math are chosen on the host, before the launch
        with loader.impl_config(impl), loader.fp8_math_mode(fp8_math):
            torch.ops.kdtree_lab.verify(*args)
    else:
        from . import triton_verify

        triton_verify.launch(*args)


def verify(impl: str, batch, ws: torch.Tensor, nsplit: int, checked: bool = False) -> torch.Tensor:
    """Run ``impl`` on a :class:`~kdtree_lab.checks.batch.VerifyBatch`; writes and returns ``batch.o``."""
    check_impl(impl)
    if IMPLS[impl].family == "cuda":
        from . import loader

        with loader.impl_config(impl):
            return loader.verify(batch, ws, nsplit, checked=checked)
    from . import triton_verify

    return triton_verify.verify(batch, ws, nsplit, checked=checked)
