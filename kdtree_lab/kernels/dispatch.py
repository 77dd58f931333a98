"""Run one implementation of the registry (``impls.IMPLS``): the one place that turns an implementation name into a
call, read by parity, the benchmark, the CUDA-graph runner, the notebooks and the scripts.

A CUDA implementation goes through the C library, its configuration forced on the host before the launch (or the
one the device selects, for ``cuda``); ``triton`` goes through the Triton twin. Both lay the workspace out as
``launch_plan`` says, so one allocation, one status read and one split rule serve every implementation.
"""

from __future__ import annotations

from typing import Callable

import torch

from .impls import IMPLS
from .launch_plan import default_nsplit, workspace_bytes

TRITON_ROW_TILE = 32  # the Triton twin's BLOCK_M on a GPU (16 in the CPU interpreter)


def _check(impl: str) -> None:
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


def row_tile(impl: str) -> int:
    """Rows of draft node x head per CTA of ``impl`` on the current device (what the split rule needs)."""
    _check(impl)
    if IMPLS[impl].family == "cuda":
        from . import loader

        with loader.impl_config(impl) as cfg:
            return cfg["block_m"]
    return TRITON_ROW_TILE


def nsplit_for(impl: str, bs: int, num_draft: int, num_heads: int) -> int:
    """The split count ``impl`` runs a call of ``bs`` requests with on this GPU (launch_plan.default_nsplit)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return default_nsplit(bs, num_draft, num_heads, sms, row_tile(impl))


def launch(impl: str, *args) -> None:
    """The raw call (torch.ops.kdtree_lab.verify's arguments: q ... v_scale, workspace) on the current stream."""
    _check(impl)
    if IMPLS[impl].family == "cuda":
        from . import loader

        with loader.impl_config(impl):  # a forced configuration is chosen on the host, before the launch
            torch.ops.kdtree_lab.verify(*args)
    else:
        from . import triton_verify

        triton_verify.launch(*args)


def verify(impl: str, batch, ws: torch.Tensor, nsplit: int, checked: bool = False) -> torch.Tensor:
    """Run ``impl`` on a :class:`~kdtree_lab.checks.batch.VerifyBatch`; writes and returns ``batch.o``."""
    _check(impl)
    if IMPLS[impl].family == "cuda":
        from . import loader

        with loader.impl_config(impl):
            return loader.verify(batch, ws, nsplit, checked=checked)
    from . import triton_verify

    return triton_verify.verify(batch, ws, nsplit, checked=checked)


def runner(impl: str) -> Callable:
    """A function (batch, nsplit) -> (output, device status flags) that runs ``impl`` with a fresh workspace."""
    _check(impl)

    def run(batch, nsplit: int):
        ws = workspace(batch.bs, batch.max_extend_len, batch.num_heads, nsplit, batch.q.device)
        out = verify(impl, batch, ws, nsplit)
        return out, read_status(ws)

    return run


def output_fn(impl: str, nsplit: int = 4) -> Callable:
    """A function batch -> output (``nsplit`` splits, a fresh workspace): what notebook 03's validate demo wraps."""
    run = runner(impl)
    return lambda batch: run(batch, nsplit)[0]
