"""The whole proof: the implementation checked, SGLang imported, the plugin loaded, each (draft, pool)
configuration through the phases asked for, the recorder finished; and the table the script prints."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable
from unittest import mock

import torch

from ...sglang import hook as hook_module
from .eager import eager_phase
from .graph import graph_phase
from .plugin import load_hook_plugin
from .recorder import Recorder
from .refuse import refuse_phase
from .settings import ProofError, Settings
from .sglang_api import import_sglang
from .stack import build_stack, capture_sizes
from .steps import Rand


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
    from ...kernels.impls import IMPLS, kv_refusal

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
                    "CUDA-graph capture and replay, refusals); kdtree_lab/lab/sglang_backend_proof/",
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
