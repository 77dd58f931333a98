"""``kdtree-lab doctor``: what this machine has for building and running the kernels."""

from __future__ import annotations

import dataclasses
import platform
import re
import sys
from dataclasses import dataclass, field

from ..core.cuda_tools import find_cuda_tool, find_nvcc, nvcc_archs, run_tool


@dataclass(frozen=True)
class Environment:
    """The environment report. Strings are versions as the tools print them; None means absent."""

    python: str
    platform: str
    torch: str | None
    torch_cuda: str | None  # CUDA version torch was built with
    torch_arch_list: list[str] = field(default_factory=list)
    sm120_in_torch: bool = False
    triton: str | None = None
    cuda_runtime: str | None = None
    driver: str | None = None
    nvcc: str | None = None  # path
    nvcc_version: str | None = None
    nvcc_archs: list[str] = field(default_factory=list)  # sm_XX it can build
    gpu_name: str | None = None
    compute_capability: str | None = None  # "9.0"
    gpu_count: int = 0
    cuobjdump: str | None = None
    nvdisasm: str | None = None
    dask_distributed: str | None = None  # the fleet extra (--gpus); None: runs use one GPU

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def collect() -> Environment:
    """Probe python, torch, triton, CUDA runtime, driver, nvcc, the GPU and the CUDA binary tools."""
    torch_v = torch_cuda = cuda_rt = driver = gpu = cc = None
    arch_list: list[str] = []
    count = 0
    try:
        import torch

        torch_v = torch.__version__
        torch_cuda = torch.version.cuda
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            arch_list = list(torch.cuda.get_arch_list())
            props = torch.cuda.get_device_properties(0)
            gpu = props.name
            cc = f"{props.major}.{props.minor}"
            cuda_rt = torch_cuda
    except Exception:  # no torch: report absent
        pass
    smi = run_tool(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    if smi:
        driver = smi.strip().splitlines()[0]
    triton_v = None
    try:
        import triton

        triton_v = triton.__version__
    except Exception:
        pass
    nvcc = find_nvcc()
    nvcc_v = None
    archs: list[str] = []
    if nvcc:
        out = run_tool([nvcc, "--version"]) or ""
        m = re.search(r"release ([\d.]+)", out)
        nvcc_v = m.group(1) if m else None
        archs = nvcc_archs(nvcc)
    return Environment(
        python=sys.version.split()[0],
        platform=f"{platform.system()} {platform.machine()}",
        torch=torch_v,
        torch_cuda=torch_cuda,
        torch_arch_list=arch_list,
        sm120_in_torch=any(a.startswith("sm_120") for a in arch_list),
        triton=triton_v,
        cuda_runtime=cuda_rt,
        driver=driver,
        nvcc=nvcc,
        nvcc_version=nvcc_v,
        nvcc_archs=archs,
        gpu_name=gpu,
        compute_capability=cc,
        gpu_count=count,
        cuobjdump=find_cuda_tool("cuobjdump"),
        nvdisasm=find_cuda_tool("nvdisasm"),
        dask_distributed=fleet_available(),
    )


def fleet_available() -> str | None:
    """Dask distributed's version when it imports (the fleet extra behind --gpus), else None."""
    try:
        import distributed

        return distributed.__version__
    except ImportError:
        return None


def render(env: Environment, profile: str | None = None) -> str:
    """The report as a terminal table (``display.aligned_table``), the profile ``kdtree-lab run`` picks last."""
    from ..core.display import aligned_table

    rows = [
        ("python", env.python),
        ("platform", env.platform),
        ("torch", (f"{env.torch} (built for CUDA {env.torch_cuda})" if env.torch_cuda else f"{env.torch} (a CPU "
                   "build, no CUDA)") if env.torch else "absent"),
        ("triton", env.triton or "absent"),
        ("CUDA runtime", env.cuda_runtime or "no GPU runtime"),
        ("driver", env.driver or "no driver"),
        ("nvcc", f"{env.nvcc_version} at {env.nvcc}" if env.nvcc else "absent"),
        ("nvcc archs", ", ".join(env.nvcc_archs) or "none"),
        ("GPU", f"{env.gpu_name} (cc {env.compute_capability}) x{env.gpu_count}" if env.gpu_name else "none"),
        ("sm_120 in torch arch list", ("yes" if env.sm120_in_torch else "no") if env.torch_arch_list
         else "n/a (no CUDA torch)"),
        ("cuobjdump", env.cuobjdump or "absent"),
        ("nvdisasm", env.nvdisasm or "absent"),
        ("Dask distributed (--gpus)", env.dask_distributed or "absent: one GPU at a time (pip install -e .[fleet])"),
    ]
    if profile is not None:
        rows.append(("profile (auto)", profile))
    return aligned_table([{"what": k, "found here": v} for k, v in rows])
