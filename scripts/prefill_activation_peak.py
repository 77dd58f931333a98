"""Measure the activation peak of one chunked-prefill step of an MLA MoE model on one TP rank, phase by phase, with
``torch.cuda.max_memory_allocated``, and set it beside kdtree_lab.prefill_activations' model of the same phases.

Each phase runs SGLang 0.5.23's prefill sequence for one decoder layer (MHA attention for a prompt's first chunk,
absorbed MLA attention for a chunk after a prefix; the Marlin or Triton MoE, or the dense MLP), the logits and the
draft's extend, with the tensors allocated where and as SGLang allocates them (the same shapes, dtypes and order;
data/contracts/sglang-0.5.23-prefill-activations.yaml names each site) and the work done by:

- SGLang's own Triton ``extend_attention_fwd`` when ``sglang`` imports (it allocates nothing of its own; without it
  the attention kernel is not run and the JSON says so);
- cuBLAS GEMMs through torch for the linear layers, the absorbed bmm and the router's bf16 -> fp32 GEMM;
- small Triton kernels of this script for SGLang's CUDA-only ops that write a preallocated output (RMSNorm out of
  place, silu_and_mul), and torch for the MoE GEMMs: the Marlin / Triton expert kernels (sgl_kernel, JIT) are not
  on a bare GPU, so their GEMMs run as torch.mm into the same caches, 256 rows at a time (the one gathered 256-row
  input block is this emulation's own allocation, recorded as ``emulation_overhead_bytes``); one expert weight
  serves every expert (weights are not activations).

In-place ops (add-RMSNorm, RoPE, the KV-pool write, the NCCL all-reduce of a prefill-sized tensor) allocate
nothing in SGLang and are not run. Weights, the KV pool and the routing plan are allocated before each phase's
baseline; the cuBLAS workspace is measured once (the first GEMMs of the process) and added to every phase, as the
model counts it. Bounded by --budget-s (default 120 s, then no new chunk starts; the whole run stays under 3 minutes): cases not
reached are listed in ``skipped``, a phase that fails keeps its error, and either makes ``complete`` false;
Ctrl-C writes what was measured with ``interrupted`` true. Needs a CUDA GPU, torch and triton; ``--dry-run`` runs the same code on the CPU at tiny
sizes to check it (no memory figures).

    python scripts/prefill_activation_peak.py --out data/results/h200/<date>-prefill-activations/prefill-activations.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdtree_lab.budget import prefill_activations as pa  # noqa: E402

DEFAULT_CASES = "kimi-k2:int4:8,deepseek-v3:fp8:8,deepseek-v2-lite:bf16:1"
DEFAULT_CHUNKS = "2048,4096,8192,16384"
ROW_BLOCK = 256  # rows per emulated expert-GEMM block


def _kernels():
    """The script's Triton kernels (RMSNorm into a new output, silu_and_mul into a given one)."""
    import triton
    import triton.language as tl

    @triton.jit
    def rmsnorm_kernel(x_ptr, w_ptr, o_ptr, n, stride_x, stride_o, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
        var = tl.sum(x * x, axis=0) / n
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * stride_o + offs, (x * tl.rsqrt(var + eps) * w).to(o_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def silu_mul_kernel(x_ptr, o_ptr, n, stride_x, stride_o, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = col < n
        g = tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + row * stride_x + n + col, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * stride_o + col, (g * tl.sigmoid(g) * u).to(o_ptr.dtype.element_ty), mask=mask)

    return rmsnorm_kernel, silu_mul_kernel


class Ops:
    """The elementwise ops, as kernels that allocate only their output (Triton on a GPU, torch in a dry run)."""

    def __init__(self, device: str):
        import torch

        self.torch, self.gpu = torch, device == "cuda"
        if self.gpu:
            self.rms_k, self.silu_k = _kernels()

    def rmsnorm(self, x, w):  # sgl_kernel rmsnorm: a new [rows, n] output
        torch = self.torch
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if self.gpu:
            import triton

            self.rms_k[(x.shape[0],)](x, w, out, x.shape[-1], x.stride(0), out.stride(0), 1e-6,
                                      BLOCK=triton.next_power_of_2(x.shape[-1]))
        else:
            out.copy_(x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w)
        return out

    def silu_and_mul(self, x, out):  # SiluAndMul / sgl_kernel silu_and_mul: writes out [rows, n]
        n = out.shape[-1]
        if self.gpu:
            self.silu_k[(x.shape[0], math.ceil(n / 1024))](x, out, n, x.stride(0), out.stride(0), BLOCK=1024)
        else:
            out.copy_(self.torch.nn.functional.silu(x[:, :n]) * x[:, n:])
        return out

    def linear_fp32(self, x, w):  # linear_bf16_fp32: cuBLAS bf16 x bf16 -> fp32
        torch = self.torch
        try:
            return torch.mm(x, w.t(), out_dtype=torch.float32)
        except (TypeError, RuntimeError):
            out = torch.empty((x.shape[0], w.shape[0]), dtype=torch.float32, device=x.device)
            for s in range(0, x.shape[0], ROW_BLOCK):
                out[s:s + ROW_BLOCK] = x[s:s + ROW_BLOCK] @ w.t()
            return out


def _attention_kernel():
    try:
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

        return extend_attention_fwd
    except Exception as exc:  # SGLang not carried: record why
        return str(exc).splitlines()[0][:200]


class Case:
    """One model / quantisation / TP: its weights (one layer's), made once."""

    def __init__(self, model: str, quant: str, tp: int, device: str, ops: Ops, sms: int):
        import torch

        self.torch, self.device, self.ops, self.sms = torch, device, ops, sms
        self.model, self.quant, self.tp = model, quant, tp
        self.arch = pa.architecture(model)
        self.runner = pa.moe_runner(quant)
        env = pa.symbols(self.arch, tp=tp, tokens=1, requests=1, prefix=0, quant=quant, captured_layers=0, sms=sms)
        self.env = env

        def w(*shape):  # values do not set allocations: random on a GPU, zeros (lazily paged) in a dry run
            if device == "cpu":
                return torch.zeros(*shape, dtype=torch.bfloat16)
            return torch.empty(*shape, dtype=torch.bfloat16, device=device).normal_(0, 0.02, generator=None)

        D, H, Lq, C, Rd, Nd, Vd = (env[k] for k in ("D", "H", "Lq", "C", "Rd", "Nd", "Vd"))
        self.D, self.H, self.Lq, self.C, self.Rd, self.Nd, self.Vd = D, H, Lq, C, Rd, Nd, Vd
        self.w_qkv_a = w(Lq + C + Rd, D)
        self.w_q = w(H * (Nd + Rd), Lq if Lq else D)  # q_b_proj (or q_proj without q_lora)
        self.norm_q, self.norm_kv = w(max(Lq, 1)) + 1, w(C) + 1
        self.w_kv_b = w(H * (Nd + Vd), C)
        self.w_kc = w(H, Nd, C)
        self.w_vc = w(H, C, Vd)
        self.w_o = w(D, H * Vd)
        E, Er, K, I, Is, Id = (env[k] for k in ("E", "Er", "K", "I", "Is", "Id"))
        self.E, self.Er, self.K, self.I, self.Is, self.Id = E, Er, K, I, Is, Id
        self.w_gate = w(Er, D)
        self.w1, self.w2 = w(2 * I, D), w(D, I)  # one expert's, shared by all (see the module docstring)
        self.w_sgu, self.w_sd = (w(2 * Is, D), w(D, Is)) if Is else (None, None)
        self.w_dgu, self.w_dd = w(2 * Id, D), w(D, Id)
        self.w_lm = w(env["Vt"], D)
        self.w_draft_qkv, self.w_draft_o = w(3 * H * 128, 2 * D), w(D, H * 128)
        self.w_fc = w(D, max(pa.CAPTURED_LAYERS.values()) * D)  # the draft's fc over the captured layers

    def routing(self, T: int):
        """top-k expert ids per token (distinct, random) and the rows of each 256-row block's tokens."""
        torch = self.torch
        g = torch.Generator(device="cpu").manual_seed(T)
        ids = torch.rand(T, self.Er, generator=g).topk(self.K - (self.E - self.Er), dim=1).indices
        if self.E > self.Er:  # the fused shared expert is every token's last
            ids = torch.cat([ids, torch.full((T, 1), self.Er)], dim=1)
        weights = torch.rand(T, self.K, generator=g)
        token_of_slot = torch.arange(T * self.K) // self.K
        return ids.to(self.device, torch.int32), weights.to(self.device), token_of_slot.to(self.device)


class Meter:
    """Peak bytes above a baseline (allocated and reserved) around one phase."""

    def __init__(self, torch, gpu: bool):
        self.torch, self.gpu = torch, gpu

    def __enter__(self):
        torch = self.torch
        if self.gpu:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            self.base = torch.cuda.memory_allocated()
            self.base_reserved = torch.cuda.memory_reserved()
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc):
        torch = self.torch
        if self.gpu:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated() - self.base
            self.peak_reserved = torch.cuda.max_memory_reserved() - self.base_reserved
            self.left = torch.cuda.memory_allocated() - self.base
        else:
            self.peak = self.peak_reserved = self.left = None
        return False


def fp8_input(c: Case, x):
    """Fp8LinearMethod's per-token-group-128 activation quant before a block-fp8 GEMM (None for other weights)."""
    torch = c.torch
    if c.quant != "fp8":
        return None
    return x.to(torch.float8_e4m3fn), torch.empty((x.shape[0], -(-x.shape[1] // 128)), dtype=torch.float32,
                                                  device=x.device)


def run_attention(c: Case, path: str, T: int, P: int, x, attn, pool):
    """One attention half as SGLang runs it; returns the o_proj output [T, D] (everything else freed)."""
    torch, ops = c.torch, c.ops
    D, H, Lq, C, Rd, Nd, Vd = c.D, c.H, c.Lq, c.C, c.Rd, c.Nd, c.Vd
    quant = fp8_input(c, x)
    qkv = x @ c.w_qkv_a.t()  # fused_qkv_a_proj_with_mqa [T, Lq + C + Rd] (held to the end of attention)
    del quant
    q_a, latent = qkv.split([Lq, C + Rd], dim=-1)
    k_pe = latent[:, C:].unsqueeze(1)
    dev = x.device
    qo_indptr = torch.tensor([0, T], dtype=torch.int32, device=dev)
    kv_indptr = torch.tensor([0, P], dtype=torch.int32, device=dev)
    if path == "mha":
        q_in = ops.rmsnorm(q_a, c.norm_q) if Lq else x
        kv_a = ops.rmsnorm(latent[:, :C], c.norm_kv)
        q = (q_in @ c.w_q.t()).view(T, H, Nd + Rd)
        del q_in
        kv = (kv_a @ c.w_kv_b.t()).view(T, H, Nd + Vd)
        k = kv.new_empty(T, H, Nd + Rd)  # _concat_and_cast_mha_k
        k[..., :Nd] = kv[..., :Nd]
        k[..., Nd:] = k_pe
        del kv_a
        o = q.new_empty((T, H * Vd))
        v = kv[..., Nd:].contiguous()
        if callable(attn):
            attn(q, k, v, o.view(T, H, Vd), pool["mha_k"], pool["mha_v"], qo_indptr, kv_indptr, pool["no_prefix"],
                 None, True, None, T, 1.0, 1.0, sm_scale=(Nd + Rd) ** -0.5)
        del v
        quant = fp8_input(c, o)
        out = o @ c.w_o.t()
        del quant, q, k, kv, o
    else:
        q_in = ops.rmsnorm(q_a, c.norm_q) if Lq else x
        k_nope = ops.rmsnorm(latent[:, :C], c.norm_kv).unsqueeze(1)
        q = (q_in @ c.w_q.t()).view(T, H, Nd + Rd)
        del q_in
        q_nope, q_pe = q.split([Nd, Rd], dim=-1)
        q_nope_out = torch.bmm(q_nope.transpose(0, 1), c.w_kc).transpose(0, 1)
        qc = torch.cat([q_nope_out, q_pe], dim=-1)
        kc = torch.cat([k_nope, k_pe], dim=-1)
        o = qc.new_empty((T, H * C))
        kv_indices = pool["kv_indices"][:P]
        if callable(attn):
            attn(qc, kc, k_nope, o.view(T, H, C), pool["latent"], pool["latent"][..., :C], qo_indptr, kv_indptr,
                 kv_indices, None, True, None, T, 1.0, 1.0, sm_scale=(Nd + Rd) ** -0.5)
        bmm_out = torch.empty((T, H * Vd), dtype=o.dtype, device=dev)
        torch.bmm(o.view(T, H, C).transpose(0, 1), c.w_vc, out=bmm_out.view(T, H, Vd).transpose(0, 1))
        quant = fp8_input(c, bmm_out)
        out = bmm_out @ c.w_o.t()
        del quant, q, q_nope_out, qc, kc, k_nope, o, bmm_out, q_nope, q_pe
    del qkv, q_a, latent, k_pe
    return out


def run_mlp(c: Case, kind: str, T: int, h, plan):
    """The MLP half on its input h [T, D]; returns the layer's output [T, D]."""
    torch, ops = c.torch, c.ops
    D = c.D
    if kind == "dense":
        quant = fp8_input(c, h)
        gate_up = h @ c.w_dgu.t()
        del quant
        act = ops.silu_and_mul(gate_up, gate_up.new_empty(T, c.Id))
        quant = fp8_input(c, act)
        out = act @ c.w_dd.t()
        del quant, gate_up, act
        return out
    ids, weights, token_of_slot = plan
    shared = None
    if c.Is:
        gu = h @ c.w_sgu.t()
        act = ops.silu_and_mul(gu, gu.new_empty(T, c.Is))
        shared = act @ c.w_sd.t()
        del gu, act
    router = ops.linear_fp32(h, c.w_gate)
    topk_w = torch.empty((T, c.K), dtype=torch.float32, device=h.device)
    topk_ids = torch.empty((T, c.K), dtype=torch.int32, device=h.device)
    topk_w.copy_(weights)
    topk_ids.copy_(ids)
    K, E, I = c.K, c.E, c.I
    bm = pa.marlin_block_m(T, K, E) if c.runner == "marlin" else pa.TRITON_MOE_BLOCK_M
    padded = (T * K + (E + 1) * (bm - 1)) if T * K >= E + 1 else T * K * bm
    padded = -(-padded // 4) * 4
    sorted_ids = torch.empty(padded, dtype=torch.int32, device=h.device)
    expert_ids = torch.empty(-(-padded // bm), dtype=torch.int32, device=h.device)
    cumsum = torch.empty(E + 2, dtype=torch.int32, device=h.device)
    post = torch.empty(2, dtype=torch.int32, device=h.device)
    slots = T * K

    def gemm1(cache1):
        for s in range(0, slots, ROW_BLOCK):
            rows = h.index_select(0, token_of_slot[s:s + ROW_BLOCK])
            torch.mm(rows, c.w1.t(), out=cache1[s:s + ROW_BLOCK])
            del rows

    def gemm2(a, cache3):
        for s in range(0, slots, ROW_BLOCK):
            torch.mm(a[s:s + ROW_BLOCK], c.w2.t(), out=cache3[s:s + ROW_BLOCK])

    if c.runner == "marlin":
        workspace = torch.zeros(c.sms * 4, dtype=torch.int32, device=h.device)
        cache2 = torch.empty((slots, I), dtype=h.dtype, device=h.device)
        cache13 = torch.empty((slots * max(2 * I, D),), dtype=h.dtype, device=h.device)
        cache1 = cache13[: slots * 2 * I].view(-1, 2 * I)
        gemm1(cache1)
        ops.silu_and_mul(cache1, cache2)
        cache3 = cache13[: slots * D].view(-1, D)
        gemm2(cache2, cache3)
        cache3.view(T, K, D).mul_(topk_w.unsqueeze(-1))
        out = torch.empty_like(h)
        torch.sum(cache3.view(T, K, D), dim=1, out=out)
        del workspace, cache2, cache13, cache1, cache3
    else:
        a1 = h.to(torch.float8_e4m3fn) if c.quant == "fp8" else None
        a1_scale = torch.empty((T, -(-D // 128)), dtype=torch.float32, device=h.device) if a1 is not None else None
        cache1 = torch.empty((slots, 2 * I), dtype=h.dtype, device=h.device)
        gemm1(cache1)
        del a1, a1_scale
        cache2 = torch.empty((slots, I), dtype=h.dtype, device=h.device)
        ops.silu_and_mul(cache1, cache2)
        del cache1
        cache3 = torch.empty((T, K, D), dtype=h.dtype, device=h.device)
        a2 = cache2.to(torch.float8_e4m3fn) if c.quant == "fp8" else None
        a2_scale = torch.empty((slots, -(-I // 128)), dtype=torch.float32, device=h.device) if a2 is not None else None
        gemm2(cache2, cache3.view(slots, D))
        del a2, a2_scale
        cache3.mul_(topk_w.unsqueeze(-1))
        out = h  # FusedMoE inplace: the sum lands in the experts' input
        torch.sum(cache3, dim=1, out=out)
        del cache2, cache3
    if shared is not None:
        out.add_(shared)
    del router, topk_w, topk_ids, sorted_ids, expert_ids, cumsum, post, shared
    return out


def phase_layer(c: Case, attn_path: str, mlp: str, T: int, R: int, P: int, A: int, attn, pool, plan):
    torch = c.torch
    dev = c.device
    fwd = forward_scope(c, T, P, A, pool)
    x = torch.empty((T, c.D), dtype=torch.bfloat16, device=dev).normal_()  # the layer input
    h = run_attention(c, attn_path, T, P, x, attn, pool)
    out = run_mlp(c, mlp, T, h, plan)
    del x, h, out, fwd


def forward_scope(c: Case, T: int, P: int, A: int, pool):
    torch = c.torch
    dev = c.device
    return [torch.zeros(T, dtype=torch.int64, device=dev), torch.zeros(T, dtype=torch.int64, device=dev),
            torch.zeros(T, dtype=torch.int64, device=dev), torch.empty(P, dtype=torch.int64, device=dev),
            torch.empty((T, c.D), dtype=torch.bfloat16, device=dev),
            torch.empty((T, A * c.D), dtype=torch.bfloat16, device=dev)]


def phase_logits(c: Case, T: int, R: int, P: int, A: int, pool):
    torch = c.torch
    fwd = forward_scope(c, T, P, A, pool)
    final = torch.empty((T, c.D), dtype=torch.bfloat16, device=c.device).normal_()
    last = torch.arange(R, device=c.device) * (T // R) + T // R - 1
    pruned = final[last]
    local = pruned @ c.w_lm.t()
    gathered = torch.empty((R, local.shape[1] * c.tp), dtype=local.dtype, device=c.device)
    for r in range(c.tp):  # the all-gather's output, filled from this rank's shard
        gathered[:, r * local.shape[1]:(r + 1) * local.shape[1]].copy_(local)
    del local, pruned
    logits = gathered[:, : c.arch.vocab_size].float()
    del logits, gathered, final, fwd


def phase_draft(c: Case, T: int, A: int):
    """The draft's extend over the chunk (an estimate of its width: the target's, as the model takes it)."""
    torch, ops = c.torch, c.ops
    dev, D, H = c.device, c.D, c.H
    hidden = torch.empty((T, max(A, 1) * D), dtype=torch.bfloat16, device=dev).normal_()
    meta = torch.zeros(3 * T, dtype=torch.int64, device=dev)
    emb = torch.empty((T, D), dtype=torch.bfloat16, device=dev).normal_()
    fc = hidden @ c.w_fc[:, : A * D].t() if A else None
    cat = torch.cat([emb, fc if fc is not None else hidden], dim=-1)
    qkv = cat @ c.w_draft_qkv.t()
    o = torch.empty((T, H * 128), dtype=torch.bfloat16, device=dev)
    out = o @ c.w_draft_o.t()
    del cat, qkv, o
    gate_up = out @ c.w_dgu.t()
    act = ops.silu_and_mul(gate_up, gate_up.new_empty(T, c.Id))
    down = act @ c.w_dd.t()
    del gate_up, act, down, out, fc, emb, meta, hidden


def measure(args, result: dict) -> dict:
    """Every case and chunk of ``args``; fills ``result`` as it goes (what an interrupted run still writes)."""
    import torch

    gpu = not args.dry_run
    if gpu and not torch.cuda.is_available():
        raise SystemExit("prefill_activation_peak: expected a CUDA GPU (or --dry-run), found none")
    device = "cuda" if gpu else "cpu"
    ops = Ops(device)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 132
    attn = _attention_kernel() if gpu else "dry run: attention not run"
    start = time.monotonic()
    cublas = 0
    if gpu:  # the first GEMMs of the process allocate torch's cuBLAS / cuBLASLt workspaces
        a = torch.randn(256, 256, device=device, dtype=torch.bfloat16)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        _ = a @ a
        _ = torch.bmm(a[None], a[None])
        _ = torch.nn.functional.linear(a, a)
        torch.cuda.synchronize()
        cublas = torch.cuda.memory_allocated() - before - 3 * a.numel() * a.element_size()
        del a, _
    result.update({"what": "activation peak of one chunked-prefill step per phase on one TP rank: measured "
                      "(torch.cuda.max_memory_allocated above the phase's baseline, plus the cuBLAS workspace) "
                      "beside kdtree_lab.prefill_activations' model",
              "sglang_contract": str(pa.CONTRACT.relative_to(ROOT)),
              "attention_kernel": "sglang extend_attention_fwd" if callable(attn) else f"not run ({attn})",
              "moe_kernels": "torch.mm into SGLang's caches (sgl_kernel's Marlin / the Triton expert kernels are "
                             "not on a bare GPU); one expert weight for all experts",
              "sms": sms, "cublas_workspace_bytes": cublas, "emulation_overhead_bytes": None,
              "requests": args.requests, "budget_s": args.budget_s, "cases": [], "skipped": [], "complete": True})
    cases = [tuple(s.split(":")) for s in args.cases.split(",")]
    chunks = [int(x) for x in args.chunks.split(",")]
    for model, quant, tp in cases:
        tp = int(tp)
        if time.monotonic() - start > args.budget_s:
            result["skipped"] += [f"{model}:{quant}:{tp}:{t}" for t in chunks]
            result["complete"] = False
            continue
        c = Case(model, quant, tp, device, ops, sms)
        if result["emulation_overhead_bytes"] is None:
            result["emulation_overhead_bytes"] = ROW_BLOCK * c.D * 2
        for T in chunks:
            if time.monotonic() - start > args.budget_s:
                result["skipped"].append(f"{model}:{quant}:{tp}:{T}")
                result["complete"] = False
                continue
            R, P, A = min(args.requests, T), args.prefix if args.prefix else T, pa.CAPTURED_LAYERS[args.spec]
            model_peak = pa.prefill_peak(model, quant, tp, T, requests=R, prefix=P, spec_algorithm=args.spec,
                                         sms=sms, cublas_bytes=cublas or pa.CUBLAS_WORKSPACE)
            modelled = {p.phase: p.bytes for p in model_peak.phases}
            pool = {"mha_k": torch.zeros((1, c.H, c.Nd + c.Rd), dtype=torch.bfloat16, device=device),
                    "mha_v": torch.zeros((1, c.H, c.Vd), dtype=torch.bfloat16, device=device),
                    "no_prefix": torch.zeros(0, dtype=torch.int64, device=device),
                    "latent": torch.randn((P + T + 1, 1, c.C + c.Rd), device=device).to(torch.bfloat16),
                    "kv_indices": torch.arange(1, P + 1, dtype=torch.int64, device=device)}
            plan = c.routing(T)
            phases = []
            mlps = [("MoE layer", "moe")] + ([("dense layer", "dense")] if c.arch.first_k_dense_replace else [])
            runs = [(f"{kind}, {label}", lambda ap=ap, m=m, p=p: phase_layer(c, ap, m, T, R, p, A, attn, pool, plan))
                    for ap, label, p in (("mha", "MHA attention (a prompt's first chunk)", 0),
                                         ("absorbed", "absorbed MLA attention (a chunk after a prefix)", P))
                    for kind, m in mlps]
            runs.append(("logits (one row per request)", lambda: phase_logits(c, T, R, P, A, pool)))
            runs.append((f"draft extend ({args.spec}, estimate)", lambda: phase_draft(c, T, A)))
            for name, fn in runs:
                try:
                    fn()  # warm: Triton compiles, the allocator's first segments
                    with Meter(torch, gpu) as m:
                        fn()
                except Exception as exc:  # one phase's failure is recorded, the others still run
                    phases.append({"phase": name, "measured_bytes": None, "modelled_bytes": modelled[name],
                                   "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"})
                    result["complete"] = False
                    continue
                got = None if m.peak is None else m.peak + cublas
                phases.append({"phase": name, "measured_bytes": got,
                               "reserved_bytes": None if m.peak_reserved is None else m.peak_reserved + cublas,
                               "left_allocated_bytes": m.left, "modelled_bytes": modelled[name],
                               "measured_over_modelled": round(got / modelled[name], 4) if got else None})
            measured = [p["measured_bytes"] for p in phases if p["measured_bytes"] is not None]
            result["cases"].append({"model": model, "quant": quant, "tp": tp, "chunk": T, "requests": R, "prefix": P,
                                    "spec_algorithm": args.spec, "moe_runner": c.runner,
                                    "fused_shared_expert": model_peak.fused_shared_expert,
                                    "peak_measured_bytes": max(measured) if measured else None,
                                    "peak_modelled_bytes": model_peak.bytes, "phases": phases})
            del pool, plan
        del c
        if gpu:
            torch.cuda.empty_cache()
    result["elapsed_s"] = round(time.monotonic() - start, 1)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--cases", default=DEFAULT_CASES, help="model:quant:tp,... (presets of data/presets)")
    ap.add_argument("--chunks", default=DEFAULT_CHUNKS, help="chunked prefill sizes (tokens)")
    ap.add_argument("--requests", type=int, default=8, help="requests in a chunk (logits rows)")
    ap.add_argument("--prefix", type=int, default=0, help="prefix tokens before a later chunk (default: the chunk)")
    ap.add_argument("--spec", default="EAGLE", choices=sorted(pa.CAPTURED_LAYERS), help="speculative algorithm")
    ap.add_argument("--budget-s", type=float, default=120.0, help="stop starting new chunks after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="run on the CPU to check the code (no memory figures)")
    a = ap.parse_args(argv)
    for name in ("requests", "budget_s"):
        if getattr(a, name) <= 0:
            ap.error(f"--{name.replace('_', '-')}: expected > 0, got {getattr(a, name)}")
    try:
        for s in a.cases.split(","):
            model, quant, tp = s.split(":")
            pa.prefill_peak(model, quant, int(tp), 2048)  # validates the preset, quant and tp
        chunks = [int(x) for x in a.chunks.split(",")]
        if min(chunks) < 1:
            raise ValueError(f"chunks must be >= 1, got {a.chunks}")
    except (ValueError, pa.ActivationInputError) as exc:
        print(f"prefill_activation_peak: --cases/--chunks: {exc}", file=sys.stderr)
        return 2
    partial: dict = {}
    try:
        result = measure(a, partial)
    except KeyboardInterrupt:
        result = {**partial, "complete": False, "interrupted": True}
    from kdtree_lab.lab.provenance import provenance

    result["provenance"] = provenance("python scripts/prefill_activation_peak.py " + " ".join(argv or sys.argv[1:]))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out)
    for case in result.get("cases", []):
        meas = case["peak_measured_bytes"]
        print(f"{case['model']} {case['quant']} tp{case['tp']} chunk {case['chunk']}: modelled "
              f"{case['peak_modelled_bytes'] / 2**20:8.1f} MiB"
              + (f", measured {meas / 2**20:8.1f} MiB" if meas is not None else ""))
    if not result.get("complete", False):
        failed = [f"{c['model']}:{c['chunk']}:{p['phase']}" for c in result.get("cases", []) for p in c["phases"]
                  if "error" in p]
        print("incomplete:" + (" interrupted;" if result.get("interrupted") else "")
              + (f" skipped {', '.join(result['skipped'])};" if result.get("skipped") else "")
              + (f" failed {', '.join(failed)}" if failed else ""), file=sys.stderr)
    print(f"-> {out} ({result.get('elapsed_s', '?')} s)")
    return 0 if result.get("complete") else 1


if __name__ == "__main__":
    sys.exit(main())
