"""The benchmark's timing harness: medians of CUDA-event samples after warm-up, as replays of a captured CUDA graph
(the GPU time of a call, as SGLang runs verify) or as eager calls, and the ceilings measured in the same run
(copy bandwidth, bf16 GEMM rate, the mma.sync rate)."""

from __future__ import annotations

import statistics
from typing import Callable

import torch

from .roofline import Ceilings


def event_samples_ms(fn: Callable[[int], None], copies: int, iters: int) -> list[float]:
    """CUDA-event times (ms) of ``iters`` calls ``fn(i)``, ``i`` cycling over ``copies`` input sets, each timed alone."""
    samples = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i % copies)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def median_ms(fn: Callable[[int], None], copies: int, warmup: int = 3, iters: int = 20) -> tuple[float, int]:
    """Median CUDA-event time (ms) of ``fn(i)`` with ``i`` cycling over ``copies`` input sets; and the sample count."""
    for i in range(warmup):
        fn(i % copies)
    torch.cuda.synchronize()
    samples = event_samples_ms(fn, copies, iters)
    return statistics.median(samples), len(samples)


def capture_graphs(fn: Callable[[int], None], copies: int, warmup: int = 3) -> list:
    """One CUDA graph holding ``fn(i)`` per input copy ``i``, after ``max(warmup, copies)`` eager calls (JIT
    compilation, kernel attributes, allocator warm-up)."""
    for i in range(max(warmup, copies)):
        fn(i % copies)
    torch.cuda.synchronize()
    graphs = []
    for i in range(copies):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(i)
        graphs.append(g)
    torch.cuda.synchronize()
    return graphs


def graph_median_ms(fn: Callable[[int], None], copies: int, warmup: int = 3,
                    iters: int = 20) -> tuple[float, int]:
    """Median CUDA-event time (ms) of replaying a CUDA graph that holds one ``fn(i)`` (one graph per input copy):
    the GPU time of a call as SGLang runs verify, without the host's launch overhead."""
    graphs = capture_graphs(fn, copies, warmup)
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
    """Copy bandwidth (read + write), bf16 GEMM rate and the bf16 and e4m3 mma.sync rates on this GPU, medians of
    event-timed runs."""
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    copy_ms, _ = median_ms(lambda i: dst.copy_(src), 1, warmup=3, iters=10)
    del src, dst
    a = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    gemm_ms, _ = median_ms(lambda i: a @ b, 1, warmup=3, iters=10)
    return Ceilings(copy_gbps=2 * copy_bytes / (copy_ms * 1e-3) / 1e9,
                    gemm_tflops=2 * gemm_n ** 3 / (gemm_ms * 1e-3) / 1e12, mma_sync_tflops=mma_sync_tflops(),
                    mma_e4m3_tflops=mma_sync_tflops(kind="e4m3"))


def mma_sync_tflops(iters: int = 4096, kind: str = "bf16") -> float:
    """The mma.sync rate (fp32 accumulate) of this GPU, TFLOP/s, for ``kind`` (abi.MMA_KINDS: bf16 or f16
    m16n8k16, e4m3 m16n8k32): the library's ceiling loop on 8 CTAs per SM, median of event-timed launches."""
    from ..kernels import abi, loader

    code, flops = abi.MMA_KINDS[kind]
    lib = loader.library().lib
    blocks = 8 * torch.cuda.get_device_properties(0).multi_processor_count
    sink = torch.empty(blocks * 8, dtype=torch.float32, device="cuda")

    def run(_: int) -> None:
        status = lib.kdtree_verify_mma_ceiling(blocks, iters, code, sink.data_ptr(),
                                               torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise loader.KernelCallError(f"kdtree_verify_mma_ceiling returned {status}")

    ms, _ = median_ms(run, 1, warmup=3, iters=10)
    return blocks * 8 * iters * 8 * flops / (ms * 1e-3) / 1e12
