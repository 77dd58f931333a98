"""Roofline arithmetic of a verify shape: its KV bytes and FLOPs, the ceilings a run measured, and a timed row's
rates, floor and roofline fraction.

Floors per shape: bytes = B*L*576*itemsize (the latent KV read once), FLOPs = 2*(576+512)*B*N*H*(L+N); the floor is
max(bytes / copy bandwidth, FLOPs / GEMM rate). Each row is credited with the work its implementation does."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.dtypes import KV_DTYPES
from ..core.mla import D_QK, D_V


@dataclass(frozen=True)
class Ceilings:
    copy_gbps: float  # device-to-device copy, bytes read + written per second / 1e9
    gemm_tflops: float  # bf16 matmul 8192^3
    mma_sync_tflops: float | None = None  # bf16 mma.sync m16n8k16 loop (the instruction sm_120 has); None: not run
    mma_e4m3_tflops: float | None = None  # e4m3 mma.sync m16n8k32 loop, fp32 accumulate; None: not run


@dataclass(frozen=True)
class Shape:
    batch: int
    prefix: int
    draft: int
    heads: int
    mask: str = "tree"
    kv: str = "bf16"  # the KV pool, a dtypes.KV_DTYPES name: bf16, or fp8 (SGLang's fp8_e4m3: one byte per element)

    @property
    def kv_bytes(self) -> int:
        return self.batch * self.prefix * D_QK * KV_DTYPES[self.kv].itemsize

    @property
    def flops(self) -> float:
        return 2.0 * (D_QK + D_V) * self.batch * self.draft * self.heads * (self.prefix + self.draft)


def row_kv(row: dict) -> str:
    """A result row's KV pool: rows carry ``kv`` only when it is not bf16 (so bf16 rows keep their earlier form)."""
    return row.get("kv", "bf16")


# Implementations that do less than the verify's work on a shape: SGLang's one-token decode reads the same KV but
# computes one query token per request, not N. Each row is credited with the work its implementation does.
ONE_TOKEN = {"sglang_decode_1tok"}


def parse_shape(text: str) -> Shape:
    """A shape as the command lines take it, B,L,N,H[,KV] (positive integers; KV a dtypes.KV_DTYPES name, default
    bf16), tree-masked. ValueError naming what was expected and what was found."""
    from ..core.dtypes import KV_DTYPES

    parts = [t.strip() for t in text.split(",")]
    kv = parts.pop() if len(parts) == 5 else "bf16"
    if len(parts) != 4 or not all(t.isdigit() and int(t) >= 1 for t in parts) or kv not in KV_DTYPES:
        raise ValueError(f"expected B,L,N,H[,KV] (positive integers; KV one of {', '.join(KV_DTYPES)}), found {text!r}")
    return Shape(*map(int, parts), kv=kv)


def work_shape(impl: str, shape: Shape) -> Shape:
    """The shape of the work ``impl`` does when timed on ``shape`` (its bytes and FLOPs)."""
    return Shape(shape.batch, shape.prefix, 1, shape.heads, "causal", shape.kv) if impl in ONE_TOKEN else shape


def derived(impl: str, shape: Shape, ms: float, ceilings: dict) -> dict:
    """A row's rates, floor and roofline fraction from its time (ms) and its implementation's own work."""
    w = work_shape(impl, shape)
    t = ms * 1e-3
    t_mem = w.kv_bytes / (ceilings["copy_gbps"] * 1e9)
    t_cmp = w.flops / (ceilings["gemm_tflops"] * 1e12)
    floor = max(t_mem, t_cmp)
    return {"GB/s": round(w.kv_bytes / t / 1e9, 1), "TFLOP/s": round(w.flops / t / 1e12, 2),
            "floor_ms": round(floor * 1e3, 4), "bound": "memory" if t_mem >= t_cmp else "compute",
            "of_roofline": round(floor / t, 3), **({"work_N": w.draft} if w.draft != shape.draft else {})}
