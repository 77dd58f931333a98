"""The fp8 KV contract (data/contracts/sglang-0.5.23-fp8-kv.yaml) against SGLang 0.5.23's own sources: every
snippet a fact was read from is still in the installed wheel's file (read, not imported)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from kdtree_lab.core.paths import CONTRACTS
from kdtree_lab.sglang import hook as sglang_hook

FP8 = yaml.safe_load((CONTRACTS / "sglang-0.5.23-fp8-kv.yaml").read_text())


def _sources():
    for section in ("pool", "draft_tokens", "scales", "extend_attention_fwd_on_cuda"):
        for src in FP8[section]["sources"]:
            for snippet in src["snippets"]:
                yield section, src["file"], snippet


@pytest.mark.parametrize("section,file,snippet", list(_sources()), ids=lambda x: str(x)[:40])
def test_each_fact_is_in_sglangs_source(section, file, snippet):
    root = Path(importlib.util.find_spec("sglang").origin).parent.parent
    assert snippet in (root / file).read_text(), f"{section}: {file} no longer has {snippet!r}"


def test_the_contract_names_the_installed_version_and_the_hook_serves_fp8_only_where_the_kernel_reads_it():
    import sglang
    import torch

    assert FP8["sglang_version"] == sglang.__version__ == "0.5.23"
    pool = torch.zeros(4, 1, 576, dtype=torch.uint8).view(torch.float8_e4m3fn)
    bf16 = dict(dtype=torch.bfloat16)
    args = (torch.zeros(2, 2, 576, **bf16), torch.zeros(2, 1, 576, **bf16), torch.zeros(2, 1, 512, **bf16),
            torch.zeros(2, 2, 512, **bf16), pool, None, True)
    reason = sglang_hook.unsupported_reason(*args)  # an implementation that reads bf16 pools only
    assert reason and "fp8" in reason and "bfloat16 only" not in reason
    assert sglang_hook.unsupported_reason(*args, kv_dtypes=("bf16", "fp8")) is None  # the sm_120 kernel, v4
