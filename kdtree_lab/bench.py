"""Benchmarks: our CUDA kernel, the Triton twin and SGLang's own Triton kernels on identical verify buffers.

Timing is a median over CUDA-event samples after warm-up; inputs rotate over several pool copies so that a call
does not find its latent KV in L2 (as in a model, where each layer has its own KV); the reduce is included. By
default each sample is the replay of a CUDA graph that captured one call (how SGLang runs verify, and the GPU time
alone); ``method="eager"`` times eager calls instead, which adds the host's launch overhead (for our CUDA kernel
~0.1 ms of Python dispatch and metadata checks, visible on small shapes).
Ceilings (device-to-device copy bandwidth, bf16 GEMM rate) are measured in the same run.

Floors per shape: bytes = B*L*576*2 (the latent KV read once), FLOPs = 2*(576+512)*B*N*H*(L+N); the floor is
max(bytes / copy bandwidth, FLOPs / GEMM rate).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from .batch import KV_DTYPES, VerifyBatch, build_verify_batch
from .impls import CUDA_IMPLS, IMPLS
from .mla import D_QK, D_V

L2_ROTATE_BYTES = 256 << 20  # rotate inputs until this many KV bytes separate two uses of one copy
MAX_COPIES = 16
OURS = ("cuda", "cuda_sm120", "triton")  # what the presets time of ours
TIMEABLE = tuple(IMPLS)  # any registered implementation, when asked for (--impl)


@dataclass(frozen=True)
class Ceilings:
    copy_gbps: float  # device-to-device copy, bytes read + written per second / 1e9
    gemm_tflops: float  # bf16 matmul 8192^3
    mma_sync_tflops: float | None = None  # bf16 mma.sync m16n8k16 loop (the instruction sm_120 has); None: not run


@dataclass(frozen=True)
class Shape:
    batch: int
    prefix: int
    draft: int
    heads: int
    mask: str = "tree"
    kv: str = "bf16"  # the KV pool, a batch.KV_DTYPES name: bf16, or fp8 (SGLang's fp8_e4m3: one byte per element)

    @property
    def kv_bytes(self) -> int:
        return self.batch * self.prefix * D_QK * KV_DTYPES[self.kv].itemsize

    @property
    def flops(self) -> float:
        return 2.0 * (D_QK + D_V) * self.batch * self.draft * self.heads * (self.prefix + self.draft)


def row_kv(row: dict) -> str:
    """A result row's KV pool: rows carry ``kv`` only when it is not bf16 (so bf16 rows keep their earlier form)."""
    return row.get("kv", "bf16")


# Implementations that do less than the verify's work on a shape: SGLang's one-token decode reads the same KV but
# computes one query token per request, not N. Each row is credited with the work its implementation does.
ONE_TOKEN = {"sglang_decode_1tok"}


def work_shape(impl: str, shape: Shape) -> Shape:
    """The shape of the work ``impl`` does when timed on ``shape`` (its bytes and FLOPs)."""
    return Shape(shape.batch, shape.prefix, 1, shape.heads, "causal", shape.kv) if impl in ONE_TOKEN else shape


def derived(impl: str, shape: Shape, ms: float, ceilings: dict) -> dict:
    """A row's rates, floor and roofline fraction from its time (ms) and its implementation's own work."""
    w = work_shape(impl, shape)
    t = ms * 1e-3
    t_mem = w.kv_bytes / (ceilings["copy_gbps"] * 1e9)
    t_cmp = w.flops / (ceilings["gemm_tflops"] * 1e12)
    floor = max(t_mem, t_cmp)
    return {"GB/s": round(w.kv_bytes / t / 1e9, 1), "TFLOP/s": round(w.flops / t / 1e12, 2),
            "floor_ms": round(floor * 1e3, 4), "bound": "memory" if t_mem >= t_cmp else "compute",
            "of_roofline": round(floor / t, 3), **({"work_N": w.draft} if w.draft != shape.draft else {})}


def recredit(result: dict) -> int:
    """Recompute every row's rates and roofline fraction from its time and its implementation's own work (results
    written before one-token decode rows were credited with one token). Returns how many rows changed."""
    changed = 0
    for r in result["rows"]:
        if r["impl"] not in ONE_TOKEN:
            continue  # credited with their own work already (recomputing from the rounded ms would only jitter)
        new = derived(r["impl"], Shape(r["B"], r["L"], r["N"], r["H"], r.get("mask", "tree")), r["ms"],
                      result["ceilings"])
        if any(r.get(k) != v for k, v in new.items()):
            r.update(new)
            changed += 1
    return changed


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


def summary(rows: list[dict]) -> list[dict]:
    """One line per implementation: shapes timed, roofline fraction (worst / median / best), median speed-up over
    SGLang's verify."""
    out = []
    for impl, kv in sorted({(r["impl"], row_kv(r)) for r in rows}):
        mine = [r for r in rows if r["impl"] == impl and row_kv(r) == kv]
        roof = sorted(r["of_roofline"] for r in mine)
        up = [r["speedup_vs_sglang_verify"] for r in mine if "speedup_vs_sglang_verify" in r]
        out.append({"impl": impl if kv == "bf16" else f"{impl} ({kv} KV)", "shapes": len(mine), "of roofline: worst": roof[0],
                    "median": statistics.median(roof), "best": roof[-1],
                    "median speed-up vs SGLang verify": statistics.median(up) if up else None})
    return out


def fp8_speedups(rows: list[dict]) -> list[dict]:
    """Per implementation and shape timed over both pools: the time over a bf16 pool / the time over an fp8 pool
    (issue 17's targets: >= 1.7 on memory-bound shapes, >= 1 on compute-bound ones) and the fp8 row's bound."""
    by = {(r["impl"], r["B"], r["L"], r["N"], r["H"], row_kv(r)): r for r in rows}
    out = []
    for (impl, b, length, n, h, kv), r in sorted(by.items()):
        base = by.get((impl, b, length, n, h, "bf16"))
        if kv == "fp8" and base:
            out.append({"impl": impl, "B": b, "L": length, "N": n, "H": h, "bf16 ms": base["ms"], "fp8 ms": r["ms"],
                        "bf16 / fp8": round(base["ms"] / r["ms"], 3), "bound (fp8)": r["bound"]})
    return out


def median_ms(fn: Callable[[int], None], copies: int, warmup: int = 3, iters: int = 20) -> tuple[float, int]:
    """Median CUDA-event time (ms) of ``fn(i)`` with ``i`` cycling over ``copies`` input sets; and the sample count."""
    for i in range(warmup):
        fn(i % copies)
    torch.cuda.synchronize()
    samples = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i % copies)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples), len(samples)


def graph_median_ms(fn: Callable[[int], None], copies: int, warmup: int = 3,
                    iters: int = 20) -> tuple[float, int]:
    """Median CUDA-event time (ms) of replaying a CUDA graph that holds one ``fn(i)`` (one graph per input copy):
    the GPU time of a call as SGLang runs verify, without the host's launch overhead."""
    for i in range(max(warmup, copies)):  # JIT compilation, kernel attributes, allocator warm-up
        fn(i % copies)
    torch.cuda.synchronize()
    graphs = []
    for i in range(copies):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(i)
        graphs.append(g)
    torch.cuda.synchronize()
    return median_ms(lambda i: graphs[i].replay(), copies, warmup=1, iters=iters)


def timed(fn: Callable[[int], None], copies: int, method: str = "graph", warmup: int = 3,
          iters: int = 20) -> tuple[float, int, str]:
    """(median ms, samples, method used). ``method`` "graph" falls back to eager timing, and says so, when a
    call cannot be captured."""
    if method not in ("graph", "eager"):
        raise ValueError(f"timing method: expected graph or eager, got {method!r}")
    if method == "graph":
        try:
            return (*graph_median_ms(fn, copies, warmup, iters), "graph")
        except Exception as exc:  # noqa: BLE001 - any capture failure: time eagerly and record why
            torch.cuda.synchronize()
            return (*median_ms(fn, copies, warmup, iters), f"eager (capture failed: {type(exc).__name__})")
    return (*median_ms(fn, copies, warmup, iters), "eager")


def measure_ceilings(copy_bytes: int = 2 << 30, gemm_n: int = 8192) -> Ceilings:
    """Copy bandwidth (read + write) and bf16 GEMM rate on this GPU, medians of event-timed runs."""
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    copy_ms, _ = median_ms(lambda i: dst.copy_(src), 1, warmup=3, iters=10)
    del src, dst
    a = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    gemm_ms, _ = median_ms(lambda i: a @ b, 1, warmup=3, iters=10)
    return Ceilings(copy_gbps=2 * copy_bytes / (copy_ms * 1e-3) / 1e9,
                    gemm_tflops=2 * gemm_n ** 3 / (gemm_ms * 1e-3) / 1e12, mma_sync_tflops=mma_sync_tflops())


def mma_sync_tflops(iters: int = 4096) -> float:
    """The bf16 mma.sync m16n8k16 rate (fp32 accumulate) of this GPU, TFLOP/s: the library's ceiling loop on 8
    CTAs per SM, median of event-timed launches."""
    from . import loader

    lib = loader.library().lib
    blocks = 8 * torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.empty(blocks * 8, dtype=torch.float32, device="cuda")

    def run(_: int) -> None:
        status = lib.kdtree_verify_mma_ceiling(blocks, iters, sink.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise loader.KernelCallError(f"kdtree_verify_mma_ceiling returned {status}")

    ms, _ = median_ms(run, 1, warmup=3, iters=10)
    return blocks * 8 * iters * 8 * 4096 / (ms * 1e-3) / 1e12


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
    """Median time of our CUDA kernel (a configuration named in loader.CUDA_IMPLS) or the Triton twin
    (split + reduce) on ``shape``."""
    from . import dispatch, loader

    if impl not in TIMEABLE:
        raise ValueError(f"impl: expected one of {TIMEABLE}, got {impl!r}")
    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    ns = nsplit or dispatch.nsplit_for(impl, shape.batch, shape.draft, shape.heads)
    ws = dispatch.workspace(shape.batch, shape.draft, shape.heads, ns)
    ms, n, how = timed(lambda i: dispatch.verify(impl, batches[i], ws, ns), copies, method)
    kernel = None
    if impl in CUDA_IMPLS:
        with loader.impl_config(impl):
            kernel = loader.library().selected_config(kv=shape.kv)["kernel"]  # fp8: the e4m3 variant that ran
    return Timing(impl, shape, ms, n, ns, how, kernel)


def time_sglang_extend(shape: Shape, iters: int = 5, method: str = "graph") -> Timing:
    """SGLang 0.5.23's ``extend_attention_fwd`` as TritonAttnBackend calls it for MLA target verify."""
    from .sglang_kernels import extend_attention

    copies = min(_copies(shape), 4)
    batches = shape_batches(shape, copies)

    def run(i: int) -> None:
        extend_attention(batches[i])

    ms, n, how = timed(run, copies, method, warmup=1, iters=iters)
    return Timing("sglang_extend", shape, ms, n, method=how)


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
    splits = torch.empty(bsz, dtype=torch.int32, device="cuda")
    seq_lens = torch.full((bsz,), shape.prefix, dtype=torch.int32, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    get_num_kv_splits_triton[(1,)](splits, seq_lens, bsz, 1, heads, 1, max_kv_splits, sms,
                                   MAX_NUM_SEQ=max(16, triton.next_power_of_2(bsz)))

    def run(i: int) -> None:
        b = batches[i]
        decode_attention_fwd(b.q, b.k_buffer, b.v_buffer, b.o, b.kv_indptr, b.kv_indices, logits, lse, splits,
                             max_kv_splits, b.sm_scale, b.k_scale, b.v_scale, has_mla=True, use_pdl=True)

    ms, n, how = timed(run, copies, method)
    return Timing("sglang_decode_1tok", shape, ms, n, method=how)


def streaming_fits(rows: list[dict], ceilings: dict, impl: str = "cuda", short: int = 32_768,
                   long: int = 200_000) -> list[dict]:
    """Per (B, N, H) series of ``impl`` timed at prefix lengths ``short`` and ``long`` (tokens): the streaming rates
    (KV bytes and FLOPs added over the time added: GB/s, TFLOP/s, and as fractions of the ceilings) and the
    intercept (ms), the part of a call's time the prefix length does not explain; a straight line through the two
    points. Separates a kernel's per-token speed from its fixed cost per call."""
    ms = {(r["B"], r["L"], r["N"], r["H"]): r["ms"] for r in rows if r["impl"] == impl and row_kv(r) == "bf16"}
    out = []
    for (b, length, n, h), t2 in sorted(ms.items()):
        t1 = ms.get((b, short, n, h))
        if length != long or t1 is None or t2 <= t1:
            continue
        s1, s2 = Shape(b, short, n, h), Shape(b, long, n, h)
        dt = (t2 - t1) * 1e-3
        gbps, tflops = (s2.kv_bytes - s1.kv_bytes) / dt / 1e9, (s2.flops - s1.flops) / dt / 1e12
        out.append({"B": b, "N": n, "H": h, "GB/s": round(gbps, 1), "of_copy": round(gbps / ceilings["copy_gbps"], 3),
                    "TFLOP/s": round(tflops, 2), "of_gemm": round(tflops / ceilings["gemm_tflops"], 3),
                    "intercept_ms": round(t1 - s1.kv_bytes / (gbps * 1e9) * 1e3, 4)})
    return out


def run_grid(shapes: list[Shape], impls: list[str], ceilings: Ceilings | None = None,
             progress: bool = True, method: str = "graph") -> dict:
    """Time every impl on every shape (``method``: graph replays, the default, or eager calls); returns ceilings
    and one row per (impl, shape) with floors and speedups."""
    ceilings = ceilings or measure_ceilings()
    rows = []
    it = shapes
    if progress:
        from .display import progress as bar

        it = bar(shapes, desc="bench", unit="shape")
    have_sglang = sglang_available()
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
    return {"ceilings": asdict(ceilings), "sglang": have_sglang, "timing": method, "rows": rows}


ALL_IMPLS = [*OURS, "sglang_extend", "sglang_decode"]


def preset(name: str) -> list[tuple[Shape, list[str]]]:
    """Named shape grids with the implementations each shape is timed with.

    quick: the headline (B=1, L=200k, H=8, N=16), the reference deployment (B=8), batch 48, and memory- and
    compute-bound corners. issue: the full grid H {8,16,64,128} x N {4,16,64} x B {1,8,48} x L {4k,32k,200k}
    (our kernels; SGLang where its time stays under a few seconds per call)."""
    if name == "quick":
        out = [(Shape(1, 200_000, 16, 8), ALL_IMPLS), (Shape(8, 200_000, 16, 8), ALL_IMPLS),
               (Shape(48, 32_768, 16, 8), ALL_IMPLS)]
        ours = list(OURS)
        for b in (1, 8):
            out += [(Shape(b, 200_000, 4, 8), ours), (Shape(b, 200_000, 4, 16), ours)]
        out += [(Shape(1, 200_000, 16, 16), ours), (Shape(1, 200_000, 16, 64), ours),
                (Shape(1, 200_000, 64, 128), ours), (Shape(1, 32_768, 64, 16), ours)]
        return out
    if name == "issue":
        out = []
        for h in (8, 16, 64, 128):
            for n in (4, 16, 64):
                for b in (1, 8, 48):
                    for length in (4096, 32_768, 200_000):
                        s = Shape(b, length, n, h)
                        slow = b * h * math.ceil(n / 32) > 132 and length > 32_768
                        out.append((s, ["cuda", "triton"] + ([] if slow else ["sglang_extend", "sglang_decode"])))
        return out
    if name == "fp8":  # issue 17: each shape over a bf16 pool and over an fp8 one, in one run
        out = []
        for b, length, n, h in ((1, 200_000, 4, 8), (8, 200_000, 4, 8), (8, 32_768, 4, 16), (1, 200_000, 16, 8),
                                (8, 200_000, 16, 8), (1, 200_000, 64, 128)):
            for kv in ("bf16", "fp8"):
                out.append((Shape(b, length, n, h, kv=kv), [*OURS, "sglang_extend"]))
        return out
    raise ValueError(f"unknown bench preset {name!r}: expected quick, issue or fp8")


def preset_items(name: str, impls: list[str] | None = None) -> list[tuple[Shape, list[str]]]:
    """Preset ``name``'s (shape, implementations) pairs, filtered to ``impls``; a CUDA kernel configuration the
    preset does not name (cuda_rows32, cuda_wgmma) is timed wherever the preset times ``cuda``."""
    out = []
    for shape, shape_impls in preset(name):
        chosen = [i for i in shape_impls if impls is None or i in impls]
        chosen += [i for i in impls or [] if i not in shape_impls and i in TIMEABLE and "cuda" in shape_impls]
        out.append((shape, chosen))
    return out


def run_preset(name: str, impls: list[str] | None = None, progress: bool = True,
               checkpoint: Path | None = None, method: str = "graph", resume: dict | None = None) -> dict:
    """Time preset ``name`` (ceilings first). ``impls`` filters the implementations the preset names per shape;
    a CUDA kernel configuration it names that the preset does not (cuda_rows32, cuda_wgmma) is timed wherever
    the preset times ``cuda``. ``checkpoint``: rewrite this JSON file after every shape, so that an
    interrupted run keeps what it measured. ``resume``: an earlier (partial) result of this preset; its rows are
    kept and its shapes skipped."""
    ceilings = measure_ceilings()
    done = {(r["B"], r["L"], r["N"], r["H"], row_kv(r)) for r in resume["rows"]} if resume else set()
    rows, have = list(resume["rows"]) if resume else [], sglang_available()
    items = [(s, i) for s, i in preset_items(name, impls) if (s.batch, s.prefix, s.draft, s.heads, s.kv) not in done]
    if progress:
        from .display import progress as bar

        items = bar(items, desc=f"bench {name}", unit="shape")
    result = {"preset": name, "ceilings": asdict(ceilings), "sglang": have, "timing": method, "rows": rows}
    if resume:
        result["resumed_from"] = {"rows": len(resume["rows"]), "ceilings": resume.get("ceilings")}
    for shape, chosen in items:
        rows += run_grid([shape], chosen, ceilings, progress=False, method=method)["rows"]
        if checkpoint is not None:
            Path(checkpoint).write_text(json.dumps(result, indent=1))
    return result
