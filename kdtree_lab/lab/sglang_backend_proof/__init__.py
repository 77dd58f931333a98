"""SGLang 0.5.23's own ``TritonAttnBackend`` drives the verify hook: the proof behind scripts/sglang_backend_proof.py
and tests/test_gpu_sglang_backend.py (docs/sglang.md, "SGLang's backend drives the hook"). By what each part does:
``settings`` (drafts, pools, sizes), ``sglang_api`` (what is used of SGLang, imported once), ``plugin`` (the hook
installed as ``sglang serve`` installs it), ``stack`` (SGLang's pools and backend for one configuration), ``steps``
(one verify step: requests, draft, forward, oracle), ``recorder`` (the JSON rewritten after every row), the phases
``eager``, ``graph`` and ``refuse``, and ``run`` (the whole proof and its summary table).

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

from .recorder import Recorder
from .refuse import Refusal, refusals
from .run import run, summary_table
from .settings import DRAFTS, KV_CACHE_DTYPES, SGLANG_VERSION, Draft, ProofError, Settings
from .sglang_api import import_sglang
from .plugin import entry_point, load_hook_plugin, publish_entry_point
from .stack import Stack, build_stack, make_backend, server_argv
from .steps import draw_lengths

__all__ = ["DRAFTS", "KV_CACHE_DTYPES", "SGLANG_VERSION", "Draft", "ProofError", "Recorder", "Refusal", "Settings",
           "Stack", "build_stack", "draw_lengths", "entry_point", "import_sglang", "load_hook_plugin",
           "make_backend", "publish_entry_point", "refusals", "run", "server_argv", "summary_table"]
