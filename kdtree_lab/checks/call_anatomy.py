"""Where a call's time goes inside a CUDA graph: each kernel's own duration and the gaps between kernels, read from
the profiler's record of graph replays (CUPTI records each kernel node of a replayed graph). The fixed cost of a
short call (issue 52) is its kernels' work plus the launches between them; the event timing of the benchmark sees
only their sum."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class KernelSpan:
    """One kernel's execution on the GPU: its name and its start and end (ns, the profiler's clock)."""

    name: str
    start_ns: int
    end_ns: int


def short_name(name: str) -> str:
    """A kernel's name without template arguments or parameters: ``kdt::verify_sm120_e4m3_32_kernel(...)`` ->
    ``verify_sm120_e4m3_32_kernel``."""
    base = name.split("(")[0].split("<")[0]
    return base.rsplit("::", 1)[-1].strip()


def anatomy(spans: list[KernelSpan], replays: int, calls: int) -> dict:
    """Summarise ``replays`` replays of a graph holding ``calls`` back-to-back calls: per kernel (short name) its
    count per call and median duration (us); per kernel-to-kernel step the median gap from one's end to the next's
    start (us; negative where the next starts before the first ends, as programmatic dependent launch allows); and
    the median span of a replay (first start to last end) per call (us). Raises ValueError unless the spans cut into
    ``replays`` runs of the same kernel sequence, each ``calls`` times one call's: replays follow each other without
    a mark between them, so a kernel added or dropped in one replay would otherwise shift every attribution after it.
    Under programmatic dependent launch a dependent kernel's duration includes its wait for the one before: read it
    with the gap before it."""
    if replays < 1 or calls < 1:
        raise ValueError(f"replays and calls: expected >= 1, got {replays} and {calls}")
    spans = sorted(spans, key=lambda s: s.start_ns)
    if not spans or len(spans) % (replays * calls):
        raise ValueError(f"kernel spans: expected a multiple of {replays} replays x {calls} calls, got {len(spans)}")
    per = len(spans) // replays
    names = [short_name(s.name) for s in spans]
    call = names[:per // calls]
    for r in range(replays):
        if names[r * per:(r + 1) * per] != call * calls:
            raise ValueError(f"kernel spans: replay {r} is not {calls} x ({', '.join(call)})")
    durations: dict[str, list[float]] = {}
    gaps: dict[str, list[float]] = {}
    span_us = []
    for r in range(replays):
        one = spans[r * per:(r + 1) * per]
        span_us.append((max(s.end_ns for s in one) - one[0].start_ns) / 1e3 / calls)
        for k, s in enumerate(one):
            durations.setdefault(names[k], []).append((s.end_ns - s.start_ns) / 1e3)
            if k:
                gaps.setdefault(f"{names[k - 1]} -> {names[k]}", []).append((s.start_ns - one[k - 1].end_ns) / 1e3)
    return {
        "kernels_per_call": per / calls,
        "kernels": {n: {"per_call": len(d) / replays / calls, "median_us": round(statistics.median(d), 3)}
                    for n, d in durations.items()},
        "gaps": {n: {"count": len(g), "median_us": round(statistics.median(g), 3)} for n, g in gaps.items()},
        "span_per_call_us": round(statistics.median(span_us), 3),
    }


def profile_graph(fn: Callable[[], None], calls: int, replays: int = 20) -> list[KernelSpan]:
    """Capture ``calls`` back-to-back ``fn()`` in one CUDA graph, replay it ``replays`` times under the profiler and
    return every kernel it ran (GPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):  # JIT compilation, kernel attributes, allocator warm-up
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    spans = []
    for e in prof.profiler.kineto_results.events():  # ns clock, where FunctionEvent rounds to us
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        if hasattr(e, "activity_type"):  # kernels only: not memcpy, memset, synchronisation or annotation records
            if e.activity_type() != "kernel":
                continue
        elif any(w in e.name().lower() for w in ("memcpy", "memset", "sync")):
            continue
        spans.append(KernelSpan(e.name(), int(e.start_ns()), int(e.start_ns() + e.duration_ns())))
    return spans
