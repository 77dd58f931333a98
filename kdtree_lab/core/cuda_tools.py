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


def arch_name(major: int, minor: int) -> str:
    """A compute capability's arch as cubins are named: sm_90a on Hopper, sm_120a on RTX Blackwell (the arch-specific
    variants of 9.x, 10.x and 12.x), else sm_XY."""
    base = f"sm_{major}{minor}"
    return base + "a" if major in (9, 10, 12) else base


def build_benchmark(source: Path, arch: str, out: Path, nvcc: str | None = None) -> Path:
    """nvcc of a standalone benchmark ``source`` (scripts/*.cu) for ``arch`` (``sm_90a``, ``sm_120a``) into the
    executable ``out``; SystemExit naming the benchmark where nvcc is missing or fails."""
    nvcc = nvcc or find_nvcc()
    if not nvcc:
        raise SystemExit(f"{source.stem}: nvcc not found: set CUDA_HOME or put nvcc on PATH")
    proc = subprocess.run([nvcc, "-O3", "-std=c++17", f"-arch={arch}", "-o", str(out), str(source)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{source.stem}: nvcc for {arch} failed:\n{proc.stderr[-2000:]}")
    return out


def run_benchmark(source: Path, args: list[str], timeout: float = 300) -> dict:
    """Build ``source`` for this machine's GPU (torch's device 0, named by arch_name), run it with ``args`` and
    return the JSON object it prints, with ``arch`` added; SystemExit where there is no GPU or the run fails."""
    import json
    import tempfile

    import torch

    if not torch.cuda.is_available():
        raise SystemExit(f"{source.stem}: no CUDA GPU")
    arch = arch_name(*torch.cuda.get_device_capability())
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_benchmark(source, arch, Path(tmp) / source.stem)
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise SystemExit(f"{source.stem}: the run failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return {**json.loads(proc.stdout), "arch": arch}
