"""SGLang's own objects for one (draft, pool) configuration: the budget's launch line as its server arguments, its
``ModelConfig``, request and MLA KV pools and KV index translator behind a stand-in model runner, and the
``TritonAttnBackend`` built over them, hooked or not."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ...core.mla import D_QK
from ...sglang import hook as hook_module
from .settings import KV_CACHE_DTYPES, Draft, ProofError, Settings


def server_argv(draft: Draft, kv: str, st: Settings, model_dir: str) -> list[str]:
    """The budget's launch line for this configuration (kdtree_lab.budget.launch.launch_args), on one GPU's share
    of a TP 8 Kimi-K2-shaped deployment, with the pool's --kv-cache-dtype."""
    from ...budget import inputs, launch

    inp = inputs.BudgetInputs(gpu="h200", model="kimi-k2", tp=8, max_bs=st.max_bs, context=st.context,
                              concurrency=st.max_bs, topk=draft.topk, spec_steps=draft.steps,
                              draft_tokens=draft.num_draft, model_path=model_dir, draft_model_path=model_dir)
    return launch.launch_args(inp, 0.85) + ["--device", "cuda", "--kv-cache-dtype", KV_CACHE_DTYPES[kv]]


POOL_DTYPES = {"auto": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}  # SGLang's mapping


@dataclass
class Stack:
    """SGLang's objects for one (draft, pool) configuration, shared by the hooked and the unhooked backend."""

    sg: SimpleNamespace
    draft: Draft
    kv: str
    settings: Settings
    device: torch.device
    server_args: object
    model_config: object
    algo: object
    req_pool: object
    pool: object
    translator: object
    runner: SimpleNamespace
    layer: object = None
    num_heads: int = 0

    @property
    def n(self) -> int:
        return self.draft.num_draft

    @property
    def pool_dtype(self) -> torch.dtype:
        return self.pool.dtype

    @property
    def k_buffer(self) -> torch.Tensor:
        return self.pool.get_key_buffer(0)


def build_stack(sg: SimpleNamespace, draft: Draft, kv: str, st: Settings, device: torch.device,
                model_dir: str) -> Stack:
    """Publish this configuration's server arguments (last publish wins in SGLang), resolve the model config and
    build the stand-in runner over SGLang's pools."""
    sa = sg.prepare_server_args(server_argv(draft, kv, st, model_dir))
    sg.publish(sa, role="scheduler")
    mc = sg.ModelConfig.from_server_args(sa)
    algo = sg.SpeculativeAlgorithm.from_string(sa.speculative_algorithm)
    width = sg.resolve_num_tokens_per_req(phase="target_verify", spec_algorithm=algo)
    if width != draft.num_draft:
        raise ProofError(f"SGLang resolves a target-verify width of {width}, the configuration asked for "
                         f"{draft.num_draft} (--speculative-num-draft-tokens)")
    dtype = getattr(torch, POOL_DTYPES[sa.kv_cache_dtype])
    rows = mc.context_len + 2 * draft.num_draft
    req_pool = sg.ReqToTokenPool(size=st.max_bs, max_context_len=rows, device=str(device), enable_memory_saver=False)
    pool = sg.MLATokenToKVPool(size=st.max_bs * rows, page_size=1, dtype=dtype, kv_lora_rank=mc.kv_lora_rank,
                               qk_rope_head_dim=mc.qk_rope_head_dim, layer_num=1, device=str(device),
                               enable_memory_saver=False)
    if tuple(pool.get_key_buffer(0).shape[1:]) != (1, D_QK):
        raise ProofError(f"SGLang's MLA pool rows are {tuple(pool.get_key_buffer(0).shape[1:])}, expected (1, {D_QK})")
    translator = sg.KVIndexTranslator(req_to_token=req_pool.req_to_token, token_to_kv_pool_allocator=None,
                                      token_to_kv_pool=pool, page_size=1, device=str(device), is_draft_worker=False)
    runner = SimpleNamespace(
        req_to_token_pool=req_pool, sliding_window_size=None, token_to_kv_pool=pool, token_to_kv_pool_allocator=None,
        page_size=1, kv_index_translator=translator, decode_num_tokens_per_req=lambda: width, model_config=mc,
        is_draft_worker=False, spec_algorithm=algo, kv_cache_dtype=dtype, device=str(device), gpu_id=0,
        server_args=sa)
    return Stack(sg, draft, kv, st, device, sa, mc, algo, req_pool, pool, translator, runner)


def make_backend(stack: Stack, mode: str, impl: str | None = None):
    """A TritonAttnBackend built for the stand-in runner under KDTREE_VERIFY=mode: the plugin's AFTER hook
    installs the verify hook on it. Mode ``off``: the hook is then uninstalled, leaving SGLang's own slot (the
    unhooked reference). Returns (backend, hook or None)."""
    os.environ[hook_module.ENV_VAR] = mode
    if impl:
        os.environ[hook_module.IMPL_VAR] = impl
    backend = stack.sg.tb.TritonAttnBackend(stack.runner)
    hook = getattr(backend, "_kdtree_hook", None)
    if hook is None:
        raise ProofError("the kdtree_verify plugin's AFTER hook did not install on the TritonAttnBackend SGLang "
                         "built (backend._kdtree_hook missing)")
    if stack.layer is None:
        stack.num_heads = backend.num_head
        lora = stack.model_config.kv_lora_rank
        stack.layer = stack.sg.RadixAttention(backend.num_head, lora + stack.model_config.qk_rope_head_dim,
                                              stack.model_config.scaling, 1, 0, v_head_dim=lora)
    if mode == "off":
        hook_module.uninstall(backend)
        if backend.use_verify_shared_kv:
            raise ProofError("the unhooked backend routes target verify to verify_shared_kv_fwd (SGLang enables it "
                             "on gfx95 only); the reference must run extend_attention_fwd")
        return backend, None
    if hook.mode != mode or not backend.use_verify_shared_kv:
        raise ProofError(f"the installed hook runs mode {hook.mode} (asked {mode}); use_verify_shared_kv="
                         f"{backend.use_verify_shared_kv}")
    return backend, hook


def capture_sizes(sg: SimpleNamespace, stack: Stack) -> list[int]:
    """SGLang's own capture sizes for the target-verify graphs of this runner."""
    sizes, _ = sg.get_batch_sizes_to_capture(stack.runner, stack.n, gathered_buffer_required=False)
    return list(sizes)


def e4m3_math(hook) -> bool:
    """Whether the hook's planned calls run e4m3 tensor-core math (Q and P rounded to e4m3): they are then judged at
    e4m3's tolerance and against SGLang's own fp8 error, as parity judges them."""
    return hook.attn is not None and hook.attn.e4m3_math
