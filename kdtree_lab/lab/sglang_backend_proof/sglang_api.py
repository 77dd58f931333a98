"""What the proof uses of SGLang 0.5.23, imported in one place: a missing module, attribute or backend method fails
in one line naming it."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from unittest import mock

import torch

from .settings import SGLANG_VERSION, ProofError

# (name, module, attribute): what the proof uses of SGLang 0.5.23; a missing one fails in one line naming it.
SGLANG_API = (
    ("tb", "sglang.srt.layers.attention.triton_backend", None),
    ("decode_attention", "sglang.kernels.ops.attention.decode_attention", None),
    ("ModelConfig", "sglang.srt.configs.model_config", "ModelConfig"),
    ("publish", "sglang.srt.runtime_context", "publish"),
    ("prepare_server_args", "sglang.srt.server_args", "prepare_server_args"),
    ("SpeculativeAlgorithm", "sglang.srt.speculative.spec_info", "SpeculativeAlgorithm"),
    ("resolve_num_tokens_per_req", "sglang.srt.speculative.spec_utils", "resolve_num_tokens_per_req"),
    ("select_top_k_tokens", "sglang.srt.speculative.spec_utils", "select_top_k_tokens"),
    ("MLATokenToKVPool", "sglang.srt.mem_cache.memory_pool", "MLATokenToKVPool"),
    ("ReqToTokenPool", "sglang.srt.mem_cache.memory_pool", "ReqToTokenPool"),
    ("KVIndexTranslator", "sglang.srt.mem_cache.kv_index_translator", "KVIndexTranslator"),
    ("ForwardBatch", "sglang.srt.model_executor.forward_batch_info", "ForwardBatch"),
    ("ForwardMode", "sglang.srt.model_executor.forward_batch_info", "ForwardMode"),
    ("CaptureHiddenMode", "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode"),
    ("RadixAttention", "sglang.srt.layers.radix_attention", "RadixAttention"),
    ("EagleVerifyInput", "sglang.srt.speculative.eagle_info", "EagleVerifyInput"),
    ("eagle_utils", "sglang.srt.speculative.eagle_utils", None),
    ("organize_draft_results", "sglang.srt.speculative.eagle_utils", "organize_draft_results"),
    ("build_tree_kernel_efficient", "sglang.srt.speculative.eagle_utils", "build_tree_kernel_efficient"),
    ("TreeMaskMode", "sglang.srt.speculative.eagle_utils", "TreeMaskMode"),
    ("sgl_build_tree_kernel_triton", "sglang.kernels.ops.speculative.spec_tree", "sgl_build_tree_kernel_triton"),
    ("fast_topk", "sglang.srt.utils", "fast_topk"),
    ("get_batch_sizes_to_capture", "sglang.srt.model_executor.runner.base_cuda_graph_runner",
     "get_batch_sizes_to_capture"),
    ("build_replay_fb_view", "sglang.srt.model_executor.runner.decode_cuda_graph_runner", "build_replay_fb_view"),
    ("load_plugins", "sglang.srt.plugins", "load_plugins"),
    ("GENERAL_PLUGINS_GROUP", "sglang.srt.plugins", "GENERAL_PLUGINS_GROUP"),
    ("HookRegistry", "sglang.srt.plugins.hook_registry", "HookRegistry"),
)
# TritonAttnBackend methods the proof drives (0.5.23 names; the capture/replay pair before it is gone).
BACKEND_METHODS = ("init_forward_metadata", "init_cuda_graph_state", "init_forward_metadata_out_graph",
                   "init_forward_metadata_in_graph", "forward_extend", "get_cuda_graph_seq_len_fill_value")


def import_sglang() -> SimpleNamespace:
    """SGLang's pieces, imported with CUDA hidden (as scripts/sglang_graph_state.py does): its CUDA branches
    import sgl_kernel, which is not carried to the device; the Triton backend's kernels and buffers do not depend
    on that choice. Raises ProofError naming the module or attribute that is missing."""
    sg = {}
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        try:
            import sglang
        except Exception as exc:  # noqa: BLE001 - any import failure is the one line
            raise ProofError(f"sglang does not import: {type(exc).__name__}: {exc}") from exc
        for name, module, attr in SGLANG_API:
            try:
                mod = importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001
                raise ProofError(f"SGLang {sglang.__version__}: import {module} failed ({type(exc).__name__}: "
                                 f"{exc}); the proof is written against {SGLANG_VERSION}") from exc
            if attr is not None and not hasattr(mod, attr):
                raise ProofError(f"SGLang {sglang.__version__}: {module} has no {attr} (the proof is written "
                                 f"against {SGLANG_VERSION})")
            sg[name] = getattr(mod, attr) if attr else mod
    sg["version"] = sglang.__version__
    if torch.cuda.is_available():
        # SGLang's is_cuda() is cached from the hidden import: give the extend kernel's block-size choice the CUDA
        # facts a plain import sets (its only use of them), so it runs its production tiles for this GPU
        ea = importlib.import_module("sglang.kernels.ops.attention.extend_attention")
        ea._is_cuda, ea.CUDA_CAPABILITY = True, torch.cuda.get_device_capability()
    missing = [m for m in BACKEND_METHODS if not hasattr(sg["tb"].TritonAttnBackend, m)]
    if missing:
        raise ProofError(f"SGLang {sglang.__version__}: TritonAttnBackend lacks {missing} (the proof drives "
                         f"{SGLANG_VERSION}'s graph API)")
    return SimpleNamespace(**sg)
