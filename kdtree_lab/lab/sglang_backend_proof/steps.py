"""One verify step as SGLang makes it: fresh requests over the pool, the draft (SGLang's own EAGLE tree and chain
code, or our DDTree masks in its layout), the forward batch, the layer's inputs, the backend's forward, and the
fp64 oracle on the same step from host truth."""

from __future__ import annotations

from dataclasses import dataclass
from unittest import mock

import numpy as np
import torch

from ...checks.batch import VerifyBatch, full_tree_mask
from ...checks.oracle import reference
from ...core.mla import D_QK, D_V
from ...core.tree import random_ddtree
from .settings import VOCAB, ProofError
from .stack import Stack


class Rand:
    """The run's randomness, drawn fresh each run from ``seed``: a CPU generator (slot permutations, draft logits),
    one on the device (pool contents, q / k: pools are tens of MB) and a numpy generator (lengths, trees)."""

    def __init__(self, seed: int, device: torch.device):
        self.cpu = torch.Generator().manual_seed(seed)
        self.dev = torch.Generator(device=device).manual_seed(seed + 1)
        self.np = np.random.default_rng(seed)


@dataclass
class Requests:
    """One verify step's requests: host truth for the oracle (prefix lengths and slots) and SGLang's tensors."""

    lens: list[int]
    prefix_slots: list[torch.Tensor]  # int64 per request
    req_pool_indices: torch.Tensor  # int64 [bs] (rows 1..bs: row 0 is SGLang's padding row)
    seq_lens: torch.Tensor  # int64 [bs]
    out_cache_loc: torch.Tensor  # int64 [bs * N]: the draft tokens' slots

    @property
    def bs(self) -> int:
        return len(self.lens)


def draw_lengths(bs: int, longest: int, rng: np.random.Generator) -> list[int]:
    """Prefix lengths for ``bs`` requests in 1..longest: a length-1 request and a longest one whenever there are
    several, the rest uniform (so splits, short and long rows all appear)."""
    if longest < 1 or bs < 1:
        raise ValueError(f"draw_lengths: expected bs >= 1 and longest >= 1, found bs={bs}, longest={longest}")
    lens = [int(x) for x in rng.integers(1, longest + 1, size=bs)]
    if bs >= 2:
        at = rng.permutation(bs)
        lens[int(at[0])] = longest
        if bs >= 3:
            lens[int(at[1])] = 1
    return lens


def fresh_requests(stack: Stack, bs: int, rnd: Rand, lens: list[int] | None = None) -> Requests:
    """``bs`` new requests over the pool: new prefix lengths, slots drawn at random from the pool (slot 0 is
    SGLang's padding slot), their rows of req_to_token written as SGLang's allocator leaves them (prefix, then the
    draft tokens' slots), and new pool contents (random latent rows; an fp8 pool holds them cast, unscaled, as
    SGLang writes them)."""
    n, dev = stack.n, stack.device
    lens = lens or draw_lengths(bs, stack.settings.context - n - 1, rnd.np)
    need = sum(lens) + bs * n
    if need > stack.pool.size:
        raise ValueError(f"fresh_requests: {need} slots needed, the pool holds {stack.pool.size}")
    perm = torch.randperm(stack.pool.size, generator=rnd.cpu)[:need].to(dev) + 1
    req_to_token = stack.req_pool.req_to_token
    prefix, start = [], 0
    for r, length in enumerate(lens):
        prefix.append(perm[start:start + length])
        start += length
    out_cache_loc = perm[start:start + bs * n]
    for r, length in enumerate(lens):
        req_to_token[r + 1, :length] = prefix[r].to(torch.int32)
        req_to_token[r + 1, length:length + n] = out_cache_loc[r * n:(r + 1) * n].to(torch.int32)
    buf = stack.k_buffer
    buf.copy_(torch.randn(buf.shape, generator=rnd.dev, device=dev, dtype=torch.bfloat16).to(buf.dtype))
    return Requests(lens, prefix, torch.arange(1, bs + 1, dtype=torch.int64, device=dev),
                    torch.tensor(lens, dtype=torch.int64, device=dev), out_cache_loc)


def draft_step(stack: Stack, reqs: Requests, rnd: Rand, tree_mask_buf: torch.Tensor | None = None, mask_mode=None,
               fill_prefix_mask: bool = True,
               num_draft: int | None = None, steps: int | None = None):
    """SGLang's verify input for ``reqs``. EAGLE trees and chains: the draft loop of eagle_worker_v2 on random
    draft logits (SGLang's ``select_top_k_tokens`` run eagerly, ``organize_draft_results``), then
    ``build_tree_kernel_efficient`` on SGLang's Triton tree kernel (its XPU path; the CUDA one is a JIT module
    not carried to the device), into ``tree_mask_buf`` when given (the target backend's verify mask, as the draft
    worker writes it before a graph replay). DDTree: our trees' masks in SGLang's layout. ``num_draft`` /
    ``steps``: another width than the server's (adaptive speculation changes it per step). Returns
    (EagleVerifyInput, the mask as the oracle reads it)."""
    sg, d = stack.sg, stack.draft
    n, steps = num_draft or d.num_draft, steps or d.steps
    bs, dev = reqs.bs, stack.device
    mode = mask_mode if mask_mode is not None else sg.TreeMaskMode.FULL_MASK
    if d.kind == "ddtree":
        trees = [random_ddtree(n, rnd.np, depth=max(1, min(n - 1, 8))) for _ in range(bs)]
        mask = full_tree_mask(reqs.lens, trees).to(dev)
        if tree_mask_buf is not None:
            tree_mask_buf[: mask.numel()].copy_(mask)
            mask = tree_mask_buf
        positions = torch.cat([torch.from_numpy(t.positions(length)) for t, length in zip(trees, reqs.lens)]).to(dev)
        draft_tokens = torch.randint(VOCAB, (bs * n,), generator=rnd.cpu).to(dev)
        ri = rnt = rns = None
    else:
        topk = d.topk

        def probs(rows):
            return torch.softmax(torch.randn(rows, VOCAB, generator=rnd.cpu), dim=-1).to(dev)

        topk_p, topk_index = sg.fast_topk(probs(bs), topk, dim=-1)
        scores = hidden = None
        score_list, token_list, parents_list = [], [], []
        with torch.compiler.set_stance("force_eager"):  # SGLang torch.compiles the later steps; the math is this
            for i in range(steps):
                input_ids, hidden, scores, tree_info = sg.select_top_k_tokens(i, topk_p, topk_index, hidden, scores,
                                                                              topk)
                score_list.append(tree_info[0])
                token_list.append(tree_info[1])
                parents_list.append(tree_info[2])
                if i == steps - 1:
                    break
                topk_p, topk_index = sg.fast_topk(probs(input_ids.numel()), topk, dim=-1)
        parent_list, top_scores_index, tokens = sg.organize_draft_results(score_list, token_list, parents_list, n)
        bonus = torch.randint(VOCAB, (bs,), generator=rnd.cpu).to(dev)
        with mock.patch.object(sg.eagle_utils, "build_tree_kernel_efficient_func", sg.sgl_build_tree_kernel_triton):
            mask, positions, ri, rnt, rns, draft_tokens = sg.build_tree_kernel_efficient(
                bonus, parent_list, top_scores_index, tokens, reqs.seq_lens, sum(reqs.lens), topk, steps, n, mode,
                tree_mask_buf, fill_prefix_mask=fill_prefix_mask)
    spec = sg.EagleVerifyInput(draft_token=draft_tokens, custom_mask=mask, positions=positions, retrieve_index=ri,
                               retrieve_next_token=rnt, retrieve_next_sibling=rns, retrieve_cum_len=None,
                               spec_steps=steps, topk=d.topk, draft_token_num=n,
                               capture_hidden_mode=sg.CaptureHiddenMode.FULL, seq_lens_sum=None, seq_lens_cpu=None)
    used = sum(n * (length + n) for length in reqs.lens)
    return spec, mask[:used].clone().to(torch.bool)


def eager_forward_batch(stack: Stack, reqs: Requests, spec):
    """The ForwardBatch a scheduler hands the target model for this verify step, bound to its KV plan by SGLang's
    translator (``bind_own_plan``: out_cache_loc, kv_loc_plan)."""
    sg = stack.sg
    fb = sg.ForwardBatch(forward_mode=sg.ForwardMode.TARGET_VERIFY, batch_size=reqs.bs, input_ids=spec.draft_token,
                         req_pool_indices=reqs.req_pool_indices, seq_lens=reqs.seq_lens,
                         out_cache_loc=reqs.out_cache_loc, seq_lens_sum=sum(reqs.lens),
                         seq_lens_cpu=reqs.seq_lens.cpu(), positions=spec.positions, spec_info=spec,
                         spec_algorithm=stack.algo, capture_hidden_mode=sg.CaptureHiddenMode.FULL)
    stack.translator.bind_own_plan(fb)
    return fb


def qkv(stack: Stack, tokens: int, rnd: Rand):
    """The attention layer's inputs as DeepSeek's absorbed MLA hands them over: q [T, H, 576], the tokens' own
    latent+rope key [T, 1, 576] and its latent part as the value (a view, as the model passes it)."""
    q = torch.randn(tokens, stack.num_heads, D_QK, generator=rnd.dev, device=stack.device, dtype=torch.bfloat16)
    k = torch.randn(tokens, 1, D_QK, generator=rnd.dev, device=stack.device, dtype=torch.bfloat16)
    return q, k, k[..., :D_V]


def forward(stack: Stack, backend, fb, q, k, v, save_kv_cache: bool) -> torch.Tensor:
    """``backend.forward_extend`` on one layer into a NaN-poisoned output (handed over as SGLang's own
    ``forward_batch._attn_output``); returns it as [T, H, 512]."""
    out = torch.full((q.shape[0], stack.num_heads * D_V), float("nan"), dtype=torch.bfloat16, device=stack.device)
    fb._attn_output = out
    got = backend.forward_extend(q, k, v, stack.layer, fb, save_kv_cache=save_kv_cache)
    if got.data_ptr() != out.data_ptr():
        raise ProofError("forward_extend did not write forward_batch._attn_output (SGLang 0.5.23 does)")
    return out.view(q.shape[0], stack.num_heads, D_V)


def eager_verify(stack: Stack, backend, reqs: Requests, spec, q, k, v, save_kv_cache: bool) -> torch.Tensor:
    """One eager target-verify step of ``backend``: a fresh forward batch of ``reqs`` and ``spec``, SGLang's
    ``init_forward_metadata`` on it, then :func:`forward`."""
    fb = eager_forward_batch(stack, reqs, spec)
    backend.init_forward_metadata(fb)
    return forward(stack, backend, fb, q, k, v, save_kv_cache=save_kv_cache)


def oracle(stack: Stack, reqs: Requests, q, k, v, mask: torch.Tensor) -> torch.Tensor:
    """The fp64 reference from host truth: the prefix slots fresh_requests drew (not SGLang's kv_indices), the pool,
    the draft tokens' own q / k / v and the tree mask the draft step made (N from q: the step's own width)."""
    bs, dev = reqs.bs, stack.device
    n = q.shape[0] // bs
    kv_indptr = torch.zeros(bs + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(reqs.lens), 0)
    mask_indptr = torch.zeros(bs + 1, dtype=torch.int64)
    mask_indptr[1:] = torch.cumsum(torch.tensor([n * (length + n) for length in reqs.lens]), 0)
    scale = stack.layer.k_scale_float if stack.layer.k_scale is not None else 1.0
    batch = VerifyBatch(q=q, k_extend=k, v_extend=v, o=torch.empty(0), k_buffer=stack.k_buffer,
                        v_buffer=stack.k_buffer[..., :D_V], qo_indptr=torch.arange(0, (bs + 1) * n, n, device=dev),
                        kv_indptr=kv_indptr.to(dev), kv_indices=torch.cat(reqs.prefix_slots), custom_mask=mask,
                        mask_indptr=mask_indptr.to(dev), max_extend_len=n, sm_scale=stack.layer.scaling,
                        k_scale=scale, v_scale=scale, prefix_lens=list(reqs.lens), live_bs=bs)
    return reference(batch)


def sync(device: torch.device) -> None:
    """Wait for the device (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
