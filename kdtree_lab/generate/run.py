"""A whole generation check: train the model, prefill the prompts, decode greedily, then decode speculatively with
every draft configuration and verify path, and compare every token with fp32 greedy decoding.

``plan(spec)`` checks everything before any work (the exit codes of ``kdtree-lab generate``); ``generate(spec)``
runs it and returns a JSON-ready dict (``RESULT_KEYS``); ``rows(result)`` is its summary table.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from . import corpus
from ..checks.bench import sglang_available
from .attend import CAPTURE_SAFE, PATHS
from .check import compare, first_divergence, reference_logits
from .drafts import DraftConfig, Drafter, parse
from .loop import Engine, GenerationInputError
from .model import ModelSpec, absorbed

POOLS = ("bf16", "fp8")
GPU_PATHS = ("ours", "hook", "sglang")


@dataclass(frozen=True)
class GenerateSpec:
    """What one check runs. heads: the per-rank head counts (one model each); layers / hidden / ffn: the model;
    train_steps: its training; contexts: prompt lengths (tokens); prompts: requests per batch; new_tokens: tokens
    each request emits; drafts: configurations (``drafts.parse``); paths: verify paths; pools: KV pool dtypes;
    graphs: the capture-safe paths replay a CUDA graph (and run eager too with ``eager_too``); reference_max_context:
    the fp32 path's longest context; pool_tokens: the pool's token slots (0: sized for the run; else a prompt set
    that does not fit is refused, as SGLang's --max-total-tokens); max_draft: the largest tree planned (SGLang's
    --speculative-num-draft-tokens); impl: the configuration ``ours`` and ``hook`` run."""

    heads: tuple[int, ...] = (8,)
    layers: int = 4
    hidden: int = 256
    ffn: int = 512
    train_steps: int = 300
    train_batch: int = 32
    train_seq: int = 256
    contexts: tuple[int, ...] = (1024,)
    prompts: int = 8
    new_tokens: int = 256
    drafts: tuple[str, ...] = ("chain-4", "eagle-4x3-16", "ddtree-32-8")
    paths: tuple[str, ...] = ("ours", "sglang", "reference")
    pools: tuple[str, ...] = POOLS
    graphs: bool = True
    eager_too: bool = False
    reference_max_context: int = 8192
    pool_tokens: int = 0
    max_draft: int = 64
    impl: str = "cuda"
    device: str = "cuda"
    seed: int = 0


def plan(spec: GenerateSpec) -> list[DraftConfig]:
    """Every rule checked before any work: GenerationInputError (exit 2 or 3 in the CLI) in one line naming the
    setting. Returns the parsed draft configurations."""
    drafts = [parse(d) for d in spec.drafts]
    for d in drafts:
        if d.num_draft > spec.max_draft:
            raise GenerationInputError(f"draft {d.name}: {d.num_draft} nodes, larger than the {spec.max_draft} planned "
                                       "(--max-draft, SGLang's --speculative-num-draft-tokens)")
    for p in spec.paths:
        if p not in PATHS:
            raise ValueError(f"paths: expected some of {', '.join(PATHS)}, found {p!r}")
    for p in spec.pools:
        if p not in POOLS:
            raise ValueError(f"pools: expected some of {', '.join(POOLS)}, found {p!r}")
    if not spec.contexts or min(spec.contexts) < 2:
        raise ValueError(f"contexts: expected prompt lengths >= 2, found {list(spec.contexts)}")
    if spec.prompts < 1 or spec.new_tokens < 2:
        raise ValueError(f"prompts, new_tokens: expected >= 1 and >= 2, found {spec.prompts}, {spec.new_tokens}")
    if spec.pool_tokens:
        need = spec.prompts * (max(spec.contexts) + spec.new_tokens)
        if need > spec.pool_tokens:
            raise GenerationInputError(f"pool_tokens: {spec.prompts} prompts of {max(spec.contexts)} tokens and "
                                       f"{spec.new_tokens} new each need {need} slots, the pool holds "
                                       f"{spec.pool_tokens}")
    cuda = spec.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise GenerationInputError(f"device: {spec.device} needs a CUDA GPU, found none here; pass --device cpu "
                                   "(paths triton and reference)")
    if not cuda:
        gpu_only = [p for p in spec.paths if p in GPU_PATHS]
        if gpu_only:
            raise GenerationInputError(f"paths: {', '.join(gpu_only)} run on a CUDA GPU, found the device "
                                       f"{spec.device}; on a CPU take triton and reference")
    if "sglang" in spec.paths and cuda and not sglang_available():
        raise GenerationInputError("paths: sglang needs SGLang 0.5.23's Triton kernels (pip install sglang==0.5.23), "
                                   "not importable here")
    return drafts


def _modes(path: str, spec: GenerateSpec) -> list[bool]:
    """Graph replay or eager for a path: graphs where it is capture-safe and asked for, eager too if asked."""
    if spec.graphs and path in CAPTURE_SAFE and spec.device.startswith("cuda"):
        return [True, False] if spec.eager_too else [True]
    return [False]


def _run_loop(engine: Engine, step: Callable) -> dict:
    """Steps until every request has emitted its tokens; the times of each."""
    times = []
    while not engine.done():
        times.append(step())
    n = engine.max_new
    tokens = sum(min(len(r.emitted), n) - 1 for r in engine.requests)  # the first came from prefill
    loop_s = sum(t.step_ms for t in times) / 1e3
    spec_accepts = [a for r in engine.requests for a in r.accepts[1:]]
    verify = sum(t.verify_ms for t in times)
    return {"steps": len(times), "tokens": tokens, "seconds": loop_s,
            "tokens_per_s": tokens / loop_s if loop_s else None,
            "tokens_per_s_per_request": tokens / loop_s / len(engine.requests) if loop_s else None,
            "accept_length": float(np.mean(spec_accepts)) if spec_accepts else None,
            "draft_ms": float(np.mean([t.draft_ms for t in times])), "verify_ms": float(np.mean([t.verify_ms for t in times])),
            "step_ms": float(np.mean([t.step_ms for t in times])),
            "verify_share": verify / sum(t.step_ms for t in times) if times else None}


def generate(spec: GenerateSpec, on_run: Callable[[dict], None] | None = None,
             on_stage: Callable[[str], None] | None = None) -> dict:
    """Run the whole check (module docstring). ``on_run(row)`` after each run, ``on_stage(words)`` before each
    stage. A KeyboardInterrupt leaves ``result["interrupted"]`` set and the runs so far in place (the caller prints
    them)."""
    drafts = plan(spec)
    dev = torch.device(spec.device)
    data = corpus.text()
    result: dict = {"spec": asdict(spec), "corpus": {"sha256_16": corpus.digest(data), "bytes": len(data)},
                    "models": [], "runs": [], "interrupted": False}
    say = on_stage or (lambda words: None)
    try:
        for heads in spec.heads:
            mspec = ModelSpec(heads=heads, layers=spec.layers, hidden=spec.hidden, ffn=spec.ffn, seed=spec.seed)
            say(f"training the H={heads} model ({spec.train_steps} steps)")
            t0 = time.perf_counter()
            trained = corpus.train(mspec, corpus.TrainSpec(steps=spec.train_steps, batch=spec.train_batch,
                                                           seq=spec.train_seq, seed=spec.seed), dev, data)
            result["models"].append({"heads": heads, "spec": mspec.as_dict(), "losses": trained.losses,
                                     "exit_losses": trained.exit_losses, "seconds": time.perf_counter() - t0})
            w = absorbed(trained.model, mspec, torch.bfloat16, dev)
            w32 = absorbed(trained.model, mspec, torch.float32, dev)
            for pool in spec.pools:
                for ctx in spec.contexts:
                    _context(spec, drafts, w, w32, pool, ctx, data, dev, result, on_run, say)
    except KeyboardInterrupt:
        result["interrupted"] = True
    return result


def _context(spec, drafts, w, w32, pool, ctx, data, dev, result, on_run, say) -> None:
    heads = w.spec.heads
    prompts = corpus.prompts(data, spec.prompts, ctx, seed=spec.seed + 1)
    engine = Engine(w, prompts, spec.new_tokens, pool, dev, num_draft=max(d.num_draft for d in drafts),
                    forwards=max(d.forwards for d in drafts) * max(d.topk or 1 for d in drafts), impl=spec.impl)
    say(f"H={heads}, {pool} pool, context {ctx}: prefill of {spec.prompts} prompts")
    engine.prefill()
    saved = engine.save()
    cache: dict[tuple, np.ndarray] = {}

    def check(eng: Engine, bound: float | None = None) -> tuple[dict, list[list[int]]]:
        n = spec.new_tokens
        emitted = [r.emitted[:n] for r in eng.requests]
        refs = []
        for b, (r, toks) in enumerate(zip(eng.requests, emitted)):
            key = (b, tuple(toks))
            if key not in cache:
                ctx_slots = saved[2][b, :len(r.prompt) - 1]
                cache[key] = reference_logits(w32, eng.pool.buffers, ctx_slots, r.prompt, toks).cpu().numpy()
            refs.append(cache[key])
        tc = compare(emitted, [np.stack(r.logits[:n]) for r in eng.requests], refs, bound)
        return tc.as_dict(), emitted

    base = {"heads": heads, "pool": pool, "context": ctx, "prompts": spec.prompts}
    say(f"H={heads}, {pool}, {ctx}: greedy decoding")
    engine.restore(saved, 1)
    timing = _run_loop(engine, engine.greedy_step)
    tc, greedy_tokens = check(engine)
    greedy_bound = tc["bound"]  # the speculative runs are judged by greedy decoding's bound, not their own
    row = base | {"draft": "none (greedy)", "path": engine.draft_decode.kind + " decode", "graphs": False} | timing | \
        {"check": tc, "diverges_from_greedy": 0}
    result["runs"].append(row)
    on_run and on_run(row)
    for d in drafts:
        for path in spec.paths:
            if path == "reference" and ctx > spec.reference_max_context:
                continue
            for graphs in _modes(path, spec):
                say(f"H={heads}, {pool}, {ctx}: {d.name} verified by {path}{' in graphs' if graphs else ''}")
                engine.restore(saved, d.num_draft)
                engine.warm(path, graphs)
                drafter = Drafter(engine, d)
                timing = _run_loop(engine, lambda: engine.spec_step(drafter, path, graphs))
                tc, toks = check(engine, greedy_bound)
                div = [first_divergence(a, g) for a, g in zip(toks, greedy_tokens)]
                row = base | {"draft": d.name, "num_draft": d.num_draft, "path": path, "graphs": graphs} | timing | \
                    {"check": tc, "diverges_from_greedy": sum(x is not None for x in div),
                     "status_flags": engine.paths.status() if path in ("ours", "hook", "triton") else {}}
                result["runs"].append(row)
                on_run and on_run(row)


def gpu_paths_left_out(spec: GenerateSpec) -> list[tuple[str, str]]:
    """(what, why) of the verify paths a run on a CPU leaves out: ours, the hook and SGLang's kernel run on a CUDA
    GPU only. Notebook 08 records each as a skip (a skip is never counted as a pass)."""
    if spec.device.startswith("cuda"):
        return []
    return [(f"verify paths {', '.join(GPU_PATHS)} (our kernel, the SGLang hook, SGLang's kernel)",
             f"they run on a CUDA GPU; this run's device is {spec.device} (paths {', '.join(spec.paths)})")]


def rows(result: dict) -> list[dict]:
    """One line per run: the summary table of ``kdtree-lab generate`` and notebook 08."""
    out = []
    for r in result["runs"]:
        c = r["check"]
        out.append({"H": r["heads"], "pool": r["pool"], "context": r["context"], "draft": r["draft"],
                    "path": r["path"] + (" (graph)" if r["graphs"] else ""),
                    "accept": round(r["accept_length"], 2) if r["accept_length"] else None,
                    "tok/s": round(r["tokens_per_s"], 1) if r["tokens_per_s"] else None,
                    "verify share": round(r["verify_share"], 2) if r["verify_share"] is not None else None,
                    "compared": c["compared"], "mismatch": len(c["mismatches"]), "unexplained": c["unexplained"]})
    return out


def problems(result: dict) -> list[str]:
    """What makes the check fail: an unexplained mismatch, a kernel status flag, an interruption."""
    out = []
    for r in result["runs"]:
        where = f"H={r['heads']} {r['pool']} {r['context']} {r['draft']} {r['path']}"
        if r["check"]["unexplained"]:
            out.append(f"{where}: {r['check']['unexplained']} unexplained mismatches")
        bad = {k: v for k, v in r.get("status_flags", {}).items() if v}
        if bad:
            out.append(f"{where}: kernel status flags {bad}")
    if result.get("interrupted"):
        out.append("interrupted before every run finished")
    return out


__all__ = ["GenerateSpec", "plan", "generate", "rows", "problems", "GenerationInputError"]
