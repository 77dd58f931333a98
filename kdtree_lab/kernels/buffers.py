"""Host-metadata checks of a verify call's buffers in SGLang's layout, the one set the loader and
:class:`~kdtree_lab.kernels.attention.VerifyAttention` apply before a launch."""

from __future__ import annotations

import torch

from ..core.dtypes import KV_DTYPES, kv_dtype_of
from ..core.mla import D_QK, D_V


def check_buffers(q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                  max_extend_len: int, workspace, need_ws: int, device_type: str = "cuda") -> None:
    """Refuse, in one line naming the buffer, a call whose buffers the kernel cannot read: dtypes, shapes, layout,
    one device of ``device_type``, a workspace of at least ``need_ws`` bytes. Host metadata only (no device read),
    so capture-safe. Raises ValueError (NotImplementedError for a pool dtype no kernel reads)."""

    def want(cond: bool, msg: str) -> None:
        if not cond:
            raise ValueError(msg)

    for name, t in (("q", q), ("k_extend", k_extend), ("v_extend", v_extend), ("o", o)):
        want(t.dtype == torch.bfloat16, f"{name}: expected bfloat16, found {t.dtype}")
        want(t.dim() == 3, f"{name}: expected 3 dims, found shape {tuple(t.shape)}")
        want(t.stride(-1) == 1, f"{name}: expected the last dim contiguous, found strides {t.stride()}")
    if kv_dtype_of(k_buffer.dtype) is None:
        raise NotImplementedError(f"k_buffer: expected a pool of {[d.torch for d in KV_DTYPES.values()]}, found "
                                  f"{k_buffer.dtype}")
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
    where = "CUDA" if device_type == "cuda" else device_type
    want(len(devices) == 1 and next(iter(devices)).type == device_type,
         f"all buffers must be on one {where} device, found {sorted(str(d) for d in devices)}")
    want(workspace.dtype == torch.uint8 and workspace.is_contiguous(), "workspace: expected a contiguous uint8 tensor")
    want(workspace.numel() >= need_ws, f"workspace: expected at least {need_ws} bytes for bs={bs}, "
                                       f"N={max_extend_len}, H={heads}, found {workspace.numel()}")
