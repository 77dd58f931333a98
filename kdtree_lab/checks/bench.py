"""Benchmarks: our CUDA kernel, the Triton twin and SGLang's own Triton kernels on identical verify buffers.

Inputs rotate over several pool copies so that a call does not find its latent KV in L2 (as in a model, where each
layer has its own KV); the reduce is included. By default each sample is the replay of a CUDA graph that captured
one call (how SGLang runs verify, and the GPU time alone); ``method="eager"`` times eager calls instead, which adds
the host's launch overhead (for our CUDA kernel ~0.1 ms of Python dispatch and metadata checks, visible on small
shapes). The timing harness is ``timing``, the floors and rates ``roofline``, the grids ``bench_presets``, the
post-processing ``bench_results``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..core.mla import D_V
from ..kernels.attention import VerifyAttention, batch_args
from ..kernels.impls import CUDA_IMPLS, IMPLS
from .batch import VerifyBatch, build_verify_batch
from .bench_presets import TIMEABLE, preset_items
from .roofline import Ceilings, Shape, derived, row_kv
from .timing import measure_ceilings, timed

L2_ROTATE_BYTES = 256 << 20  # rotate inputs until this many KV bytes separate two uses of one copy
MAX_COPIES = 16


@dataclass
class Timing:
    impl: str
    shape: Shape
    ms: float
    ms_samples: int
    nsplit: int | None = None
    method: str = "eager"  # how it was timed: "graph" (replays of a captured call) or "eager"
    kernel: str | None = None  # the CUDA kernel configuration that ran (ours only)

    def row(self, ceilings: Ceilings) -> dict:
        s = self.shape
        return {"impl": self.impl, "B": s.batch, "L": s.prefix, "N": s.draft, "H": s.heads, "mask": s.mask,
                **({"kv": s.kv} if s.kv != "bf16" else {}),
                "ms": round(self.ms, 4), **derived(self.impl, s, self.ms, asdict(ceilings)),
                "nsplit": self.nsplit, "timing": self.method, **({"kernel": self.kernel} if self.kernel else {})}


FP8_SCALES = (0.75, 1.5)  # k_scale, v_scale of the fp8 shapes: other than 1, as a calibrated checkpoint passes them


def pool_scales(kv: str) -> tuple[float, float]:
    """(k_scale, v_scale) the benchmark and the graph checks build a ``kv`` pool with: FP8_SCALES for fp8, 1 for bf16."""
    return FP8_SCALES if kv == "fp8" else (1.0, 1.0)


def _copies(shape: Shape) -> int:
    return max(1, min(MAX_COPIES, math.ceil(L2_ROTATE_BYTES / max(1, shape.kv_bytes))))


def shape_batches(shape: Shape, copies: int | None = None, seed: int = 0) -> list[VerifyBatch]:
    """``copies`` input sets of ``shape`` on the GPU (default: enough that timing rotates them out of L2)."""
    scales = pool_scales(shape.kv)
    return [build_verify_batch([shape.prefix] * shape.batch, shape.draft, shape.heads, mask=shape.mask,
                               seed=seed + i, device="cuda", kv_dtype=shape.kv, k_scale=scales[0],
                               v_scale=scales[1]) for i in range(copies or _copies(shape))]


def sglang_available() -> str | None:
    """SGLang's version when its Triton attention kernels import, else None."""
    try:
        import sglang
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd  # noqa: F401

        return sglang.__version__
    except Exception:  # not installed, or an incompatible environment
        return None


def time_ours(impl: str, shape: Shape, nsplit: int | None = None, method: str = "graph") -> Timing:
    """Median time of our CUDA kernel (a configuration named in impls.CUDA_IMPLS) or the Triton twin
    (split + reduce) on ``shape``, through :class:`~kdtree_lab.kernels.attention.VerifyAttention` (``nsplit``:
    its split count; None, the plan's)."""
    if impl not in TIMEABLE:
        raise ValueError(f"impl: expected one of {TIMEABLE}, got {impl!r}")
    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    attn = VerifyAttention(shape.batch, shape.draft, shape.heads, shape.kv, "cuda", impl, nsplit=nsplit or 0,
                           batch_sizes=(shape.batch,))
    args = [batch_args(b) for b in batches]
    ms, n, how = timed(lambda i: attn.run(*args[i]), copies, method)
    kernel = attn.config(shape.batch).name if impl in CUDA_IMPLS else None  # fp8: the e4m3 variant that ran
    return Timing(impl, shape, ms, n, attn.nsplit(shape.batch), how, kernel)


def time_sglang_extend(shape: Shape, iters: int = 5, method: str = "graph") -> Timing:
    """SGLang 0.5.23's ``extend_attention_fwd`` as TritonAttnBackend calls it for MLA target verify."""
    from .sglang_kernels import extend_attention

    copies = min(_copies(shape), 4)
    batches = shape_batches(shape, copies)

    def run(i: int) -> None:
        extend_attention(batches[i])

    ms, n, how = timed(run, copies, method, warmup=1, iters=iters)
    return Timing("sglang_extend", shape, ms, n, method=how)


def time_sglang_verify_mla(shape: Shape, iters: int = 20, method: str = "graph") -> Timing:
    """SGLang 0.5.23's chain verify kernel ``verify_shared_kv_fwd`` (chains only) as its backend's verify slot
    calls it."""
    from .oracle import compare, reference
    from .parity import within_tolerance
    from .sglang_kernels import verify_shared_kv

    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    err = compare(verify_shared_kv(batches[0]), reference(batches[0]))
    if not within_tolerance(err):
        raise PeerUnavailable(f"verify_shared_kv_fwd's output differs from the oracle on {shape}: {err}")
    ms, n, how = timed(lambda i: verify_shared_kv(batches[i]), copies, method, iters=iters)
    return Timing("sglang_verify_mla", shape, ms, n, method=how)


class PeerUnavailable(RuntimeError):
    """A peer implementation that does not load here; the message is its exact error."""


def time_flashmla(shape: Shape, method: str = "graph") -> Timing:
    """FlashMLA's dense SM90 decode (``sgl-flash-mla``) on a chain shape at equal rows: N query tokens per request,
    causal, over 64-token pages holding the prefix and the draft tokens (kdtree_lab.checks.flashmla). Checked
    against the oracle before it is timed. Raises PeerUnavailable with the exact error where it does not load."""
    from . import flashmla
    from .oracle import compare, reference
    from .parity import within_tolerance

    module, error = flashmla.load()
    if module is None:
        raise PeerUnavailable(error)
    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    paged = [flashmla.paged(b, seed=i) for i, b in enumerate(batches)]
    runs = [flashmla.make_runner(module, p) for p in paged]
    out = runs[0]()  # also computes the scheduler metadata the timed calls reuse
    err = compare(out.reshape(-1, shape.heads, D_V), reference(batches[0]))
    if not within_tolerance(err):
        raise PeerUnavailable(f"FlashMLA's output differs from the oracle on {shape}: {err}")
    for r in runs[1:]:
        r()
    ms, n, how = timed(lambda i: runs[i](), copies, method)
    return Timing("flashmla", shape, ms, n, method=how)


def time_b12x(shape: Shape, method: str = "graph", page: int = 1) -> Timing:
    """b12x's dense MLA in verify mode (PyPI ``b12x``, CuTe DSL for SM120) on a chain or causal shape at equal rows:
    N causal query rows per request over ``page``-token pages holding the prefix and the draft tokens
    (kdtree_lab.checks.b12x; the first compile of a shape takes seconds, before timing). Checked against the fp64
    attention over its layout before it is timed. Raises PeerUnavailable with the exact error where it does not
    load, compile or match."""
    from . import b12x
    from .oracle import compare
    from .parity import within_tolerance

    module, error = b12x.load()
    if module is None:
        raise PeerUnavailable(error)
    if shape.mask == "tree":
        raise PeerUnavailable(f"b12x's dense MLA masks are causal or a window: no tree ({shape})")
    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    calls = [b12x.prepare(module, b12x.paged(b, page=page, seed=i)) for i, b in enumerate(batches)]

    def check(when: str) -> None:
        calls[0].out.fill_(float("nan"))
        err = compare(calls[0].run(), b12x.reference(calls[0].paged))
        if not within_tolerance(err, e4m3=shape.kv == "fp8"):
            raise PeerUnavailable(f"b12x's output differs from the fp64 attention over its layout {when} on {shape}: "
                                  f"{err}")

    check("before timing")
    for c in calls[1:]:
        c.run()
    ms, n, how = timed(lambda i: calls[i].run(), copies, method)
    check("after timing")  # the timed calls left b12x's state fit to run
    return Timing("b12x" if page == 1 else f"b12x_p{page}", shape, ms, n, nsplit=calls[0].splits, method=how)


def time_sglang_decode(shape: Shape, max_kv_splits: int = 256, method: str = "graph") -> Timing:
    """SGLang's split-K ``decode_attention_fwd`` (grouped MLA) for one token per request: the reference point a
    tree verify should match. Split counts come from SGLang's own ``get_num_kv_splits_triton``."""
    import triton
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

    one = Shape(shape.batch, shape.prefix, 1, shape.heads, "causal", shape.kv)
    copies = _copies(one)
    batches = shape_batches(one, copies)
    bsz, heads = shape.batch, shape.heads
    logits = torch.empty(bsz, heads, max_kv_splits, D_V, dtype=torch.float32, device="cuda")
    lse = torch.empty(bsz, heads, max_kv_splits, dtype=torch.float32, device="cuda")
    kv_splits = torch.empty(bsz, dtype=torch.int32, device="cuda")  # SGLang's num_kv_splits
    seq_lens = torch.full((bsz,), shape.prefix, dtype=torch.int32, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    get_num_kv_splits_triton[(1,)](kv_splits, seq_lens, bsz, 1, heads, 1, max_kv_splits, sms,
                                   MAX_NUM_SEQ=max(16, triton.next_power_of_2(bsz)))

    def run(i: int) -> None:
        b = batches[i]
        decode_attention_fwd(b.q, b.k_buffer, b.v_buffer, b.o, b.kv_indptr, b.kv_indices, logits, lse, kv_splits,
                             max_kv_splits, b.sm_scale, b.k_scale, b.v_scale, has_mla=True, use_pdl=True)

    ms, n, how = timed(run, copies, method)
    return Timing("sglang_decode_1tok", shape, ms, n, method=how)


PEER_TIMERS = {"sglang_verify_mla": time_sglang_verify_mla, "flashmla": time_flashmla, "b12x": time_b12x,
               "b12x_p64": lambda shape, method="graph": time_b12x(shape, method, page=64)}  # b12x over 64-token pages


def run_grid(shapes: list[Shape], impls: list[str], ceilings: Ceilings | None = None,
             progress: bool = True, method: str = "graph") -> dict:
    """Time every impl on every shape (``method``: graph replays, the default, or eager calls); returns ceilings
    and one row per (impl, shape) with floors and speedups."""
    ceilings = ceilings or measure_ceilings()
    rows = []
    it = shapes
    if progress:
        from ..core.display import progress as bar

        it = bar(shapes, desc="bench", unit="shape")
    have_sglang = sglang_available()
    peers: dict[str, str] = {}
    for shape in it:
        timings = {}
        for impl in impls:
            if impl.startswith("sglang") and not have_sglang:
                continue
            if impl in TIMEABLE and shape.kv not in IMPLS[impl].kv_dtypes:
                continue  # not served: no row (the summary says which implementations serve fp8)
            if impl in TIMEABLE:
                timings[impl] = time_ours(impl, shape, method=method)
            elif impl == "sglang_extend":
                timings[impl] = time_sglang_extend(shape, method=method)
            elif impl == "sglang_decode":
                timings[impl] = time_sglang_decode(shape, method=method)
            elif impl in PEER_TIMERS:
                peer = PEER_TIMERS[impl]
                try:
                    timings[impl] = peer(shape, method=method)
                except Exception as exc:  # noqa: BLE001 - a peer that fails is recorded with its exact error, no row
                    error = str(exc) if isinstance(exc, PeerUnavailable) else f"{type(exc).__name__}: {exc}"
                    peers.setdefault(impl, error)
            torch.cuda.empty_cache()
        base = timings.get("sglang_extend")
        dec = timings.get("sglang_decode")
        for impl, t in timings.items():
            row = t.row(ceilings)
            if base and impl != "sglang_extend":
                row["speedup_vs_sglang_verify"] = round(base.ms / t.ms, 1)
            if dec and impl in TIMEABLE:
                row["vs_sglang_decode_1tok"] = round(dec.ms / t.ms, 3)
            rows.append(row)
    return {"ceilings": asdict(ceilings), "sglang": have_sglang, "timing": method, "rows": rows,
            **({"peers_unavailable": peers} if peers else {})}


def run_preset(name: str, impls: list[str] | None = None, progress: bool = True,
               checkpoint: Path | None = None, method: str = "graph", resume: dict | None = None) -> dict:
    """Time preset ``name`` (ceilings first). ``impls`` filters the implementations the preset names per shape;
    a CUDA kernel configuration it names that the preset does not (cuda_wgmma, for one) is timed wherever
    the preset times ``cuda``. ``checkpoint``: rewrite this JSON file after every shape, so that an
    interrupted run keeps what it measured. ``resume``: an earlier (partial) result of this preset; its rows are
    kept and its shapes skipped."""
    return run_items(name, preset_items(name, impls), progress, checkpoint, method, resume)


def run_items(name: str, items: list[tuple[Shape, list[str]]], progress: bool = True,
              checkpoint: Path | None = None, method: str = "graph", resume: dict | None = None) -> dict:
    """Time (shape, implementations) pairs as run_preset does, under ``name`` (a preset's, or "shapes" for the
    shapes ``kdtree-lab bench --shape`` names)."""
    ceilings = measure_ceilings()
    done = {(r["B"], r["L"], r["N"], r["H"], row_kv(r)) for r in resume["rows"]} if resume else set()
    rows, have = list(resume["rows"]) if resume else [], sglang_available()
    items = [(s, i) for s, i in items if (s.batch, s.prefix, s.draft, s.heads, s.kv) not in done]
    if progress:
        from ..core.display import progress as bar

        items = bar(items, desc=f"bench {name}", unit="shape")
    from ..kernels.build import timing_conditions

    result = {"preset": name, "ceilings": asdict(ceilings), "sglang": have, "timing": method, "rows": rows,
              **timing_conditions()}
    if resume:
        result["resumed_from"] = {"rows": len(resume["rows"]), "ceilings": resume.get("ceilings")}
    for shape, chosen in items:
        grid = run_grid([shape], chosen, ceilings, progress=False, method=method)
        rows += grid["rows"]
        for impl, error in grid.get("peers_unavailable", {}).items():
            result.setdefault("peers_unavailable", {}).setdefault(impl, error)
        if checkpoint is not None:
            Path(checkpoint).write_text(json.dumps(result, indent=1))
    return result
