"""Ahead-of-time compilation of the Triton twin for a GPU that is not here (sm_120, sm_90).

Triton's compile API with an explicit ``GPUTarget`` produces the cubin on a CPU-only machine; its metadata gives
the shared memory, and cuobjdump on the cubin gives registers, stack and local memory (spills).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .build import LIMITS, _cuobjdump

SPLIT_SIGNATURE = {
    "q_ptr": "*bf16", "q_st": "i64", "q_sh": "i64", "kx_ptr": "*bf16", "kx_s": "i64", "vx_ptr": "*bf16",
    "vx_s": "i64", "kb_ptr": "*bf16", "kb_s": "i64", "pool_rows": "i64", "qo_ptr": "*i64", "kv_indptr_ptr": "*i32",
    "kv_indices_ptr": "*i64", "mask_ptr": "*u8", "mask_indptr_ptr": "*i64", "o_part_ptr": "*fp32",
    "lse_part_ptr": "*fp32", "status_ptr": "*i32", "N": "i32", "H": "i32", "R": "i32", "scale_pre": "fp32",
    "scale_draft": "fp32", "v_scale": "fp32", "NSPLIT": "constexpr", "HAS_MASK": "constexpr",
    "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "MIN_SPLIT": "constexpr", "UPCAST": "constexpr",
}


class TritonResourceError(RuntimeError):
    """A compiled Triton kernel exceeds an arch limit; the message names arch, kernel and limit."""


@dataclass
class TritonCompileReport:
    arch: str
    kernel: str
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    shared_bytes: int
    registers: int
    stack_bytes: int
    local_bytes: int
    seconds: float
    problems: list[str] = field(default_factory=list)


def compile_split_kernel(capability: int, nsplit: int = 16, has_mask: bool = True, block_m: int = 32,
                         block_n: int = 16, num_warps: int = 8, num_stages: int = 2) -> TritonCompileReport:
    """Compile ``_verify_split_kernel`` for compute capability ``capability`` (120, 90, ...) and report resources.

    Runs in a child process without TRITON_INTERPRET, so it works from an interpreter session too."""
    import json
    import os
    import subprocess
    import sys

    args = dict(capability=capability, nsplit=nsplit, has_mask=has_mask, block_m=block_m, block_n=block_n,
                num_warps=num_warps, num_stages=num_stages)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    code = ("import json, sys, dataclasses; from kdtree_lab.kernels.triton_aot import _compile_here; "
            "print(json.dumps(dataclasses.asdict(_compile_here(**json.loads(sys.argv[1])))))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"Triton compile for sm_{capability} failed:\n{proc.stderr[-3000:]}")
    return TritonCompileReport(**json.loads(proc.stdout.strip().splitlines()[-1]))


def _compile_here(capability: int, nsplit: int = 16, has_mask: bool = True, block_m: int = 32,
                         block_n: int = 16, num_warps: int = 8, num_stages: int = 2) -> TritonCompileReport:
    """Compile ``_verify_split_kernel`` for compute capability ``capability`` (120, 90, ...) and report resources."""
    import time

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .triton_verify import MIN_SPLIT_TOKENS, _verify_split_kernel

    kernel = _verify_split_kernel
    consts = {"NSPLIT": nsplit, "HAS_MASK": has_mask, "BLOCK_M": block_m, "BLOCK_N": block_n,
              "MIN_SPLIT": MIN_SPLIT_TOKENS, "UPCAST": False}
    t0 = time.perf_counter()
    src = ASTSource(fn=kernel, signature=SPLIT_SIGNATURE, constexprs=consts)
    compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    secs = time.perf_counter() - t0
    arch = f"sm_{capability}"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = _cuobjdump(["--dump-resource-usage", str(cubin)])
    import re

    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)
    regs, stack, _static, local = (int(x) for x in m.groups()) if m else (0, 0, 0, 0)
    report = TritonCompileReport(arch, "_verify_split_kernel", block_m, block_n, num_warps, num_stages,
                                 int(compiled.metadata.shared), regs, stack, local, secs)
    limits = LIMITS.get(arch)
    if limits and report.shared_bytes > limits.smem_per_block_optin:
        report.problems.append(f"{arch} _verify_split_kernel (BLOCK_M={block_m}, BLOCK_N={block_n}, "
                               f"stages={num_stages}): {report.shared_bytes} B shared memory > "
                               f"{limits.smem_per_block_optin} B per block")
    return report


def check(report: TritonCompileReport) -> TritonCompileReport:
    """Raise TritonResourceError when the report has a problem."""
    if report.problems:
        raise TritonResourceError("; ".join(report.problems))
    return report
