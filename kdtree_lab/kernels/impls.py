"""The implementation registry: every implementation name the CLI, parity, bench, graphs and scripts accept.

A CUDA implementation is either the configuration the device selects (``kernel=None``) or one configuration of the
library's table forced by its kernel name (``kdtree_verify_config_name``); ``triton`` is the Triton twin. Adding a
kernel configuration is one entry here plus its kernel header (docs/kernels.md, "Adding a kernel configuration").
Torch-free, so the CLI can build its choices without importing torch. Configurations that no automatic selection,
fp8 mapping or notebook comparison uses leave the table and this registry (v1 ``cuda_narrow``, v3 ``cuda_rows32`` and
the third form ``cuda_sm120_halves`` did: commit 65e9dc4, the last with them); their results stay in data/results/.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Impl:
    name: str
    family: str  # "cuda" (the C ABI library) or "triton"
    kernel: str | None  # the CUDA configuration forced; None: the one the device selects
    summary: str
    kv_dtypes: tuple[str, ...] = ("bf16",)  # KV pool dtypes it serves: "bf16", "fp8" (SGLang's fp8_e4m3)


IMPLS: dict[str, Impl] = {i.name: i for i in (
    Impl("cuda", "cuda", None, "the configuration this GPU selects (v5 on sm_90a; elsewhere per shape, the sm_120 "
         "kernel's second generation above 32 rows, the first below; all read fp8 pools)",
         ("bf16", "fp8")),
    Impl("cuda_sm120", "cuda", "verify_sm120_kernel<32,2>", "the sm_120 kernel (86.9 KB, Q in registers), forced",
         ("bf16", "fp8")),
    Impl("cuda_sm120_fp8", "cuda", "verify_sm120_kernel<32,2,true>",
         "the sm_120 kernel over e4m3 pools, exact (the launcher takes it for an fp8 pool under cuda_sm120, and "
         "under cuda_sm120_roles with exact fp8 math), forced",
         ("fp8",)),
    Impl("cuda_sm120_roles", "cuda", "verify_sm120_roles_kernel<64>",
         "the sm_120 kernel's second generation (99.4 KB, 64-row CTA split by role: QK warps hold Q, PV warps "
         "hold O), forced (fp8 pools run cuda_sm120_e4m3, or with exact fp8 math cuda_sm120_fp8)", ("bf16", "fp8")),
    Impl("cuda_sm120_e4m3", "cuda", "verify_sm120_e4m3_kernel<64>",
         "the second generation over e4m3 pools on e4m3 tensor cores (Q and P rounded to e4m3 per row, fp32 "
         "accumulation; the draft block exact in bf16), forced", ("fp8",)),
    Impl("cuda_sm120_e4m3_32", "cuda", "verify_sm120_e4m3_32_kernel",
         "the 32-row role split over e4m3 pools on e4m3 tensor cores (4 QK warps, two per m-tile splitting each "
         "tile's keys; 4 PV warps; the 64-row form's rounding; the draft block exact in bf16), forced", ("fp8",)),
    Impl("cuda_wgmma", "cuda", "verify_wgmma_kernel<64,2>", "v4, the sm_90a wgmma kernel, forced (9.x only)",
         ("bf16", "fp8")),
    Impl("cuda_wgmma_fp8", "cuda", "verify_wgmma_kernel<64,2,true>",
         "v4 over e4m3 pools (the launcher takes it for an fp8 pool under cuda_wgmma), forced (9.x only)",
         ("fp8",)),
    Impl("cuda_wgmma_v5", "cuda", "verify_wgmma_v5_kernel<64>",
         "v5, v4 with its two warpgroups out of step (softmax beside the other's wgmma), forced (9.x only; fp8 "
         "pools run v4's e4m3 variant)", ("bf16", "fp8")),
    Impl("triton", "triton", None, "the Triton twin", ("bf16", "fp8")),
)}
CUDA_IMPLS: dict[str, str | None] = {n: i.kernel for n, i in IMPLS.items() if i.family == "cuda"}


def kv_refusal(impl: str, kv_dtype: str) -> str | None:
    """The one line refusing a KV pool of ``kv_dtype`` on ``impl``, or None where the implementation serves it."""
    served = IMPLS[impl].kv_dtypes
    return None if kv_dtype in served else f"impl {impl} serves {'/'.join(served)} KV pools, not {kv_dtype}"


def sm90a_only(impl: str) -> bool:
    """Whether ``impl`` is a wgmma configuration, which runs on compute capability 9.x only (sm_90a code)."""
    return (IMPLS[impl].kernel or "").startswith("verify_wgmma")
