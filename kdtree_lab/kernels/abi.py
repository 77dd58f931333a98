"""The C ABI of kernels/kdtree_verify.h, declared once: its version, status flags, the configuration
record, every function's ctypes signature, and one handle per library file (shared by the build checks, which
need no GPU, and the loader). Torch-free."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from ..core.dtypes import KV_DTYPES

ABI_VERSION = 8  # KDT_ABI_VERSION
FLAG_INDEX_OUT_OF_POOL = 1  # KDT_FLAG_INDEX_OUT_OF_POOL: a kv_indices entry outside the pool (row 0 was read)
FLAG_QO_INDPTR = 2  # KDT_FLAG_QO_INDPTR: qo_indptr gave a request more than num_draft rows (extra rows ignored)
FLAG_KV_INDPTR = 4  # KDT_FLAG_KV_INDPTR: kv_indptr gave a request an end before its start (empty prefix served)
FP8_MATH = {"auto": 0, "exact": 1, "e4m3": 2}  # kdtree_verify_set_fp8_math: KDT_FP8_MATH_*
MMA_KINDS = {"bf16": (0, 4096), "f16": (1, 4096), "e4m3": (2, 8192)}  # kdtree_verify_mma_ceiling: kind, FLOP/instr
ARCH_SM90A = 90  # kdt_config.arch of a wgmma configuration: compute capability 9.x with sm_90a code (0: any arch)


class KdtConfig(ctypes.Structure):
    """kdt_config: one kernel configuration of the launcher's table."""

    _fields_ = [("block_m", ctypes.c_int), ("stages", ctypes.c_int), ("threads", ctypes.c_int),
                ("dynamic_smem", ctypes.c_int), ("block_n", ctypes.c_int), ("arch", ctypes.c_int),
                ("kv_dtypes", ctypes.c_uint), ("fp8_config", ctypes.c_int), ("fp8_e4m3_config", ctypes.c_int),
                ("fp8_e4m3_default", ctypes.c_int), ("auto_priority", ctypes.c_int),
                ("min_rows", ctypes.c_int), ("max_rows", ctypes.c_int), ("cluster", ctypes.c_int)]


def declare(lib: ctypes.CDLL) -> None:
    """Every exported function's return and argument types."""
    c_i64, c_int, c_void, c_float = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    lib.kdtree_verify_workspace_bytes.restype = ctypes.c_size_t
    lib.kdtree_verify_workspace_bytes.argtypes = [c_int, c_int, c_int, c_int]
    lib.kdtree_verify_strerror.restype = ctypes.c_char_p
    lib.kdtree_verify_strerror.argtypes = [c_int]
    lib.kdtree_verify_num_configs.restype = c_int
    lib.kdtree_verify_config.restype = c_int
    lib.kdtree_verify_config.argtypes = [c_int, ctypes.POINTER(KdtConfig)]
    lib.kdtree_verify_config_name.restype = ctypes.c_char_p
    lib.kdtree_verify_config_name.argtypes = [c_int]
    lib.kdtree_verify_select_config.restype = c_int
    lib.kdtree_verify_select_config.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int]
    lib.kdtree_verify_config_for_pool.restype = c_int
    lib.kdtree_verify_config_for_pool.argtypes = [c_int, c_int]
    lib.kdtree_verify_abi_version.restype = c_int
    lib.kdtree_verify_force_config.restype = c_int
    lib.kdtree_verify_force_config.argtypes = [c_int]
    lib.kdtree_verify_set_fp8_math.restype = c_int
    lib.kdtree_verify_set_fp8_math.argtypes = [c_int]
    lib.kdtree_verify_mma_ceiling.restype = c_int
    lib.kdtree_verify_mma_ceiling.argtypes = [c_int, c_int, c_int, c_void, c_void]
    lib.kdtree_verify_phase_clocks.restype = ctypes.c_longlong
    lib.kdtree_verify_phase_clocks.argtypes = [c_void, ctypes.c_size_t, c_int]
    lib.kdtree_verify_attn_flash_paged_cg.restype = c_int
    lib.kdtree_verify_attn_flash_paged_cg.argtypes = [
        c_void, c_i64, c_i64,  # q
        c_void, c_i64,  # k_extend
        c_void, c_i64,  # v_extend
        c_void, c_i64, c_i64,  # o
        c_void, c_i64, c_i64, c_int,  # k_buffer, stride, pool rows, kv dtype
        c_void, c_int,  # qo_indptr, is int64
        c_void, c_void, c_void, c_void,  # kv_indptr, kv_indices, custom_mask, mask_indptr
        c_int, c_int, c_int, c_int,  # bs, N, H, nsplit
        c_float, c_float, c_float,  # sm_scale, k_scale, v_scale
        c_void, ctypes.c_size_t,  # workspace
        c_void,  # stream
    ]


@functools.lru_cache(maxsize=8)
def open_cdll(path: Path) -> ctypes.CDLL:
    """The declared handle of the library at ``path`` (one per file per process)."""
    lib = ctypes.CDLL(str(path))
    declare(lib)
    return lib


def configs(lib: ctypes.CDLL) -> list[dict]:
    """The configurations compiled in (kdtree_verify_config, kdtree_verify_config_name)."""
    rows = []
    for i in range(lib.kdtree_verify_num_configs()):
        cfg = KdtConfig()
        if lib.kdtree_verify_config(i, ctypes.byref(cfg)) != 0:
            raise RuntimeError(f"kdtree_verify_config({i}) failed")
        rows.append({"index": i, "kernel": lib.kdtree_verify_config_name(i).decode(), "block_m": cfg.block_m,
                     "block_n": cfg.block_n, "stages": cfg.stages, "threads": cfg.threads,
                     "dynamic_smem": cfg.dynamic_smem, "arch": cfg.arch,
                     "kv_dtypes": tuple(n for n, d in KV_DTYPES.items() if cfg.kv_dtypes >> d.code & 1),
                     "fp8_config": cfg.fp8_config, "fp8_e4m3_config": cfg.fp8_e4m3_config,
                     "fp8_e4m3_default": bool(cfg.fp8_e4m3_default), "auto_priority": cfg.auto_priority,
                     "min_rows": cfg.min_rows, "max_rows": cfg.max_rows, "cluster": cfg.cluster})
    return rows
