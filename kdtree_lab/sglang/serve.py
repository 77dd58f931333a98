"""Start SGLang 0.5.23 with the kdtree verify hook in every tensor-parallel rank.

    KDTREE_VERIFY=on python -m kdtree_lab.sglang.serve <SGLang server arguments>

Two ways in, one mechanism. SGLang 0.5.23 loads the ``sglang.srt.plugins`` entry points in each of its
processes (``sglang.srt.plugins.load_plugins``, called by every scheduler before its model runner is built), and
its ``HookRegistry`` wraps a named function there. ``sglang_plugin`` registers an AFTER hook on
``TritonAttnBackend.__init__`` that calls :func:`kdtree_lab.sglang.hook.install` on the target model's backend
right after it is built, before CUDA graphs are captured. kdtree-lab declares that entry point, so with the
package installed a stock ``sglang serve ...`` under ``KDTREE_VERIFY=on`` gets the hook. ``python -m
kdtree_lab.sglang.serve`` also works from a source checkout (no entry point): it hands SGLang's ``launch_server`` a
scheduler function that registers the same hook in each rank first, and it refuses, in one line with exit 2,
what the hook cannot serve: an attention backend other than ``triton``, no speculative algorithm (no verify
step), a ``KDTREE_VERIFY`` other than off / validate / on. A target model that is not MLA is refused in the rank,
naming the model; draft-model backends are left as SGLang built them. ``KDTREE_VERIFY=off`` (the default)
registers nothing.
"""

from __future__ import annotations

import logging
import os
import sys

from .hook import ENV_VAR, HookInstallError, parse_mode

log = logging.getLogger("kdtree_lab.sglang.serve")
TARGET = "sglang.srt.layers.attention.triton_backend.TritonAttnBackend.__init__"
USAGE = "usage: KDTREE_VERIFY=on|validate|off python -m kdtree_lab.sglang.serve <SGLang 0.5.23 server arguments>"
_registered = False


def launch_problems(server_args) -> list[str]:
    """What keeps the hook from serving this SGLang configuration (empty: launch). Reads parsed arguments."""
    problems = []
    backend = getattr(server_args, "attention_backend", None)
    if backend != "triton":
        problems.append(f"--attention-backend triton is required (got {backend or 'SGLang auto-selection'}): the hook "
                        "replaces TritonAttnBackend's verify kernel")
    if not getattr(server_args, "speculative_algorithm", None):
        problems.append("no --speculative-algorithm: without speculative decoding there is no verify step to serve")
    return problems


def after_backend_init(result, backend, *args, **kwargs):
    """HookRegistry AFTER hook on TritonAttnBackend.__init__(self, model_runner, ...): install the verify hook on a
    target MLA backend (model_runner passed by position or by name)."""
    from .hook import install

    model_runner = args[0] if args else kwargs.get("model_runner")

    if getattr(model_runner, "is_draft_worker", False) or hasattr(backend, "_kdtree_hook"):
        return result
    if not getattr(backend, "use_mla", False):
        path = getattr(getattr(model_runner, "server_args", None), "model_path", "the target model")
        raise HookInstallError(f"kdtree_lab.sglang.serve: {path} does not use MLA attention; the kdtree verify kernel serves "
                               "MLA models only (DeepSeek-V2/V3, Kimi K2); unset KDTREE_VERIFY to run SGLang alone")
    hook = install(backend, parse_mode())
    log.info("kdtree verify hook installed (mode %s, H=%d, N=%d, max_bs=%d)", hook.mode, hook.num_heads,
             hook.num_draft, hook.max_bs)
    return result


def sglang_plugin() -> None:
    """The ``sglang.srt.plugins`` entry point: register the install hook unless KDTREE_VERIFY is off (once per
    process)."""
    global _registered
    if _registered or parse_mode() == "off":
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, after_backend_init, HookType.AFTER)
    _registered = True


def run_scheduler_with_hook(*args, **kwargs):
    """The scheduler process target handed to SGLang's launch_server: register the hook (SGLang's scheduler applies
    the registry when it loads its plugins), then run SGLang's own scheduler."""
    from sglang.srt.managers.scheduler import run_scheduler_process

    sglang_plugin()
    return run_scheduler_process(*args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        print(__doc__)
        return 0 if argv else 2
    try:
        mode = parse_mode()
    except ValueError as exc:
        print(f"kdtree_lab.sglang.serve: {exc}", file=sys.stderr)
        return 2
    os.environ[ENV_VAR] = mode  # the spawned ranks read it
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args(argv)
    problems = launch_problems(server_args)
    if problems:
        for p in problems:
            print(f"kdtree_lab.sglang.serve: {p}", file=sys.stderr)
        return 2
    from sglang.launch_server import run_server
    from sglang.srt.entrypoints import http_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.utils import kill_process_tree

    load_plugins()  # as `sglang serve` does in its main process

    # run_server dispatches on the resolved flags and calls http_server.launch_server(server_args) in HTTP mode:
    # hand it our scheduler function there.
    original = http_server.launch_server
    http_server.launch_server = lambda sa, **kw: original(sa, **{"run_scheduler_process_func": run_scheduler_with_hook,
                                                                 **kw})
    try:
        run_server(server_args)
    finally:
        http_server.launch_server = original
        kill_process_tree(os.getpid(), include_parent=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
