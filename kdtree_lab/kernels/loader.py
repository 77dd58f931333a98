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

from ..core.dtypes import KV_DTYPES, kv_dtype_name
from ..core.mla import D_QK, D_V
from .abi import ABI_VERSION, KV_CODES, open_cdll
from .impls import CUDA_IMPLS


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
        """Bytes of workspace for (max_bs, N, H, nsplit): fp32 partials for nsplit + 1 splits plus a header."""
        return int(self.lib.kdtree_verify_workspace_bytes(max_bs, num_draft, num_heads, nsplit))

    def strerror(self, status: int) -> str:
        return self.lib.kdtree_verify_strerror(status).decode()

    def configs(self) -> list[dict]:
        from .build import library_configs

        return library_configs(self.path)

    def selected_config(self, device: torch.device | int | None = None, kv: str | None = None) -> dict:
        """The configuration calls on ``device`` use: the forced one (force_config), else the one chosen by its
        compute capability and opt-in shared memory per block, as the launcher chooses. With ``kv`` (a
        dtypes.KV_DTYPES name), the one a call over that pool runs (an fp8 pool: the e4m3 variant,
        kdtree_verify_config_for_pool); a configuration that does not read the pool raises KernelCallError."""
        if _FORCED is not None:
            idx = _FORCED
        else:
            dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
            props = torch.cuda.get_device_properties(dev)
            optin = props.shared_memory_per_block_optin
            idx = self.lib.kdtree_verify_select_config(int(optin), props.major * 10 + props.minor)
            if idx < 0:
                raise KernelLoadError(f"no kernel configuration fits {optin} B of shared memory per block")
        return self.configs()[idx] if kv is None else self.config_for_pool(idx, kv)

    def config_for_pool(self, index: int, kv: str) -> dict:
        """The configuration a call on configuration ``index`` over a ``kv`` pool runs (the library's mapping)."""
        run = self.lib.kdtree_verify_config_for_pool(index, KV_CODES[kv])
        if run < 0:
            raise KernelCallError(f"{self.configs()[index]['kernel']}, {kv} KV pool: {self.strerror(-run)}")
        return self.configs()[run]


_FORCED: int | None = None  # the configuration force_config set, as the library holds it


def force_config(index: int | None) -> None:
    """Use kernel configuration ``index`` for every later call in this process (None: automatic selection).
    For tests and benchmarks of a configuration the automatic choice does not pick."""
    global _FORCED
    status = library().lib.kdtree_verify_force_config(-1 if index is None else index)
    if status != 0:
        raise KernelCallError(f"kdtree_verify_force_config({index}): {library().strerror(status)}")
    _FORCED = index


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
    force_config(config_index(name))
    try:
        yield library().selected_config()
    finally:
        force_config(before)


def config_index(kernel_family: str) -> int:
    """Index of the first configuration whose kernel name starts with ``kernel_family``."""
    for c in library().configs():
        if c["kernel"].startswith(kernel_family):
            return c["index"]
    raise KernelLoadError(f"no {kernel_family} configuration in {library().path.name}")


def gpu_arch(device: torch.device | None = None) -> str:
    """The running GPU's arch name as cubins are named: sm_90a on Hopper, sm_120a on RTX Blackwell, else sm_XY."""
    major, minor = torch.cuda.get_device_capability(device)
    base = f"sm_{major}{minor}"
    return base + "a" if major in (9, 10, 12) else base


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


def _check_meta(q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                max_extend_len: int, workspace, need_ws: int) -> None:
    """Host-metadata checks (dtype, shape, device, layout); no device reads, so capture-safe."""

    def want(cond: bool, msg: str) -> None:
        if not cond:
            raise ValueError(msg)

    for name, t in (("q", q), ("k_extend", k_extend), ("v_extend", v_extend), ("o", o)):
        want(t.dtype == torch.bfloat16, f"{name}: expected bfloat16, found {t.dtype}")
        want(t.dim() == 3, f"{name}: expected 3 dims, found shape {tuple(t.shape)}")
        want(t.stride(-1) == 1, f"{name}: expected the last dim contiguous, found strides {t.stride()}")
    if kv_dtype_name(k_buffer.dtype) is None:
        raise NotImplementedError(f"k_buffer: expected a pool of {list(KV_DTYPES.values())}, found {k_buffer.dtype}")
    tokens, heads = q.shape[0], q.shape[1]
    want(q.shape[2] == D_QK, f"q: expected last dim {D_QK}, found {q.shape[2]}")
    want(tuple(k_extend.shape) == (tokens, 1, D_QK), f"k_extend: expected {(tokens, 1, D_QK)}, found "
                                                     f"{tuple(k_extend.shape)}")
    want(tuple(v_extend.shape) == (tokens, 1, D_V), f"v_extend: expected {(tokens, 1, D_V)}, found "
                                                   f"{tuple(v_extend.shape)}")
    want(tuple(o.shape) == (tokens, heads, D_V), f"o: expected {(tokens, heads, D_V)}, found {tuple(o.shape)}")
    want(k_buffer.dim() == 3 and k_buffer.shape[1:] == (1, D_QK) and k_buffer.stride(-1) == 1,
         f"k_buffer: expected [P, 1, {D_QK}] with a contiguous last dim, found {tuple(k_buffer.shape)} strides "
         f"{k_buffer.stride()}")
    bs = kv_indptr.shape[0] - 1
    want(qo_indptr.dtype in (torch.int32, torch.int64), f"qo_indptr: expected int32 or int64, found {qo_indptr.dtype}")
    want(tuple(qo_indptr.shape) == (bs + 1,), f"qo_indptr: expected shape {(bs + 1,)}, found {tuple(qo_indptr.shape)}")
    want(kv_indptr.dtype == torch.int32, f"kv_indptr: expected int32, found {kv_indptr.dtype}")
    want(kv_indices.dtype == torch.int64, f"kv_indices: expected int64, found {kv_indices.dtype}")
    want(mask_indptr.dtype == torch.int64, f"mask_indptr: expected int64, found {mask_indptr.dtype}")
    want(tuple(mask_indptr.shape) == (bs + 1,), f"mask_indptr: expected shape {(bs + 1,)}, found "
                                                f"{tuple(mask_indptr.shape)}")
    if custom_mask is not None:
        want(custom_mask.dtype in (torch.bool, torch.uint8), f"custom_mask: expected bool or uint8, found "
                                                             f"{custom_mask.dtype}")
        want(custom_mask.is_contiguous(), "custom_mask: expected contiguous")
    want(tokens == bs * max_extend_len, f"q: expected bs*N = {bs}*{max_extend_len} = {bs * max_extend_len} rows, "
                                        f"found {tokens}")
    for name, t in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr), ("kv_indices", kv_indices),
                    ("mask_indptr", mask_indptr)):
        want(t.is_contiguous(), f"{name}: expected contiguous")
    devices = {t.device for t in (q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, mask_indptr,
                                  workspace)}
    if custom_mask is not None:
        devices.add(custom_mask.device)
    want(len(devices) == 1 and next(iter(devices)).type == "cuda",
         f"all buffers must be on one CUDA device, found {sorted(str(d) for d in devices)}")
    want(workspace.dtype == torch.uint8 and workspace.is_contiguous(), "workspace: expected a contiguous uint8 tensor")
    want(workspace.numel() >= need_ws, f"workspace: expected at least {need_ws} bytes for bs={bs}, "
                                       f"N={max_extend_len}, H={heads}, found {workspace.numel()}")


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
        KV_CODES[kv_dtype_name(k_buffer.dtype)],
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
    lib = library()
    need = lib.workspace_bytes(batch.bs, batch.max_extend_len, batch.num_heads, nsplit)
    _check_meta(batch.q, batch.k_extend, batch.v_extend, batch.o, batch.k_buffer, batch.qo_indptr, batch.kv_indptr,
                batch.kv_indices, batch.custom_mask, batch.mask_indptr, batch.max_extend_len, workspace, need)
    torch.ops.kdtree_lab.verify(batch.q, batch.k_extend, batch.v_extend, batch.o, batch.k_buffer, batch.qo_indptr,
                                batch.kv_indptr, batch.kv_indices, batch.custom_mask, batch.mask_indptr,
                                batch.max_extend_len, nsplit, batch.sm_scale, batch.k_scale, batch.v_scale, workspace)
    return batch.o
