"""Runtime choices: where tensors can live on this machine, and how Triton runs (chosen once, before any Triton
kernel is defined). The one home of the lines that refuse a CUDA device without a GPU and Triton on a CPU without
its interpreter."""

from __future__ import annotations

import os
import sys

TRITON_MODULE = "kdtree_lab.kernels.triton_verify"
CPU_HINT = "on a CPU pass device='cpu' and impl='triton' and start Python under TRITON_INTERPRET=1 (the README's CPU example)"


def select_triton_mode() -> tuple[str, str]:
    """Return (device, how Triton runs). Without a CUDA GPU, set TRITON_INTERPRET=1 so the Triton twin runs in
    Triton's CPU interpreter; this must happen before ``kdtree_lab.kernels.triton_verify`` is imported."""
    import torch

    if torch.cuda.is_available():
        return "cuda", "compiled for " + torch.cuda.get_device_name()
    if TRITON_MODULE in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("kdtree_lab.kernels.triton_verify was imported before select_triton_mode(); restart the kernel")
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu", "in the CPU interpreter (TRITON_INTERPRET=1)"


def no_gpu_here() -> str:
    """What this machine has instead of a CUDA GPU, for a refusal: "none here (torch 2.13.0+cpu, a CPU build)"."""
    import torch

    build = "a CPU build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}, no GPU visible"
    return f"none here (torch {torch.__version__}, {build})"


def torch_device(device, name: str = "device"):
    """``device`` as a ``torch.device``; a CUDA device on a machine without a CUDA GPU raises ValueError in one line
    naming ``name``, what was found and what to pass on a CPU (torch's own error is a page about ATen_cuda)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name}: expected 'cpu' or 'cuda[:N]', found {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}: {str(dev)!r} needs a CUDA GPU, found {no_gpu_here()}; {CPU_HINT}")
    return dev


def triton_cpu_problem() -> str | None:
    """Why the Triton twin cannot run on the CPU in this process (one line, with what to do), or None when it can:
    Triton runs kernels on a CPU only in its interpreter, chosen when the kernels are defined (on import)."""
    module = sys.modules.get(TRITON_MODULE)
    if module is not None and not module.DEFINED_INTERPRETED:
        return ("impl: triton on a CPU needs Triton's interpreter, found the Triton kernels already defined without "
                "it; restart Python with TRITON_INTERPRET=1 set (e.g. TRITON_INTERPRET=1 python ...)")
    if module is None and os.environ.get("TRITON_INTERPRET") != "1":
        found = os.environ.get("TRITON_INTERPRET")
        return ("impl: triton on a CPU needs Triton's interpreter, expected TRITON_INTERPRET=1 in the environment, "
                f"found {'it unset' if found is None else repr(found)}; start Python as TRITON_INTERPRET=1 python ...")
    return None


def free_memory_bytes(device) -> int:
    """Bytes that can still be allocated on ``device`` (a ``torch.device`` or its name): a CUDA device's free
    memory (``torch.cuda.mem_get_info``), the host's MemAvailable (/proc/meminfo; else physical pages) for the CPU."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


FREE_SHARE = 0.8  # a tensor build may take this share of the free memory (the rest: the process, the allocator)


class SizeError(ValueError):
    """What a call would allocate does not fit the device's free memory; raised before anything is allocated."""


def require_fits(nbytes: float, device, what: str) -> None:
    """Raise SizeError naming ``what`` (its parameters first, as "a/b: ...") when ``nbytes`` exceed FREE_SHARE of
    ``device``'s free memory."""
    free = free_memory_bytes(device)
    if nbytes > FREE_SHARE * free:
        head, _, rest = what.partition(": ")
        raise SizeError(f"{head}: expected a size within {FREE_SHARE:.0%} of the {free / 2**30:.1f} GiB free on "
                        f"{device}, found one needing {nbytes / 2**30:.1f} GiB ({rest})")
