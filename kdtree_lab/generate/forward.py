"""The model's forward in the absorbed MLA form over the paged latent pool, the way a server runs it.

Each layer computes its tokens' 576-wide latent query rows (the no-rope query times W_UK, then the rope part) and
latent key rows (the normalised 512-wide latent, then the rope key), writes the key rows into the pool at the
tokens' slots, and hands both to an attention function, which returns the 512-wide latent output; W_UV and
``o_proj`` then give the layer's output. The arithmetic follows transformers' DeepseekV3 modules op for op (RMSNorm
in fp32, interleaved rope from fp32 angles cast to the weights' dtype), so the fp32 form equals the transformers
model's logits up to fp32 rounding (tests/test_generate.py).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from ..core.mla import D_V
from .model import NOPE, ROPE, VHEAD, Layer, Weights

# attention(layer, q [T, H, 576], k [T, 576]) -> latent output [T, H, 512]
Attention = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' DeepseekV3RMSNorm: normalise in fp32, cast back, scale."""
    dtype = x.dtype
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(dtype)


def rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Interleaved rope (DeepSeek's pairs (x0, x1), (x2, x3), ...) on the last 64 dims of ``x`` [T, ..., 64] at
    ``positions`` int64 [T]; angles in fp32, cos / sin cast to x's dtype as transformers does."""
    freqs = positions.float()[:, None] * inv_freq[None, :]  # [T, 32]
    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def qk(layer: Layer, h: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, heads: int):
    """A layer's latent query rows [T, H, 576] and latent key rows [T, 576] from the residual ``h`` [T, hidden]."""
    t = h.shape[0]
    x = rms(h, layer.ln_in, layer.ln_in_eps)
    q = F.linear(x, layer.wq).view(t, heads, NOPE + ROPE)
    q_nope, q_rope = q[..., :NOPE], q[..., NOPE:]
    ckv = F.linear(x, layer.wkv_a)
    c = rms(ckv[:, :D_V], layer.ln_kv, layer.ln_kv_eps)
    q_rope = rope(q_rope, positions, inv_freq)
    k_rope = rope(ckv[:, D_V:], positions, inv_freq)
    q_lat = torch.einsum("thn,hnc->thc", q_nope, layer.w_uk)
    return torch.cat([q_lat, q_rope], dim=-1).contiguous(), torch.cat([c, k_rope], dim=-1).contiguous()


def out(layer: Layer, h: torch.Tensor, o_lat: torch.Tensor) -> torch.Tensor:
    """The residual after the layer, from the latent attention output ``o_lat`` [T, H, 512]."""
    t, heads = o_lat.shape[0], o_lat.shape[1]
    v = torch.einsum("thc,hvc->thv", o_lat.to(layer.w_uv.dtype), layer.w_uv).reshape(t, heads * VHEAD)
    h = h + F.linear(v, layer.wo)
    x = rms(h, layer.ln_post, layer.ln_post_eps)
    return h + F.linear(F.silu(F.linear(x, layer.gate)) * F.linear(x, layer.up), layer.down)


def head(w: Weights, h: torch.Tensor) -> torch.Tensor:
    """Logits [T, 256] (fp32) from the residual."""
    return F.linear(rms(h, w.norm, w.norm_eps), w.head).float()


def forward(w: Weights, ids: torch.Tensor, positions: torch.Tensor, attention: Attention, layers: int | None = None,
            write: Callable[[int, torch.Tensor], None] | None = None) -> torch.Tensor:
    """Logits [T, 256] of tokens ``ids`` int64 [T] at ``positions`` int64 [T] through the first ``layers`` layers
    (default all; the draft is 1), then the final norm and head. ``write(layer, k_rows)`` stores the tokens' key rows
    in the pool before ``attention(layer, q, k)`` reads them (None: nothing is written, as the reference keeps its
    own rows)."""
    h = w.embed[ids]
    for i, layer in enumerate(w.layers[: layers or len(w.layers)]):
        q, k = qk(layer, h, positions, w.inv_freq, w.spec.heads)
        if write is not None:
            write(i, k)
        h = out(layer, h, attention(i, q, k))
    return head(w, h)
