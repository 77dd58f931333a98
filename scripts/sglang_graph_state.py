"""Measure the graph-time buffers SGLang 0.5.23's Triton attention backend allocates for a deployment, with SGLang's
own classes, and hold the memory budget's line items to them.

SGLang's server arguments are resolved from the budget's own launch line (``kdtree_lab.budget.launch.launch_args``) for a
Kimi-K2-shaped model and published as a scheduler process would; then, with a stand-in for the model runner (a
KV pool that only answers its value width), the script builds what SGLang's graph runners build:

- target verify: ``TritonAttnBackend(runner).init_cuda_graph_state(max_bs, max_bs x width)``, the width from
  SGLang's ``resolve_num_tokens_per_req(phase="target_verify")``;
- draft decode: ``TritonMultiStepDraftBackend(runner, topk, steps).init_cuda_graph_state(max_bs, max_bs x topk)``;
- draft extend: ``TritonAttnBackend(draft runner).init_cuda_graph_state(max_bs, max_bs x draft width)``.

Each phase records every tensor it holds (name, shape, dtype, bytes) and, on a GPU, what torch's allocator handed
out for it (``torch.cuda.memory_allocated`` before and after). ``kdtree_lab.budget.sglang_memory.sglang_state_rows`` compares
the result with the budget; notebook 04 shows it. Needs SGLang 0.5.23 and the packages its Triton backend imports
(``scripts/fetch_wheels.sh --sglang-state`` gathers them for the H200). Without a GPU it runs as a dry run (CPU
tensors, the SM count given by ``--sms``), which is how its test runs it; the committed result comes from the H200.

    python scripts/sglang_graph_state.py --out data/results/h200/<date>-sglang-graph-state/graph-state.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kdtree_lab.budget import inputs, launch  # noqa: E402
from kdtree_lab.lab.provenance import provenance  # noqa: E402
from sglang_memory_defaults import MODEL_CONFIG  # noqa: E402  (the DeepSeek-V3 / Kimi-K2 shape: MLA, 64 heads)


def tensors(obj, seen: set, prefix: str = "") -> list[dict]:
    """Every tensor an object holds that owns its storage, once (views, and a buffer several backends share, are
    counted where first seen; ``seen`` holds the storage addresses counted so far)."""
    import torch

    out = []
    for name, value in vars(obj).items():
        if hasattr(value, "buffer") and isinstance(getattr(value, "buffer"), torch.Tensor):  # SGLang's VerifyMask
            name, value = f"{name}.buffer", value.buffer
        if isinstance(value, torch.Tensor) and value._base is None and value.data_ptr() not in seen:
            seen.add(value.data_ptr())
            out.append({"name": prefix + name, "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                        "bytes": value.numel() * value.element_size()})
    return out


def measure(inp: inputs.BudgetInputs, sms: int | None) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    # SGLang is imported with CUDA hidden: its CUDA branches import sgl_kernel (its CUDA op library, hundreds of MB,
    # not carried to the device), and nothing the Triton backend allocates depends on that choice (import-time
    # flags there pick PDL and ROCm/XPU paths only). The buffers are then allocated on the GPU.
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        import sglang
        import sglang.kernels.ops.attention.decode_attention as decode_attention
        import sglang.srt.layers.attention.triton_backend as tb
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.runtime_context import publish
        from sglang.srt.server_args import prepare_server_args
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
        from sglang.srt.speculative.spec_utils import resolve_num_tokens_per_req

    device = "cuda" if gpu else "cpu"
    argv = launch.launch_args(inp, 0.85) + ["--device", "cuda"]
    patches = [] if gpu else [mock.patch.object(tb, "get_device_core_count", return_value=sms),
                              mock.patch.object(decode_attention, "_lean_num_cus", return_value=sms)]
    for p in patches:
        p.start()
    try:
        sa = prepare_server_args(argv)
        publish(sa, role="scheduler")
        mc = ModelConfig.from_server_args(sa)
        algo = SpeculativeAlgorithm.from_string(sa.speculative_algorithm)
        widths = {"target_verify": resolve_num_tokens_per_req(phase="target_verify", spec_algorithm=algo),
                  "draft_decode": resolve_num_tokens_per_req(phase="draft_decode"),
                  "draft_extend": resolve_num_tokens_per_req(phase="draft_extend")}
        max_bs = inp.max_bs
        pool = SimpleNamespace(start_layer=0, get_value_buffer=lambda layer: torch.empty(1, 1, mc.kv_lora_rank))
        runner = SimpleNamespace(
            req_to_token_pool=SimpleNamespace(size=max_bs, req_to_token=torch.zeros(max_bs, 1, dtype=torch.int32)),
            sliding_window_size=None, token_to_kv_pool=pool, token_to_kv_pool_allocator=None, page_size=1,
            kv_index_translator=None, decode_num_tokens_per_req=lambda: widths["target_verify"], model_config=mc,
            is_draft_worker=False, spec_algorithm=algo, kv_cache_dtype=torch.bfloat16, device=device, gpu_id=0,
            server_args=sa)
        draft_runner = SimpleNamespace(**{**vars(runner), "is_draft_worker": True,
                                          "decode_num_tokens_per_req": lambda: widths["draft_extend"]})

        def phase(name, build, max_num_tokens):
            if gpu:
                torch.cuda.synchronize()
            before = torch.cuda.memory_allocated() if gpu else None
            backend = build()
            backend.init_cuda_graph_state(max_bs, max_num_tokens)
            seen: set = set()
            held = tensors(backend, seen)
            for i, sub in enumerate(getattr(backend, "attn_backends", [])):
                held += tensors(sub, seen, f"attn_backends[{i}].")
            if gpu:
                torch.cuda.synchronize()
            return {"phase": name, "max_bs": max_bs, "max_num_tokens": max_num_tokens,
                    "max_kv_splits": getattr(backend, "max_kv_splits", None) or backend.attn_backends[0].max_kv_splits,
                    "tensors": held, "tensor_bytes": sum(t["bytes"] for t in held),
                    "allocated_bytes": torch.cuda.memory_allocated() - before if gpu else None, "_keep": backend}

        phases = [
            phase("target_verify", lambda: tb.TritonAttnBackend(runner), max_bs * widths["target_verify"]),
            phase("draft_decode", lambda: tb.TritonMultiStepDraftBackend(draft_runner, inp.topk, inp.spec_steps),
                  max_bs * widths["draft_decode"]),
            phase("draft_extend", lambda: tb.TritonAttnBackend(draft_runner), max_bs * widths["draft_extend"]),
        ]
    finally:
        for p in patches:
            p.stop()
    for ph in phases:
        ph.pop("_keep")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count if gpu else sms
    return {"what": "SGLang's Triton attention backend graph-time buffers for one deployment, built by SGLang's own "
                    "classes (scripts/sglang_graph_state.py)",
            "sglang": sglang.__version__, "measured_on": "gpu" if gpu else "cpu dry run", "sms": sm_count,
            "imported_with_cuda_hidden": True,
            "server_args": argv, "widths": widths, "inputs": {k: v for k, v in asdict(inp).items() if k != "measured"},
            "phases": phases}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--gpu", default="h200", help="the budget's GPU preset (its SM count sizes the budget's items)")
    ap.add_argument("--max-bs", type=int, default=8)
    ap.add_argument("--context", type=int, default=200_000)
    ap.add_argument("--sms", type=int, default=132, help="SM count for a dry run without a GPU")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as model_dir:
        (Path(model_dir) / "config.json").write_text(json.dumps(MODEL_CONFIG))
        inp = inputs.BudgetInputs(gpu=a.gpu, model="kimi-k2", tp=8, max_bs=a.max_bs, context=a.context,
                                  concurrency=a.max_bs, model_path=model_dir, draft_model_path=model_dir)
        result = measure(inp, a.sms)
    result["inputs"]["model_path"] = result["inputs"]["draft_model_path"] = "<Kimi-K2-shaped config.json>"
    result["server_args"] = [("<model>" if w.startswith(tempfile.gettempdir()) else w) for w in result["server_args"]]
    result["provenance"] = provenance("python scripts/sglang_graph_state.py " + " ".join(argv or sys.argv[1:]))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    for ph in result["phases"]:
        print(f"{ph['phase']:>14}: {ph['tensor_bytes'] / 2**20:9.1f} MiB in tensors"
              + (f", {ph['allocated_bytes'] / 2**20:9.1f} MiB allocated" if ph["allocated_bytes"] is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
