"""The attention paths the generation loop can verify with, each called with SGLang's verify buffers.

A path is a function of one :class:`VerifyCall` that writes ``call.o``:

- ``ours``: the public ``kdtree_lab.VerifyAttention`` (plan once per N, run every step; capture-safe);
- ``hook``: the SGLang hook (``kdtree_lab.sglang.hook.VerifyHook``, mode on), called as SGLang's Triton backend
  calls its verify slot;
- ``sglang``: SGLang 0.5.23's own ``extend_attention_fwd``, the Triton verify path SGLang runs today;
- ``triton``: our Triton twin through ``VerifyAttention(impl="triton")`` (on a CPU in Triton's interpreter);
- ``reference``: fp32 in torch from the same buffers (``reference_attention``), eager only.

The draft's one-token decodes use one path for every verify path (``draft_decode``): SGLang's split-K
``decode_attention_fwd`` on a GPU with SGLang, the fp32 reference elsewhere, so a difference in step time between
verify paths is the verify's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..core.mla import D_V

PATHS = ("ours", "hook", "sglang", "triton", "reference")
CAPTURE_SAFE = ("ours", "hook", "sglang")  # paths a CUDA graph can hold (the reference syncs for its indptr reads)


@dataclass
class VerifyCall:
    """One verify call in SGLang's layout (``extend_attention_fwd``'s arguments for MLA target verify).

    q bf16 [T, H, 576]; k_extend bf16 [T, 1, 576]; v_extend bf16 [T, 1, 512] (a view of k_extend); o bf16 [T, H, 512];
    k_buffer the layer's pool [P, 1, 576]; qo_indptr int64 [bs + 1]; kv_indptr int32 [bs + 1]; kv_indices int64;
    custom_mask uint8 (SGLang's full mask: per request N x (L + N), row-major) or None (causal); mask_indptr int64
    [bs + 1]; N the draft tokens per request; sm_scale the logit scale."""

    q: torch.Tensor
    k_extend: torch.Tensor
    v_extend: torch.Tensor
    o: torch.Tensor
    k_buffer: torch.Tensor
    qo_indptr: torch.Tensor
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    custom_mask: torch.Tensor | None
    mask_indptr: torch.Tensor
    num_draft: int
    sm_scale: float
    k_scale: float = 1.0
    v_scale: float = 1.0


def reference_attention(q: torch.Tensor, k_buffer: torch.Tensor, ctx_slots: list[torch.Tensor], k_ext: torch.Tensor,
                        v_ext: torch.Tensor, rows: list[tuple[int, int]], masks: list[torch.Tensor | None],
                        sm_scale: float, k_scale: float = 1.0, v_scale: float = 1.0,
                        dtype: torch.dtype = torch.float32, budget_bytes: int = 1 << 31) -> torch.Tensor:
    """Attention of each request's rows over its context slots and its own extend rows, in ``dtype``.

    q [T, H, 576]; ctx_slots[b] int64 slots of request b's context in ``k_buffer``; k_ext [T, 576], v_ext [T, 512]
    the extend rows' own keys and values; rows[b] = (start, end) of request b's rows in q; masks[b] bool [n, n]
    (row sees column) or None for causal. Row chunks keep one chunk's logits under ``budget_bytes``. Returns o
    [T, H, 512] in ``dtype``."""
    out = torch.empty(q.shape[0], q.shape[1], D_V, dtype=dtype, device=q.device)
    h = q.shape[1]
    for (t0, t1), slots, mask in zip(rows, ctx_slots, masks, strict=True):
        n = t1 - t0
        if n == 0:
            continue
        kc = k_buffer[slots, 0].to(dtype)  # [L, 576]
        kx, vx = k_ext[t0:t1].to(dtype), v_ext[t0:t1].to(dtype)
        block = mask if mask is not None else torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        width = kc.shape[0] + n
        chunk = max(1, budget_bytes // max(1, 4 * h * width))
        for r0 in range(0, n, chunk):
            r1 = min(n, r0 + chunk)
            qq = q[t0 + r0:t0 + r1].to(dtype)  # [c, H, 576]
            lp = torch.einsum("chd,ld->chl", qq, kc).float() * (sm_scale * k_scale)
            lx = torch.einsum("chd,jd->chj", qq, kx).float() * sm_scale
            lx = lx.masked_fill(~block[r0:r1, None, :], float("-inf"))
            logits = torch.cat([lp, lx], dim=-1)
            p = torch.softmax(logits, dim=-1)
            o = (torch.einsum("chl,ld->chd", p[..., :kc.shape[0]].to(dtype), kc[:, :D_V]).float() * v_scale
                 + torch.einsum("chj,jd->chd", p[..., kc.shape[0]:].to(dtype), vx).float())
            out[t0 + r0:t0 + r1] = o.to(dtype)
    return out


def _reference(call: VerifyCall) -> torch.Tensor:
    """The ``reference`` path: fp32 attention from the call's own buffers (reads the indptr arrays on the host)."""
    qo = call.qo_indptr.tolist()
    kv = call.kv_indptr.tolist()
    mi = call.mask_indptr.tolist()
    rows, slots, masks = [], [], []
    for b in range(len(kv) - 1):
        n, length = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
        rows.append((qo[b], qo[b + 1]))
        slots.append(call.kv_indices[kv[b]:kv[b + 1]])
        if call.custom_mask is None:
            masks.append(None)
        else:
            full = call.custom_mask[mi[b]:mi[b] + n * (length + n)].view(n, length + n)
            masks.append(full[:, length:] != 0)
    out = reference_attention(call.q, call.k_buffer, slots, call.k_extend[:, 0], call.v_extend[:, 0], rows, masks,
                              call.sm_scale, call.k_scale, call.v_scale)
    call.o.copy_(out.to(call.o.dtype))
    return call.o


class Paths:
    """The verify paths of one loop: each plans its kernel once per N (the workspace allocated here, outside any
    capture). kv_dtype: the pool; heads: H; max_bs: the largest batch; impl: the ``VerifyAttention`` implementation
    ``ours`` and ``hook`` run (``cuda``: the library's choice on this GPU)."""

    def __init__(self, heads: int, kv_dtype: str, max_bs: int, device: torch.device, impl: str = "cuda"):
        self.heads, self.kv_dtype, self.max_bs, self.device, self.impl = heads, kv_dtype, max_bs, device, impl
        self._planned: dict[tuple[str, int], object] = {}

    def get(self, path: str, num_draft: int) -> Callable[[VerifyCall], torch.Tensor]:
        """The function of one call for ``path`` at ``num_draft`` rows per request."""
        if path not in PATHS:
            raise ValueError(f"path: expected one of {', '.join(PATHS)}, found {path!r}")
        if path == "reference":
            return _reference
        if path == "sglang":
            return _sglang
        key = (path, num_draft)
        if key not in self._planned:
            self._planned[key] = self._plan(path, num_draft)
        planned = self._planned[key]
        if path == "hook":
            return lambda c: _through_hook(planned, c)
        return lambda c: planned.run(c.q, c.k_extend, c.v_extend, c.k_buffer, c.qo_indptr, c.kv_indptr, c.kv_indices,
                                     c.custom_mask, c.mask_indptr, c.o, c.sm_scale, c.k_scale, c.v_scale)

    def _plan(self, path: str, num_draft: int):
        from ..kernels.attention import VerifyAttention

        if path == "hook":
            from ..sglang.hook import VerifyHook

            hook = VerifyHook("on", max_bs=self.max_bs, num_draft=num_draft, num_heads=self.heads, device=self.device,
                              kv_dtype=self.kv_dtype, impl=self.impl)
            if hook.refusal:
                raise ValueError(f"path hook: {hook.refusal}")
            return hook
        impl = "triton" if path == "triton" else self.impl
        return VerifyAttention(self.max_bs, num_draft, self.heads, self.kv_dtype, self.device, impl)

    def clear_status(self) -> None:
        """Zero every planned kernel's status word (a new run starts clean)."""
        for (path, _), planned in self._planned.items():
            (planned.attn if path == "hook" else planned).clear_status()

    def status(self) -> dict[str, int]:
        """The status flags each planned kernel raised (a host read, after the run); non-zero is bad metadata."""
        out = {}
        for (path, n), planned in self._planned.items():
            attn = planned.attn if path == "hook" else planned
            out[f"{path}-N{n}"] = int(attn.status())
        return out


def _through_hook(hook, c: VerifyCall) -> torch.Tensor:
    served = hook(c.q, c.k_extend, c.v_extend, c.o, c.k_buffer, c.k_buffer[..., :D_V], c.qo_indptr, c.kv_indptr,
                  c.kv_indices, c.custom_mask, True, c.mask_indptr, c.num_draft, c.k_scale, c.v_scale,
                  sm_scale=c.sm_scale)
    if not served:
        raise RuntimeError(f"the hook fell back to SGLang's kernel: {hook.stats.reasons}")
    return c.o


def _sglang(c: VerifyCall) -> torch.Tensor:
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    extend_attention_fwd(c.q, c.k_extend, c.v_extend, c.o, c.k_buffer, c.k_buffer[..., :D_V], c.qo_indptr,
                         c.kv_indptr, c.kv_indices, c.custom_mask, True, c.mask_indptr, c.num_draft, c.k_scale,
                         c.v_scale, sm_scale=c.sm_scale)
    return c.o


class DraftDecode:
    """One-token decodes for the draft: q [R, H, 576] rows, each over its own slot list (its context, its
    ancestors' draft rows and its own row, all written to the pool first). ``kind``: ``sglang`` (SGLang's split-K
    ``decode_attention_fwd``) or ``reference``."""

    MAX_SPLITS = 64

    def __init__(self, kind: str, heads: int, max_rows: int, device: torch.device):
        if kind not in ("sglang", "reference"):
            raise ValueError(f"draft decode: expected sglang or reference, found {kind!r}")
        self.kind, self.heads, self.device = kind, heads, device
        if kind == "sglang":
            self.logits = torch.empty(max_rows, heads, self.MAX_SPLITS, D_V, dtype=torch.float32, device=device)
            self.lse = torch.empty(max_rows, heads, self.MAX_SPLITS, dtype=torch.float32, device=device)
            self.splits = torch.empty(max_rows, dtype=torch.int32, device=device)

    def __call__(self, q: torch.Tensor, k_buffer: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
                 sm_scale: float) -> torch.Tensor:
        rows = q.shape[0]
        if self.kind == "reference":
            return _context_only(q, k_buffer, kv_indptr.tolist(), kv_indices, sm_scale)
        import triton
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
        from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

        o = torch.empty(rows, self.heads, D_V, dtype=torch.bfloat16, device=self.device)
        seq_lens = (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int32)
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        get_num_kv_splits_triton[(1,)](self.splits, seq_lens, rows, 1, self.heads, 1, self.MAX_SPLITS, sms,
                                       MAX_NUM_SEQ=max(16, triton.next_power_of_2(rows)))
        decode_attention_fwd(q, k_buffer, k_buffer[..., :D_V], o, kv_indptr, kv_indices, self.logits, self.lse,
                             self.splits, self.MAX_SPLITS, sm_scale, 1.0, 1.0, has_mla=True)
        return o


def _context_only(q: torch.Tensor, k_buffer: torch.Tensor, kv: list[int], kv_indices: torch.Tensor,
                  sm_scale: float) -> torch.Tensor:
    """fp32 attention of row b over exactly the slots kv_indices[kv[b]:kv[b+1]] (no extend block)."""
    out = torch.empty(q.shape[0], q.shape[1], D_V, dtype=torch.float32, device=q.device)
    for b in range(q.shape[0]):
        k = k_buffer[kv_indices[kv[b]:kv[b + 1]], 0].float()
        p = torch.softmax(torch.einsum("hd,ld->hl", q[b].float(), k) * sm_scale, dim=-1)
        out[b] = p @ k[:, :D_V]
    return out
