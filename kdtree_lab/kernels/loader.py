"""Load the CUDA verify library (ctypes) and expose it as the torch custom op ``kdtree_lab::verify``.

The op launches on ``torch.cuda.current_stream()`` with a caller-owned uint8 workspace, allocates nothing and
never syncs, so it can be captured in a CUDA graph. ``verify(..., checked=True)`` audits the buffers against
the SGLang contract first (that audit syncs, so it is for eager runs and tests).
"""

from __future__ import annotations

import ctypes
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.cuda_tools import arch_name
from ..core.dtypes import KV_DTYPES, kv_dtype_of
from .abi import ABI_VERSION, FP8_MATH, open_cdll
from .buffers import check_buffers
from .impls import CUDA_IMPLS
from .launch_plan import Config, Device, NoConfiguration


class KernelLoadError(RuntimeError):
    """The library is missing, lacks a symbol or ABI version, or has no cubin for the running GPU."""


class KernelCallError(RuntimeError):
    """The C ABI returned an error status."""


@dataclass(frozen=True)
class KernelLibrary:
    path: Path
    lib: ctypes.CDLL
    archs: tuple[str, ...]

    def workspace_bytes(self, max_bs: int, num_draft: int, num_heads: int, nsplit: int) -> int:
        """Bytes of workspace for (max_bs, N, H, nsplit), the library's own count (launch_plan.workspace_bytes has the
        layout: header, partial rows and LSEs, the e4m3 Q pass's rows)."""
        return int(self.lib.kdtree_verify_workspace_bytes(max_bs, num_draft, num_heads, nsplit))

    def strerror(self, status: int) -> str:
        return self.lib.kdtree_verify_strerror(status).decode()

    def configs(self) -> list[dict]:
        from .build import library_configs

        return library_configs(self.path)

    def selected_config(self, device: torch.device | int | None = None, kv: str | None = None, bs: int = 1,
                        num_draft: int = 1, num_heads: int = 1) -> dict:
        """The configuration calls on ``device`` use: the forced one (force_config), else the one chosen by its
        compute capability, opt-in shared memory per block and SM count and by the call's shape (``bs``,
        ``num_draft``, ``num_heads``), as the launcher chooses. With ``kv`` (a dtypes.KV_DTYPES name), the one a
        call over that pool runs (an fp8 pool: the e4m3 variant,
        kdtree_verify_config_for_pool); a configuration that does not read the pool raises KernelCallError."""
        if _FORCED is not None:
            idx = _FORCED
        else:
            dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
            props = torch.cuda.get_device_properties(dev)
            optin = props.shared_memory_per_block_optin
            idx = self.lib.kdtree_verify_select_config(int(optin), props.major * 10 + props.minor,
                                                       props.multi_processor_count, bs, num_draft, num_heads)
            if idx < 0:
                raise KernelLoadError(f"no kernel configuration fits {optin} B of shared memory per block")
        return self.configs()[idx] if kv is None else self.config_for_pool(idx, kv)

    def config_for_pool(self, index: int, kv: str, fp8_math: str = "auto") -> dict:
        """The configuration a call on configuration ``index`` over a ``kv`` pool runs (the library's mapping) under
        ``fp8_math`` (abi.FP8_MATH)."""
        with fp8_math_mode(fp8_math):
            run = self.lib.kdtree_verify_config_for_pool(index, KV_DTYPES[kv].code)
        if run < 0:
            raise KernelCallError(f"{self.configs()[index]['kernel']}, {kv} KV pool: {self.strerror(-run)}")
        return self.configs()[run]

    def config_index(self, name: str) -> int:
        """The index of the configuration named ``name`` exactly (``kdtree_verify_config_name``, ``Impl.kernel``)."""
        for c in self.configs():
            if c["kernel"] == name:
                return c["index"]
        raise KernelLoadError(f"no configuration {name} in {self.path.name}: it has "
                              f"{', '.join(c['kernel'] for c in self.configs())}")

    def select(self, bs: int, num_draft: int, num_heads: int, kv_dtype: str, device: Device,
               fp8_math: str = "auto") -> Config:
        """The library's own choice for a call of ``bs`` requests of N x H rows over a ``kv_dtype`` pool on
        ``device`` (a ``launch_plan.Select``): kdtree_verify_select_config, then kdtree_verify_config_for_pool.
        The C choice is a pure function of the device and the shape (each configuration's row range). Raises
        NoConfiguration where the library refuses."""
        index = self.lib.kdtree_verify_select_config(device.smem_optin, device.compute_capability, device.sms, bs,
                                                     num_draft, num_heads)
        if index < 0:
            raise NoConfiguration(f"device: no kernel configuration fits {device.smem_optin} B of shared memory per "
                                  f"block on compute capability {device.compute_capability}")
        return self.forced(self.configs()[index]["kernel"], kv_dtype, fp8_math)

    def forced(self, name: str, kv_dtype: str, fp8_math: str = "auto") -> Config:
        """What a call forced to configuration ``name`` runs over a ``kv_dtype`` pool (for fp8 its e4m3 variant,
        exact or on e4m3 tensor cores as ``fp8_math`` says); NoConfiguration where it does not read that pool."""
        index = self.config_index(name)
        with fp8_math_mode(fp8_math):
            run = self.lib.kdtree_verify_config_for_pool(index, KV_DTYPES[kv_dtype].code)
        if run < 0:
            raise NoConfiguration(f"kv_dtype: {name} does not read {kv_dtype} pools ({self.strerror(-run)})")
        c = self.configs()[run]
        return Config(c["kernel"], c["block_m"], c["cluster"])


_FORCED: int | None = None  # the configuration force_config set, as the library holds it
_FP8_MATH = "auto"  # the fp8 math fp8_math_mode set, as the library holds it (the library starts in auto)


def force_config(index: int | None) -> None:
    """Use kernel configuration ``index`` for every later call in this process (None: automatic selection).
    For tests and benchmarks of a configuration the automatic choice does not pick."""
    global _FORCED
    status = library().lib.kdtree_verify_force_config(-1 if index is None else index)
    if status != 0:
        raise KernelCallError(f"kdtree_verify_force_config({index}): {library().strerror(status)}")
    _FORCED = index


def forced_config() -> str | None:
    """The name of the configuration force_config set for this process, or None (automatic selection)."""
    return None if _FORCED is None else library().configs()[_FORCED]["kernel"]


@contextmanager
def impl_config(impl: str):
    """Within the block, CUDA calls use the configuration ``impl`` (a key of impls.CUDA_IMPLS) stands for; yields
    that configuration. ``cuda`` (no forced kernel) leaves the selection as it is."""
    if impl not in CUDA_IMPLS:
        raise ValueError(f"impl: expected one of {sorted(CUDA_IMPLS)}, got {impl!r}")
    name = CUDA_IMPLS[impl]
    if name is None:
        yield library().selected_config()
        return
    before = _FORCED
    force_config(library().config_index(name))
    try:
        yield library().selected_config()
    finally:
        force_config(before)


@contextmanager
def fp8_math_mode(mode: str = "auto"):
    """Within the block the library maps fp8 pools under ``mode`` (abi.FP8_MATH: auto, exact, e4m3), as it does
    for a launch (kdtree_verify_set_fp8_math, read on the host); the mode set before comes back after."""
    global _FP8_MATH
    if mode not in FP8_MATH:
        raise ValueError(f"fp8_math: expected one of {', '.join(FP8_MATH)}, found {mode!r}")
    if mode == _FP8_MATH:  # already the library's mode (every launch passes here: no C call then)
        yield
        return
    lib, before = library().lib, _FP8_MATH
    lib.kdtree_verify_set_fp8_math(FP8_MATH[mode])
    _FP8_MATH = mode
    try:
        yield
    finally:
        lib.kdtree_verify_set_fp8_math(FP8_MATH[before])
        _FP8_MATH = before


def device_facts(device: torch.device | str | int | None = None) -> Device:
    """The facts of a CUDA device the plan reads: SM count, compute capability, opt-in shared memory per block, and
    whether the loaded library holds sm_90a code."""
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    props = torch.cuda.get_device_properties(dev)
    return Device(props.multi_processor_count, props.major * 10 + props.minor,
                  int(props.shared_memory_per_block_optin), "sm_90a" in library().archs)


def gpu_arch(device: torch.device | None = None) -> str:
    """The running GPU's arch name as cubins are named: sm_90a on Hopper, sm_120a on RTX Blackwell, else sm_XY."""
    return arch_name(*torch.cuda.get_device_capability(device))


def open_library(path: str | Path, require_arch: str | None = None) -> KernelLibrary:
    """Open a built library; refuse one that lacks a C ABI symbol, the ABI version, or ``require_arch``'s cubin."""
    from .build import REQUIRED_SYMBOLS, _cuobjdump, exported_symbols

    path = Path(path)
    if not path.exists():
        raise KernelLoadError(f"kernel library {path} does not exist (kdtree-lab build makes it)")
    missing = [s for s in REQUIRED_SYMBOLS if s not in exported_symbols(path)]
    if missing:
        raise KernelLoadError(f"{path.name} lacks the C ABI symbol(s) {missing}")
    archs = tuple(sorted(set(re.findall(r"\.(sm_\w+?)\.cubin", _cuobjdump(["--list-elf", str(path)])))))
    if require_arch and require_arch not in archs:
        raise KernelLoadError(f"{path.name} has cubins for {list(archs)} but this GPU needs {require_arch}; "
                              f"rebuild with kdtree-lab build --arch {require_arch}")
    lib = open_cdll(path)
    version = lib.kdtree_verify_abi_version()
    if version != ABI_VERSION:
        raise KernelLoadError(f"{path.name} has ABI version {version}, this package expects {ABI_VERSION}")
    return KernelLibrary(path, lib, archs)


_LIBRARY: KernelLibrary | None = None


def library(archs: tuple[str, ...] | None = None) -> KernelLibrary:
    """The process-wide library for the running GPU, built (cached) on first use."""
    global _LIBRARY
    if _LIBRARY is None:
        from .build import DEFAULT_ARCHS, build_library

        need = gpu_arch() if torch.cuda.is_available() else None
        wanted = tuple(archs or DEFAULT_ARCHS)
        if need and need not in wanted:
            wanted = wanted + (need,)
        result = build_library(wanted, progress=False)
        _LIBRARY = open_library(result.library, require_arch=need)
    return _LIBRARY


@contextmanager
def use_library(lib: KernelLibrary):
    """Within the block every call goes to ``lib`` (:func:`open_library` of another build, e.g. a kernel patch's),
    the process-wide library after it: two builds timed in one process (``checks.ab_interleave``). Refused while a
    configuration or an fp8 math is forced (each library holds its own; leave those blocks first)."""
    global _LIBRARY
    if _FORCED is not None or _FP8_MATH != "auto":
        raise RuntimeError(f"use_library: leave the forced configuration ({_FORCED}) or fp8 math ({_FP8_MATH}) of "
                           "the current library first")
    before = _LIBRARY
    _LIBRARY = lib
    try:
        yield lib
    finally:
        _LIBRARY = before


@torch.library.custom_op("kdtree_lab::verify", mutates_args=("o", "workspace"))
def _verify_op(q: torch.Tensor, k_extend: torch.Tensor, v_extend: torch.Tensor, o: torch.Tensor,
               k_buffer: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
               custom_mask: torch.Tensor | None, mask_indptr: torch.Tensor, max_extend_len: int, nsplit: int,
               sm_scale: float, k_scale: float, v_scale: float, workspace: torch.Tensor) -> None:
    lib = library()
    bs = kv_indptr.shape[0] - 1
    stream = torch.cuda.current_stream(q.device).cuda_stream
    status = lib.lib.kdtree_verify_attn_flash_paged_cg(
        q.data_ptr(), q.stride(0), q.stride(1),
        k_extend.data_ptr(), k_extend.stride(0),
        v_extend.data_ptr(), v_extend.stride(0),
        o.data_ptr(), o.stride(0), o.stride(1),
        k_buffer.data_ptr(), k_buffer.stride(0), k_buffer.shape[0],
        kv_dtype_of(k_buffer.dtype).code,
        qo_indptr.data_ptr(), int(qo_indptr.dtype == torch.int64),
        kv_indptr.data_ptr(), kv_indices.data_ptr(),
        custom_mask.data_ptr() if custom_mask is not None else None, mask_indptr.data_ptr(),
        bs, max_extend_len, q.shape[1], nsplit,
        sm_scale, k_scale, v_scale,
        workspace.data_ptr(), workspace.numel(), stream)
    if status != 0:
        raise KernelCallError(f"kdtree_verify_attn_flash_paged_cg returned {status}: {lib.strerror(status)}")


@_verify_op.register_fake
def _verify_fake(q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                 max_extend_len, nsplit, sm_scale, k_scale, v_scale, workspace) -> None:
    return None


def verify(batch, workspace: torch.Tensor, nsplit: int, checked: bool = False) -> torch.Tensor:
    """Run the CUDA kernel on a :class:`~kdtree_lab.checks.batch.VerifyBatch` (writes and returns ``batch.o``).

    ``checked`` audits the buffers against the contract first (a host sync: not for capture).
    """
    if checked:
        from ..contract.audit import audit

        audit(batch.buffers(), variant=batch.variant, enforce=True)
    need = library().workspace_bytes(batch.bs, batch.max_extend_len, batch.num_heads, nsplit)
    check_buffers(batch.q, batch.k_extend, batch.v_extend, batch.o, batch.k_buffer, batch.qo_indptr, batch.kv_indptr,
                  batch.kv_indices, batch.custom_mask, batch.mask_indptr, batch.max_extend_len, workspace, need)
    torch.ops.kdtree_lab.verify(batch.q, batch.k_extend, batch.v_extend, batch.o, batch.k_buffer, batch.qo_indptr,
                                batch.kv_indptr, batch.kv_indices, batch.custom_mask, batch.mask_indptr,
                                batch.max_extend_len, nsplit, batch.sm_scale, batch.k_scale, batch.v_scale, workspace)
    return batch.o
