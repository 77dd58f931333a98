"""SGLang 0.5.23's own ``TritonAttnBackend`` drives the verify hook: the proof behind scripts/sglang_backend_proof.py
and tests/test_gpu_sglang_backend.py (docs/sglang.md, "SGLang's backend drives the hook").

Every other proof calls the hook with buffers the project built. Here SGLang builds them: its server arguments
(the budget's launch line) are published as a scheduler's are, its ``ModelConfig`` is resolved, and a stand-in
model runner holds SGLang's own ``ReqToTokenPool``, ``MLATokenToKVPool`` (real data, bf16 / fp8_e4m3 / fp8_e5m2)
and ``KVIndexTranslator``. The hook goes in the way ``sglang serve`` puts it there: SGLang's ``load_plugins``
discovers kdtree-lab's ``sglang.srt.plugins`` entry point and applies its AFTER hook on
``TritonAttnBackend.__init__``, so every backend built afterwards has it. Drafts come from SGLang's own spec-info
code (``select_top_k_tokens``, ``organize_draft_results``, ``build_tree_kernel_efficient`` with SGLang's Triton
tree kernel, ``EagleVerifyInput``) for EAGLE trees (topk > 1) and chains (topk 1); DDTree masks (a tree SGLang does
not draft) are laid out by ``kdtree_lab.checks.batch.full_tree_mask`` in SGLang's FULL_MASK layout.

Phases (each row carries its verdict; ``Recorder`` rewrites the JSON after every row):

- ``eager``: ``init_forward_metadata`` + ``forward_extend`` in TARGET_VERIFY, hooked against an unhooked backend on
  the same pool and against the fp64 oracle; the hook's stats must show every call served.
- ``graph``: ``init_cuda_graph_state``, per SGLang capture size ``init_forward_metadata_out_graph(in_capture=True)``
  and a CUDA-graph capture of ``init_forward_metadata_in_graph`` + ``forward_extend`` (SGLang 0.5.23 removed the
  ``init_forward_metadata_capture/replay_cuda_graph`` pair: these are its replacements); then per replay fresh
  requests (new lengths, new trees written into the backend's verify mask as SGLang's draft does, new pool
  contents, batches padded to the captured size with SGLang's fill value), ``build_replay_fb_view`` +
  ``init_forward_metadata_out_graph`` and ``graph.replay()``, compared with the unhooked backend run eagerly on the
  same batch and with the oracle. In ``validate`` mode SGLang's kernel writes the output inside the graph and the
  hook's device-side error is read after each replay (``hook.check()``).
- ``refuse``: what the hook must not serve (a pool dtype the configuration does not read, a batch above the planned
  size, a draft width it was not planned for): the call falls back with its reason, leaves the poisoned output
  untouched, and SGLang's own kernel then writes what the unhooked backend writes.

Without a GPU the same code runs as a dry run: CPU tensors, the Triton interpreter (``TRITON_INTERPRET=1``, the
hook on the Triton twin), graph capture replaced by eager calls of the function that would be captured; SGLang's
extend kernel does not run faithfully under the interpreter, so its output is recorded there, not judged.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable
from unittest import mock

import numpy as np
import torch

from ..checks.batch import VerifyBatch, full_tree_mask
from ..checks.oracle import compare, reference
from ..checks.parity import sglang_verdict
from ..core.mla import D_QK, D_V
from ..core.tree import random_ddtree
from ..sglang import hook as hook_module
from ..sglang import serve

SGLANG_VERSION = "0.5.23"
VOCAB = 4096  # the stand-in draft's vocabulary (its logits are random)
VALIDATE_SAME_TOL = 1e-3  # validate mode: SGLang's in-graph output against its own eager run (relative L2)
ROOT = Path(__file__).resolve().parents[2]


class ProofError(RuntimeError):
    """One line naming what broke (an SGLang API that differs from 0.5.23's, a hook not installed, ...)."""


# ---------------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Draft:
    """One speculative configuration: the server's --speculative-* values and the mask source.
    kind: 'eagle' (SGLang drafts a tree, topk > 1), 'chain' (SGLang, topk 1) or 'ddtree' (our DDTree masks under
    the server's tree settings)."""

    kind: str
    topk: int
    steps: int
    num_draft: int

    @property
    def name(self) -> str:
        return f"{self.kind}-N{self.num_draft}"


DRAFTS = (Draft("eagle", 4, 3, 16), Draft("ddtree", 4, 3, 16), Draft("chain", 1, 3, 4))
KV_CACHE_DTYPES = {"bf16": "auto", "fp8": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # pool -> --kv-cache-dtype


@dataclass(frozen=True)
class Settings:
    max_bs: int = 8  # --cuda-graph-max-bs-decode / --max-running-requests (the request pool's size)
    context: int = 8192  # --context-length: the longest prefix drawn is context - N - 1
    replays: int = 100  # graph replays per capture size and configuration ("on" mode)
    validate_replays: int = 10  # ... in validate mode
    eager_batches: int = 4  # eager batches per configuration
    kvs: tuple[str, ...] = ("bf16", "fp8")
    drafts: tuple[Draft, ...] = DRAFTS
    seed: int = 0
    sms: int = 132  # SM count the backend sizes its split-K buffers for in a dry run (no GPU)
    # the hook's implementation (kdtree_lab.kernels.impls): None is "cuda" on a GPU (the configuration it selects) and
    # the Triton twin in a dry run; a forced one runs SGLang's backend over it (cuda_sm120_roles: what an sm_120 card
    # selects above 32 rows, with e4m3 math over fp8 pools)
    impl: str | None = None

    @classmethod
    def quick(cls, **over) -> "Settings":
        """Well inside a 3-minute device call."""
        return cls(**{"max_bs": 4, "context": 4096, "replays": 5, "validate_replays": 2, "eager_batches": 2, **over})

    @classmethod
    def dry(cls, **over) -> "Settings":
        """The CPU dry run: the smallest shapes that exercise every path."""
        return cls(**{"max_bs": 2, "context": 160, "replays": 1, "validate_replays": 1, "eager_batches": 1,
                      "drafts": (Draft("eagle", 2, 2, 4), Draft("ddtree", 2, 2, 4), Draft("chain", 1, 2, 3)),
                      **over})


# ------------------------------------------------------------------------------------------------- SGLang API

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


def entry_point() -> tuple[str, str]:
    """kdtree-lab's ``sglang.srt.plugins`` entry point as pyproject.toml declares it: (name, 'module:function')."""
    import tomllib

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["sglang.srt.plugins"]
    (name, value), = eps.items()
    return name, value


def publish_entry_point(workdir: Path, group: str, name: str, value: str,
                        dist: str = "kdtree-lab-checkout") -> list:
    """Make entry point ``name = value`` of ``group`` visible to importlib.metadata as an installed distribution
    ``dist`` would (a dist-info directory under ``workdir``, put on sys.path); returns what importlib.metadata then
    finds. Raises ProofError where it finds nothing."""
    info = workdir / f"{dist.replace('-', '_')}-0.0.0+checkout.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.0+checkout\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
    if str(workdir) not in sys.path:
        sys.path.append(str(workdir))
    importlib.invalidate_caches()
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        raise ProofError(f"importlib.metadata does not find the {name} entry point published in {info}")
    return found


def load_hook_plugin(sg: SimpleNamespace, workdir: Path) -> dict:
    """Install the hook the way ``sglang serve`` does: SGLang's ``load_plugins`` discovers kdtree-lab's entry point
    and applies the AFTER hook it registers on ``TritonAttnBackend.__init__``. From a source checkout (kdtree-lab
    not pip-installed) the entry point pyproject.toml declares is published first as a dist-info directory on
    sys.path, where importlib.metadata (and so SGLang) finds installed packages. KDTREE_VERIFY must not be off
    while the plugin runs (it registers nothing then)."""
    name, value = entry_point()
    found = [ep for ep in importlib.metadata.entry_points(group=sg.GENERAL_PLUGINS_GROUP) if ep.name == name]
    source = "installed"
    if not found:
        found = publish_entry_point(workdir, sg.GENERAL_PLUGINS_GROUP, name, value)
        source = "pyproject.toml (published as a dist-info on sys.path)"
    if found[0].value != value:
        raise ProofError(f"the installed {name} entry point is {found[0].value!r}, pyproject.toml declares {value!r}")
    if hook_module.parse_mode() == "off":
        os.environ[hook_module.ENV_VAR] = "on"
    allowed = os.environ.get("SGLANG_PLUGINS")
    if allowed and name not in allowed.split(","):
        raise ProofError(f"SGLANG_PLUGINS={allowed!r} excludes the {name} plugin")
    sg.load_plugins()
    registered = [h for _, h, _ in sg.HookRegistry._hooks.get(serve.TARGET, [])]
    if serve.after_backend_init not in registered or serve.TARGET not in sg.HookRegistry._patched:
        raise ProofError(f"SGLang's load_plugins did not apply the {name} plugin's AFTER hook on {serve.TARGET} "
                         f"(registered: {registered}, patched: {sorted(sg.HookRegistry._patched)})")
    return {"entry_point": f"{name} = {value}", "source": source, "target": serve.TARGET, "hook": "AFTER"}


# --------------------------------------------------------------------------------------------- SGLang's stack


def server_argv(draft: Draft, kv: str, st: Settings, model_dir: str) -> list[str]:
    """The budget's launch line for this configuration (kdtree_lab.budget.launch.launch_args), on one GPU's share
    of a TP 8 Kimi-K2-shaped deployment, with the pool's --kv-cache-dtype."""
    from ..budget import inputs, launch

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


# ------------------------------------------------------------------------------------------- requests, drafts


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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------------------- record


class Recorder:
    """The result JSON, rewritten (atomically) after every row, so that a run cut off mid-way still leaves its
    rows and a summary whose status says it did not finish."""

    def __init__(self, path: Path | None, meta: dict):
        self.path = Path(path) if path else None
        self.data = {**meta, "status": "running (a run cut off here did not finish)", "phases": {}, "summary": {},
                     "seconds": {}}
        self.flush()

    def row(self, phase: str, row: dict) -> dict:
        self.data["phases"].setdefault(phase, []).append(row)
        self.flush()
        return row

    def seconds(self, phase: str, s: float) -> None:
        self.data["seconds"][phase] = round(self.data["seconds"].get(phase, 0.0) + s, 2)
        self.flush()

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.flush()

    def summary(self) -> dict:
        out = {}
        for phase, rows in self.data["phases"].items():
            for r in rows:
                key = f"{phase} {r.get('config', '')}".strip()
                s = out.setdefault(key, {"rows": 0, "ok": 0, "mismatches": 0, "calls": 0, "served": 0,
                                         "fell_back": 0})
                s["rows"] += 1
                s["ok"] += bool(r["ok"])
                s["mismatches"] += r.get("mismatches", 0 if r["ok"] else 1)
                for f in ("calls", "served", "fell_back"):
                    s[f] += r.get(f, 0)
        return out

    def flush(self) -> None:
        self.data["summary"] = self.summary()
        self.data["ok"] = bool(self.data["phases"]) and all(s["ok"] == s["rows"] for s in self.data["summary"].values())
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)


def _stats(hook) -> dict:
    return {"calls": hook.stats.calls, "served": hook.stats.served, "fell_back": hook.stats.fell_back}


def _delta(before: dict, hook) -> dict:
    now = _stats(hook)
    return {k: now[k] - before[k] for k in now}


# ----------------------------------------------------------------------------------------------------- phases


def _e4m3_math(hook) -> bool:
    """Whether the hook's planned calls run e4m3 tensor-core math (Q and P rounded to e4m3): they are then judged at
    e4m3's tolerance and against SGLang's own fp8 error, as parity judges them."""
    return hook.attn is not None and hook.attn.e4m3_math


def eager_phase(stack: Stack, rec: Recorder, rnd: Rand, judge_sglang: bool) -> None:
    """(a) Eager target verify through SGLang's init_forward_metadata, hooked against unhooked and the oracle."""
    hooked, hook = make_backend(stack, "on")
    plain, _ = make_backend(stack, "off")
    e4m3 = _e4m3_math(hook)  # the plan's, for every batch of the phase
    config = f"{stack.draft.name} {stack.kv}"
    for i in range(stack.settings.eager_batches):
        bs = int(rnd.np.integers(1, stack.settings.max_bs + 1)) if i else stack.settings.max_bs
        reqs = fresh_requests(stack, bs, rnd)
        spec, mask = draft_step(stack, reqs, rnd)
        q, k, v = qkv(stack, bs * stack.n, rnd)
        before = _stats(hook)
        ours = eager_verify(stack, hooked, reqs, spec, q, k, v, save_kv_cache=True).clone()
        theirs = eager_verify(stack, plain, reqs, spec, q, k, v, save_kv_cache=False)
        _sync(stack.device)
        verdict = sglang_verdict(ours, theirs, oracle(stack, reqs, q, k, v, mask), judge_sglang, e4m3=e4m3)
        calls = _delta(before, hook)
        ok = verdict["ok"] and calls["served"] == calls["calls"] == 1
        rec.row("eager", {"config": config, "bs": bs, "lens": reqs.lens, **verdict, **calls, "ok": ok,
                          "e4m3_math": e4m3,
                          "reasons": dict(hook.stats.reasons)})


def graph_phase(stack: Stack, rec: Recorder, rnd: Rand, mode: str, replays: int, judge_sglang: bool,
                capture_bs: list[int]) -> None:
    """(b) SGLang's graph path with the hook in ``mode`` (on / validate), each replay against the unhooked backend
    run eagerly on the same batch and against the oracle."""
    sg, n, dev = stack.sg, stack.n, stack.device
    gpu = dev.type == "cuda"
    hooked, hook = make_backend(stack, mode)
    plain, _ = make_backend(stack, "off")
    e4m3 = _e4m3_math(hook)  # the plan's, for every capture size and replay
    max_bs = max(capture_bs)
    max_tokens = max_bs * n
    hooked.init_cuda_graph_state(max_bs, max_tokens)
    fill = hooked.get_cuda_graph_seq_len_fill_value()
    vmask = hooked.verify_mask
    if vmask is None:
        raise ProofError("TritonAttnBackend.init_cuda_graph_state allocated no verify mask for the target model")
    # the decode graph runner's static inputs (base_runner's dtypes) and the layer's inputs
    buf = SimpleNamespace(
        input_ids=torch.zeros(max_tokens, dtype=torch.int64, device=dev),
        req_pool_indices=torch.zeros(max_bs, dtype=torch.int64, device=dev),
        seq_lens=torch.full((max_bs,), fill, dtype=torch.int64, device=dev),
        seq_lens_cpu=torch.full((max_bs,), fill, dtype=torch.int64),
        out_cache_loc=torch.zeros(max_tokens, dtype=torch.int64, device=dev),
        positions=torch.zeros(max_tokens, dtype=torch.int64, device=dev), encoder_lens=None,
        mamba_track_indices=None,
        custom_mask=torch.ones((max_bs * fill + max_tokens) * n, dtype=torch.bool, device=dev))
    q_buf = torch.zeros(max_tokens, stack.num_heads, D_QK, dtype=torch.bfloat16, device=dev)
    k_buf = torch.zeros(max_tokens, 1, D_QK, dtype=torch.bfloat16, device=dev)
    o_buf = torch.full((max_tokens, stack.num_heads * D_V), float("nan"), dtype=torch.bfloat16, device=dev)
    config = f"{stack.draft.name} {stack.kv} {mode}"
    graphs = {}
    pool_handle = torch.cuda.graph_pool_handle() if gpu else None
    t0 = time.perf_counter()
    for bs in sorted(capture_bs, reverse=True):  # SGLang captures the largest first
        t = bs * n
        spec = sg.EagleVerifyInput(draft_token=None, custom_mask=buf.custom_mask, positions=None, retrieve_index=None,
                                   retrieve_next_token=None, retrieve_next_sibling=None, retrieve_cum_len=None,
                                   spec_steps=stack.draft.steps, topk=stack.draft.topk, draft_token_num=n,
                                   capture_hidden_mode=sg.CaptureHiddenMode.FULL, seq_lens_sum=None,
                                   seq_lens_cpu=None)
        fb = sg.ForwardBatch(forward_mode=sg.ForwardMode.TARGET_VERIFY, batch_size=bs,
                             input_ids=buf.input_ids[:t], req_pool_indices=buf.req_pool_indices[:bs],
                             seq_lens=buf.seq_lens[:bs], seq_lens_cpu=buf.seq_lens_cpu[:bs],
                             out_cache_loc=buf.out_cache_loc[:t], seq_lens_sum=int(buf.seq_lens_cpu[:bs].sum()),
                             positions=buf.positions[:t], spec_info=spec, spec_algorithm=stack.algo,
                             capture_hidden_mode=sg.CaptureHiddenMode.FULL)
        stack.translator.bind_runner_slots(fb)
        hooked.init_forward_metadata_out_graph(fb, in_capture=True)
        fb._attn_output = o_buf[:t]

        def run_once(fb=fb, t=t):
            hooked.init_forward_metadata_in_graph(fb)
            hooked.forward_extend(q_buf[:t], k_buf[:t], k_buf[:t, :, :D_V], stack.layer, fb)

        before = _stats(hook)
        warm_errors = []
        if gpu:
            for _ in range(2):  # SGLang's capture warms up first (Triton compiles outside the graph)
                try:
                    run_once()  # validate mode checks at once outside capture (the capture-time inputs: ones)
                except hook_module.ValidationFailed as exc:
                    warm_errors.append(str(exc))
            _sync(dev)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool_handle):
                run_once()
            _sync(dev)
            if mode == "validate":
                hook.err.zero_()  # the captured call's error is recorded at each replay, read after it
        else:
            g = None  # dry run: the captured function is called eagerly at each "replay"
        graphs[bs] = (g, hooked.forward_metadata, run_once, _delta(before, hook), warm_errors)
    rec.seconds(f"graph capture ({mode})", time.perf_counter() - t0)

    prev = 0
    for bs in sorted(capture_bs):
        g, captured_metadata, run_once, capture_calls, warm_errors = graphs[bs]
        mismatches, worst, rows_stats, validate_errors, lens_seen, bit_equal = 0, {}, _stats(hook), [], [], 0
        for i in range(replays):
            raw = int(rnd.np.integers(prev + 1, bs + 1))
            reqs = fresh_requests(stack, raw, rnd)
            lens_seen.append(reqs.lens)
            spec, mask = draft_step(stack, reqs, rnd, tree_mask_buf=vmask.buffer, mask_mode=vmask.mode,
                                    fill_prefix_mask=vmask.is_read)
            live = eager_forward_batch(stack, reqs, spec)  # what the runner was handed
            rt = raw * n
            # the runner's load_batch: live inputs into the static buffers, padding to the captured size
            buf.req_pool_indices[:raw].copy_(reqs.req_pool_indices)
            buf.req_pool_indices[raw:bs].zero_()
            buf.seq_lens[:raw].copy_(reqs.seq_lens)
            buf.seq_lens[raw:bs].fill_(fill)
            buf.seq_lens_cpu[:raw].copy_(reqs.seq_lens.cpu())
            buf.seq_lens_cpu[raw:bs].fill_(fill)
            buf.out_cache_loc[:rt].copy_(live.out_cache_loc)
            buf.out_cache_loc[rt:bs * n].zero_()
            buf.positions[:rt].copy_(spec.positions)
            q, k, v = qkv(stack, bs * n, rnd)
            q_buf[:bs * n].copy_(q)
            k_buf[:bs * n].copy_(k)
            o_buf.fill_(float("nan"))
            view = sg.build_replay_fb_view(forward_batch=live, buffers=buf, bs=bs, raw_bs=raw, num_tokens=bs * n,
                                           global_num_tokens_cpu=None, seq_len_fill_value=fill,
                                           capture_forward_mode=sg.ForwardMode.TARGET_VERIFY,
                                           is_encoder_decoder=False)
            hooked.init_forward_metadata_out_graph(view)
            err = None
            if g is not None:
                g.replay()
            else:  # what the graph baked in: the metadata object of its capture (the replay refilled its buffers)
                hooked.forward_metadata = captured_metadata
                try:
                    run_once()  # outside capture validate mode checks at once
                except hook_module.ValidationFailed as exc:
                    validate_errors.append(str(exc))
                    err = float("inf")
            _sync(dev)
            ours = o_buf[:rt].view(rt, stack.num_heads, D_V).clone()
            if mode == "validate" and err is None:
                try:
                    err = hook.check()
                except hook_module.ValidationFailed as exc:
                    validate_errors.append(str(exc))
                    err = float("inf")
            spec.custom_mask = mask.to(torch.uint8)  # the step's tree, off the graph's buffer, for the reference
            theirs = eager_verify(stack, plain, reqs, spec, q[:rt], k[:rt], v[:rt], save_kv_cache=False)
            _sync(dev)
            verdict = sglang_verdict(ours, theirs, oracle(stack, reqs, q[:rt], k[:rt], v[:rt], mask), judge_sglang,
                                     e4m3=e4m3)
            if mode == "validate":
                # SGLang's kernel wrote o inside the graph: it must be what the unhooked backend writes eagerly (to
                # bf16 rounding: the two launches see int64 / int32 indptrs and another kv_indices length; whether
                # they agree bit for bit is recorded), and the hook's device-side error within the tolerance
                same = bool(torch.equal(ours.nan_to_num(nan=7.0), theirs.nan_to_num(nan=7.0)))
                verdict.update(validate_error=err, sglang_output_equals_unhooked=same)
                bit_equal += same
                close = verdict["ours_nan"] == 0 and verdict["ours_vs_sglang_rel_l2"] <= VALIDATE_SAME_TOL
                verdict["ok"] = err is not None and (not judge_sglang or (close and err <= hook.tol))
            if not verdict["ok"]:
                mismatches += 1
            for key in ("ours_rel_l2", "sglang_rel_l2", "ours_vs_sglang_rel_l2") + (("validate_error",)
                                                                                   if mode == "validate" else ()):
                worst[key] = max(worst.get(key, 0.0), float(verdict[key]))
        calls = _delta(rows_stats, hook)
        # a replay runs no Python: the hook's calls are the capture's (warm-ups + capture), all served (in a dry run
        # the captured function runs at each replay: those calls are served too)
        total = {k: capture_calls[k] + calls[k] for k in calls}
        served_all = (total["served"] == total["calls"] > 0
                      and calls["calls"] == (0 if g is not None else replays))
        rec.row("graph", {"config": config, "capture_bs": bs, "replays": replays, "mismatches": mismatches,
                          "ok": mismatches == 0 and served_all and (not validate_errors or not judge_sglang),
                          "worst": worst,
                          "capture_calls": capture_calls, "replay_calls": calls, **total,
                          "raw_bs_range": [prev + 1, bs], "longest_prefix": max(max(x) for x in lens_seen),
                          "validate_errors": validate_errors[:3], "warmup_validate_errors": warm_errors[:2],
                          **({"sglang_bit_equal_replays": bit_equal} if mode == "validate" else {}),
                          "graph": g is not None, "e4m3_math": e4m3})
        prev = bs
    del graphs, hooked, plain
    if gpu:
        torch.cuda.empty_cache()


@dataclass
class Refusal:
    """One input the hook must refuse: how the hook is installed and what SGLang hands it."""

    name: str
    expect: str  # a fragment of the reason the hook gives
    kv: str = "bf16"
    max_bs: int | None = None  # plan the hook for fewer requests than SGLang sends
    bs: int | None = None
    num_draft: int | None = None  # the step's draft width (adaptive speculation) instead of the server's
    steps: int | None = None
    impl_config: str | None = None  # force this kernel configuration while the hook plans


def refusals(st: Settings, draft: Draft) -> list[Refusal]:
    """(c)'s cases for ``draft`` (a tree configuration: SGLang drafts the narrower width too)."""
    out = [Refusal("pool dtype no configuration reads (fp8_e5m2)", "KV pool dtype torch.float8_e5m2", kv="fp8_e5m2"),
           Refusal("batch above the planned size", f"max_bs={max(1, st.max_bs // 2)}", max_bs=max(1, st.max_bs // 2),
                   bs=st.max_bs),
           Refusal("draft width it was not planned for", f"N={draft.num_draft // 2}", num_draft=draft.num_draft // 2,
                   steps=max(1, draft.steps - 1))]
    if torch.cuda.is_available():  # the library's own refusal: a forced configuration that does not read the pool
        out.append(Refusal("bf16 pool under a configuration that reads fp8 only (the sm_120 kernel's exact fp8 variant, "
                           "forced)", "does not read bf16", kv="bf16", impl_config="cuda_sm120_fp8"))
    return out


def refuse_phase(sg: SimpleNamespace, st: Settings, draft: Draft, rec: Recorder, rnd: Rand, device, model_dir: str,
                 judge_sglang: bool, impl: str | None) -> None:
    """(c) Each refusal eagerly: the hook falls back naming its reason, its output stays poisoned (a probe around
    the verify slot checks it when the hook returns), and SGLang's own kernel then writes what the unhooked
    backend writes."""
    for case in refusals(st, draft):
        stack = build_stack(sg, draft, case.kv, st, device, model_dir)
        ctx, case_impl = contextlib.nullcontext(), impl
        if case.impl_config:  # the library's own choice, forced to case.impl_config (an implementation pinning its
            from ..kernels import loader  # own configuration would override the forcing): the library refuses

            ctx, case_impl = loader.impl_config(case.impl_config), "cuda"
        with ctx:
            hooked, hook = make_backend(stack, "on", case_impl)
            if case.max_bs is not None:
                hook_module.uninstall(hooked)
                hook = hook_module.install(hooked, "on", max_bs=case.max_bs, impl=case_impl)
        plain, _ = make_backend(stack, "off")
        probe = []
        inner = hooked.verify_shared_kv_fwd

        def slot(*args, inner=inner, probe=probe, **kw):
            served = inner(*args, **kw)
            probe.append({"served": bool(served), "o_untouched": bool(torch.isnan(args[3]).all())})
            return served

        hooked.verify_shared_kv_fwd = slot
        bs = case.bs or max(1, st.max_bs // 2)
        reqs = fresh_requests(stack, bs, rnd)
        if case.num_draft:  # the request's draft tokens: the narrower step's slots are the first ones
            reqs.out_cache_loc = reqs.out_cache_loc.view(bs, stack.n)[:, :case.num_draft].reshape(-1).contiguous()
        spec, mask = draft_step(stack, reqs, rnd, num_draft=case.num_draft, steps=case.steps)
        width = case.num_draft or stack.n
        q, k, v = qkv(stack, bs * width, rnd)
        before = _stats(hook)
        got = eager_verify(stack, hooked, reqs, spec, q, k, v, save_kv_cache=True).clone()
        theirs = eager_verify(stack, plain, reqs, spec, q, k, v, save_kv_cache=False)
        _sync(device)
        calls = _delta(before, hook)
        reasons = [r for r in hook.stats.reasons if case.expect in r]
        same = bool(torch.equal(got.nan_to_num(nan=7.0), theirs.nan_to_num(nan=7.0)))
        sgl = compare(theirs, oracle(stack, reqs, q, k, v, mask))
        ok = (calls["fell_back"] == calls["calls"] == 1 and bool(reasons) and len(probe) == 1
              and not probe[0]["served"] and probe[0]["o_untouched"] and same
              and (sgl["nan"] == 0 or not judge_sglang))
        rec.row("refuse", {"config": f"{draft.name}", "case": case.name, "kv": case.kv, "bs": bs,
                           "planned": {"max_bs": hook.max_bs, "num_draft": hook.num_draft,
                                       "impl_config": case.impl_config},
                           "reason": reasons[0] if reasons else sorted(hook.stats.reasons), "probe": probe,
                           "sglang_output_equals_unhooked": same, "sglang_rel_l2": sgl["rel_l2"], **calls,
                           "ok": ok})


# ------------------------------------------------------------------------------------------------------- run


def capture_sizes(sg: SimpleNamespace, stack: Stack) -> list[int]:
    """SGLang's own capture sizes for the target-verify graphs of this runner."""
    sizes, _ = sg.get_batch_sizes_to_capture(stack.runner, stack.n, gathered_buffer_required=False)
    return list(sizes)


@contextlib.contextmanager
def _sigterm_records(rec: Recorder):
    def handler(signum, frame):
        rec.finish(f"interrupted by signal {signal.Signals(signum).name}: the rows above are all that ran")
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run(st: Settings, out: Path | None, model_config: dict, modes: tuple[str, ...] = ("on", "validate"),
        phases: tuple[str, ...] = ("eager", "graph", "refuse"), log: Callable[[str], None] = print) -> dict:
    """The whole proof; returns the recorder's data (also written to ``out`` after every row)."""
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    judge_sglang = gpu  # SGLang's extend kernel is not faithful under the Triton CPU interpreter
    if not gpu and os.environ.get("TRITON_INTERPRET") != "1":
        raise ProofError("a dry run without a GPU needs TRITON_INTERPRET=1 set before Triton is imported")
    from ..kernels.impls import IMPLS, kv_refusal

    try:  # no --impl: $KDTREE_VERIFY_IMPL, as the hook reads it (default cuda); a dry run: the Triton twin
        impl = st.impl or (hook_module.parse_impl() if gpu else "triton")
    except ValueError as exc:
        raise ProofError(str(exc)) from None
    if impl not in IMPLS:
        raise ProofError(f"impl: expected one of {', '.join(IMPLS)}, found {impl!r}")
    for kv in st.kvs:
        refused = kv_refusal(impl, kv) if kv in ("bf16", "fp8") else None  # fp8_e5m2: the refusal phase's own case
        if refused:
            raise ProofError(f"{refused}: choose the pools it serves (--kv)")
    if not gpu and impl != "triton":
        raise ProofError(f"impl: {impl} needs a GPU; a dry run without one runs the Triton twin (triton)")
    t_start = time.perf_counter()
    saved_env = {v: os.environ.get(v) for v in (hook_module.ENV_VAR, hook_module.IMPL_VAR)}
    try:
        return _run(st, out, model_config, modes, phases, log, gpu, device, judge_sglang, impl, t_start)
    finally:
        for var, value in saved_env.items():  # the phases set the hook's variables; leave the process as it was
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def _run(st, out, model_config, modes, phases, log, gpu, device, judge_sglang, impl, t_start) -> dict:
    sg = import_sglang()
    meta = {"what": "SGLang 0.5.23's own TritonAttnBackend drives the kdtree verify hook (target verify eager, "
                    "CUDA-graph capture and replay, refusals); kdtree_lab/lab/sglang_backend_proof.py",
            "sglang": sg.version, "torch": torch.__version__, "device": torch.cuda.get_device_name() if gpu else "cpu",
            "measured_on": "gpu" if gpu else "cpu dry run (Triton interpreter; graphs replaced by eager calls; "
                                             "SGLang's extend kernel recorded, not judged)",
            "impl": impl,  # the hook's implementation in every phase (the refusal of a forced configuration: cuda)
            "settings": {**asdict(st), "drafts": [asdict(d) for d in st.drafts]}, "modes": list(modes),
            "imported_with_cuda_hidden": True,
            "tree_kernel": "SGLang's sgl_build_tree_kernel_triton (its XPU path) through build_tree_kernel_efficient",
            "select_top_k_tokens": "run eagerly (torch.compiler stance force_eager; SGLang torch.compiles it)"}
    rec = Recorder(out, meta)
    with _sigterm_records(rec), tempfile.TemporaryDirectory() as work:
        try:
            model_dir = str(Path(work) / "model")
            Path(model_dir).mkdir()
            (Path(model_dir) / "config.json").write_text(json.dumps(model_config))
            patches = [] if gpu else [mock.patch.object(sg.tb, "get_device_core_count", return_value=st.sms),
                                      mock.patch.object(sg.decode_attention, "_lean_num_cus", return_value=st.sms)]
            for p in patches:
                p.start()
            if impl:
                os.environ[hook_module.IMPL_VAR] = impl
            rec.data["plugin"] = load_hook_plugin(sg, Path(work) / "plugin")
            rec.seconds("imports + plugin", time.perf_counter() - t_start)
            log(f"SGLang {sg.version}, plugin {rec.data['plugin']['entry_point']} ({rec.data['plugin']['source']}); "
                f"{'GPU ' + meta['device'] if gpu else 'CPU dry run'}")
            rnd = Rand(st.seed, device)
            for draft in st.drafts:
                for kv in st.kvs:
                    stack = build_stack(sg, draft, kv, st, device, model_dir)
                    if "eager" in phases:
                        t0 = time.perf_counter()
                        eager_phase(stack, rec, rnd, judge_sglang)
                        rec.seconds("eager", time.perf_counter() - t0)
                        log(f"  eager {draft.name} {kv}: {time.perf_counter() - t0:.1f} s")
                    if "graph" in phases:
                        sizes = capture_sizes(sg, stack)
                        rec.data.setdefault("capture_sizes", {})[draft.name] = sizes
                        for mode in modes:
                            t0 = time.perf_counter()
                            n = st.replays if mode == "on" else st.validate_replays
                            graph_phase(stack, rec, rnd, mode, n, judge_sglang, sizes)
                            rec.seconds(f"graph {mode}", time.perf_counter() - t0)
                            log(f"  graph {mode} {draft.name} {kv}: sizes {sizes}, {n} replays each, "
                                f"{time.perf_counter() - t0:.1f} s")
            if "refuse" in phases:
                t0 = time.perf_counter()
                tree = next((d for d in st.drafts if d.kind == "eagle"), st.drafts[0])
                refuse_phase(sg, st, tree, rec, rnd, device, model_dir, judge_sglang, impl)
                rec.seconds("refuse", time.perf_counter() - t0)
                log(f"  refuse: {time.perf_counter() - t0:.1f} s")
        except ProofError as exc:
            rec.finish(f"failed: {exc}")
            raise
        except Exception as exc:
            where = _where(exc)
            rec.finish(f"failed: {type(exc).__name__}: {exc} ({where})")
            raise ProofError(f"{type(exc).__name__}: {exc} ({where})") from exc
        finally:
            for p in patches if "patches" in locals() else []:
                p.stop()
    rec.data["seconds"]["total"] = round(time.perf_counter() - t_start, 2)
    rec.finish("complete" if rec.data["ok"] else "complete, with failures (see summary)")
    return rec.data


def _where(exc: BaseException) -> str:
    """The innermost frame of the traceback in SGLang or kdtree_lab: file:line function."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "sglang" in f.filename or "kdtree_lab" in f.filename]
    f = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    return f"{Path(f.filename).name}:{f.lineno} {f.name}"


def summary_table(data: dict) -> str:
    """The short table the script prints: one line per phase and configuration, then the timings."""
    lines = [f"the hook's implementation: {data.get('impl', 'unrecorded')}",
             f"{'phase / configuration':<40} {'rows':>5} {'ok':>5} {'mism.':>6} {'served/calls':>13}"]
    for key, s in data["summary"].items():
        lines.append(f"{key:<40} {s['rows']:>5} {s['ok']:>5} {s['mismatches']:>6} "
                     f"{str(s['served']) + '/' + str(s['calls']):>13}")
    lines.append("seconds: " + ", ".join(f"{k} {v}" for k, v in data["seconds"].items()))
    lines.append(f"status: {data['status']}")
    return "\n".join(lines)
