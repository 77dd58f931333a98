"""The KV pool dtypes by the names the package uses (``Impl.kv_dtypes``, ``--kv-dtype``, ``Case.kv_dtype``,
``Shape.kv``): bf16, or fp8 for SGLang's fp8_e4m3 pool (float8_e4m3fn views of uint8 storage)."""

from __future__ import annotations

import torch

KV_DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


def kv_dtype_name(dtype: torch.dtype) -> str | None:
    """The KV_DTYPES name of a pool's torch dtype, or None for a dtype no pool of ours has."""
    return next((name for name, t in KV_DTYPES.items() if t == dtype), None)
