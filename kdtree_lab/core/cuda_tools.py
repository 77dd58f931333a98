"""The CUDA tools on this machine: nvcc, cuobjdump / nvdisasm, and the archs nvcc can emit (read by the build,
its checks and the doctor)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path


def run_tool(cmd: list[str], timeout: float = 20) -> str | None:
    """``cmd``'s stdout, or None when it cannot run or exits non-zero."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def find_nvcc() -> str | None:
    """nvcc from $CUDA_HOME, $PATH, or /usr/local/cuda."""
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and (Path(cand) / "bin" / "nvcc").exists():
            return str(Path(cand) / "bin" / "nvcc")
    return shutil.which("nvcc")


def find_cuda_tool(name: str) -> str | None:
    """``cuobjdump`` / ``nvdisasm``: from PATH, next to nvcc, or inside the triton wheel."""
    found = shutil.which(name)
    if found:
        return found
    nvcc = find_nvcc()
    if nvcc and (Path(nvcc).parent / name).exists():
        return str(Path(nvcc).parent / name)
    try:
        import triton  # noqa: F401

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if cand.exists():
            return str(cand)
    except Exception:  # triton missing or broken: report absent
        pass
    return None


def nvcc_archs(nvcc: str) -> list[str]:
    """The real architectures nvcc can emit (``nvcc --list-gpu-code``), e.g. ``sm_120a``."""
    out = run_tool([nvcc, "--list-gpu-code"])
    if not out:
        return []
    real = {line.strip() for line in out.splitlines() if line.strip().startswith("sm_")}
    # Arch-specific variants (sm_90a, sm_120a, ...) are not listed but exist for every real arch >= 90.
    real |= {f"{a}a" for a in real if int(re.sub(r"\D", "", a)) >= 90}
    return sorted(real, key=lambda s: (int(re.sub(r"\D", "", s) or 0), s))
