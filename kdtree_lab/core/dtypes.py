"""The KV pool dtypes, one typed record each: the name the package uses (``Impl.kv_dtypes``, ``--kv-dtype``,
``Case.kv_dtype``, ``Shape.kv``, ``VerifyAttention(kv_dtype=)``), torch's dtype, the bytes per element, the C ABI's
code (``kernels/kdtree_verify.h`` ``KDT_KV_*``; tests/test_c_abi.py holds them equal) and SGLang's
``--kv-cache-dtype`` values that give this pool. bf16, or fp8 for SGLang's fp8_e4m3 pool (float8_e4m3fn views of
uint8 storage). Torch-free: the torch dtype is looked up when asked for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KvDtype:
    """One KV pool dtype."""

    name: str  # "bf16" | "fp8"
    torch_name: str  # the torch dtype's attribute name: "bfloat16" | "float8_e4m3fn"
    itemsize: int  # bytes per element
    code: int  # the C ABI's kv_dtype argument (KDT_KV_BF16, KDT_KV_FP8_E4M3)
    kv_cache_dtypes: tuple[str, ...]  # SGLang's --kv-cache-dtype values (and ours) that give this pool

    @property
    def torch(self):
        """The torch dtype (imports torch)."""
        import torch

        return getattr(torch, self.torch_name)


KV_DTYPES: dict[str, KvDtype] = {d.name: d for d in (
    KvDtype("bf16", "bfloat16", 2, 0, ("auto", "bf16", "bfloat16")),
    KvDtype("fp8", "float8_e4m3fn", 1, 1, ("fp8", "fp8_e4m3")),
)}


def kv_dtype(name: str) -> KvDtype:
    """The pool named ``name``; a ValueError names the parameter and the names there are."""
    if name not in KV_DTYPES:
        raise ValueError(f"kv_dtype: expected one of {', '.join(KV_DTYPES)}, found {name!r}")
    return KV_DTYPES[name]


def kv_dtype_of(dtype) -> KvDtype | None:
    """The pool whose torch dtype is ``dtype`` (a ``torch.dtype``), or None for a dtype no pool of ours has."""
    return next((d for d in KV_DTYPES.values() if str(dtype) == f"torch.{d.torch_name}"), None)


def kv_cache_pool(value: str) -> KvDtype:
    """The pool SGLang's ``--kv-cache-dtype value`` gives (``auto``: the model's bf16)."""
    found = next((d for d in KV_DTYPES.values() if value in d.kv_cache_dtypes), None)
    if found is None:
        known = sorted(v for d in KV_DTYPES.values() for v in d.kv_cache_dtypes)
        raise ValueError(f"kv_dtype: expected one of {known}, got {value!r}")
    return found
