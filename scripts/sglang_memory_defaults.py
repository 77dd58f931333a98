"""Record SGLang 0.5.23's own GPU-memory defaults (chunked prefill size, decode CUDA-graph max batch,
mem_fraction_static) per GPU memory size and TP, by running SGLang's argument resolution
(``prepare_server_args(...).resolve_once()``, which calls ``arg_groups/memory_hook.handle_gpu_memory_settings``)
with the device's memory capacity patched in. Writes data/contracts/sglang-0.5.23-memory-defaults.json, which
tests/test_budget.py holds kdtree_lab.budget.sglang_memory's tiers and default fraction to.

Needs a Python where SGLang's resolution imports: sglang==0.5.23 and the model-config stack it loads
(transformers, torch, torchvision; no GPU). The model is a DeepSeek-V3-shaped config.json (MLA), nothing else.

    python scripts/sglang_memory_defaults.py --out data/contracts/sglang-0.5.23-memory-defaults.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
from pathlib import Path
from unittest import mock

MODEL_CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
                "num_attention_heads": 64, "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536, "vocab_size": 163840,
                "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 384,
                "num_experts_per_tok": 8, "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}
# Every tier edge of memory_hook.py (20, 35, 60, 90, 160 GiB) from both sides, and the GPUs of data/presets.
MEMORY_MIB = (16000, 20479, 20480, 24000, 32607, 35839, 35840, 48000, 61439, 61440, 81559, 92159, 92160, 97887,
              143771, 163839, 163840, 183359)
TPS = (1, 2, 4, 8)


def resolve(memory_mib: int, tp: int, model_dir: str) -> dict:
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import prepare_server_args

    with mock.patch.object(memory_hook, "get_device_memory_capacity", return_value=memory_mib):
        sa = prepare_server_args(["--model-path", model_dir, "--tp", str(tp), "--device", "cuda",
                                  "--attention-backend", "triton"])
        sa.resolve_once()
    d = sa.resolved_dict()
    return {"memory_mib": memory_mib, "tp": tp, "chunked_prefill_size": d["chunked_prefill_size"],
            "decode_cuda_graph_max_bs": d["cuda_graph_config"]["decode"]["max_bs"],
            "mem_fraction_static": d["mem_fraction_static"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import sglang
    import torch
    import transformers

    with tempfile.TemporaryDirectory() as model_dir:
        (Path(model_dir) / "config.json").write_text(json.dumps(MODEL_CONFIG))
        rows = [resolve(mib, tp, model_dir) for mib in MEMORY_MIB for tp in TPS]
    out = {"what": "SGLang's default GPU-memory settings, from SGLang's own argument resolution",
           "command": " ".join(["python", *sys.argv]), "date": datetime.date.today().isoformat(),
           "sglang": sglang.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
           "python": platform.python_version(), "args": "--model-path <DeepSeek-V3 config.json> --tp TP --device "
           "cuda --attention-backend triton; get_device_memory_capacity patched to memory_mib",
           "model_config": MODEL_CONFIG, "rows": rows}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(rows)} rows -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
