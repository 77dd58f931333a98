"""Fixed cost per call (issue 18, GPU): graph-replay medians of our kernels at B = 1 over short and long prefixes
and a sweep of split counts, beside the floor of any two-kernel graph on the same GPU.

The split count is fixed when a graph is captured and the prefix length is not, so a short prefix runs with the
split count chosen for a long one: the rows at L = 128 are the cost of a call with almost no prefix, and the sweep
shows what the empty splits (skipped by the split kernel, still merged by the combine) cost. A development tool;
the benchmark of record is ``kdtree-lab bench``. With ``--repeat K`` each automatic-split row also gets its marginal
cost inside a graph of K calls, and the run the marginal cost of one and of two one-element kernels (the launches);
with ``--anatomy`` too, its kernels' own durations and the gaps between them in that graph (the profiler's record,
``kdtree_lab.checks.call_anatomy``).

    python3 scripts/fixed_cost.py --out $OUT/fixed-cost.json [--impls cuda,cuda_sm120] [--repeat 10 [--anatomy]]
        [--kv fp8]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

import torch

from kdtree_lab.kernels.attention import VerifyAttention, batch_args
from kdtree_lab.checks.bench import shape_batches, time_ours
from kdtree_lab.checks.call_anatomy import anatomy, profile_graph
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import graph_median_ms, measure_ceilings
from kdtree_lab.kernels.build import timing_conditions

LENGTHS = (128, 4096, 32_768, 200_000)
NSPLITS = (1, 4, 16, 32, 66, 131)


def graph_floor_ms(kernels: int) -> float:
    """Median replay time of a graph holding ``kernels`` dependent one-element kernels, timed like every benchmark
    row: the floor of a call made of that many kernels (2: split + combine; 3: an e4m3 form's Q pass, split and
    combine; 1: a design that merges in-kernel)."""
    x = torch.zeros(1, device="cuda")
    return graph_median_ms(lambda i: [x.add_(1) for _ in range(kernels)], 1, iters=200)[0]


def marginal_floor_ms(kernels: int, repeat: int) -> float:
    """What ``kernels`` dependent one-element kernels add inside a larger graph, timed like marginal_ms: the launch
    share of a call's marginal cost (2: split + combine; an e4m3 form's call launches 3), so the rest is the kernels'
    own work."""
    return (graph_floor_ms(kernels * repeat) - graph_floor_ms(kernels)) / (repeat - 1)


def one_call(impl: str, shape: Shape, nsplit: int) -> Callable[[], None]:
    """One verify call of ``impl`` at ``shape`` with ``nsplit`` splits on fresh inputs, ready to capture."""
    batch = shape_batches(shape, 1)[0]
    attn = VerifyAttention(shape.batch, shape.draft, shape.heads, shape.kv, impl=impl, nsplit=nsplit)
    args = batch_args(batch)
    return lambda: attn.run(*args)


def marginal_ms(call: Callable[[], None], repeat: int) -> float:
    """What one call adds inside a larger graph (as in SGLang's decode graph, where verify is one node among many):
    (replay of ``repeat`` back-to-back calls - replay of one) / (repeat - 1), so the replay's own floor cancels."""
    one = graph_median_ms(lambda i: call(), 1, iters=100)[0]
    many = graph_median_ms(lambda i: [call() for _ in range(repeat)], 1, iters=100)[0]
    return (many - one) / (repeat - 1)


def call_anatomy(call: Callable[[], None], repeat: int, replays: int = 20) -> dict:
    """The kernels of ``repeat`` back-to-back calls in one graph, as the profiler records their replays: each
    kernel's median duration and the median gaps between them (us), beside the span per call."""
    return anatomy(profile_graph(call, repeat, replays), replays, repeat)


def brief(row: dict) -> str:
    """An automatic-split row as the one line a device call's log shows (after ``auto``): impl, L, N, the end-to-end
    and marginal us, and the anatomy's kernel medians and span per call where it has them."""
    out = f"{row['impl']} {row['L']} {row['N']} e2e {1e3 * row['ms']:.1f}"
    if "marginal_ms" in row:
        out += f" marginal {1e3 * row['marginal_ms']:.1f}"
    if "anatomy" in row:
        a = row["anatomy"]
        kernels = {n: v["median_us"] for n, v in a.get("kernels", {}).items()}
        out += f" kernels {kernels} span {a.get('span_per_call_us')} {a.get('error', '')}".rstrip()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--impls", default="cuda,cuda_sm120")
    ap.add_argument("--drafts", default="4,16")
    ap.add_argument("--kv", default="bf16", choices=("bf16", "fp8"), help="the KV pool (default bf16)")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="prefix lengths (tokens), comma list")
    ap.add_argument("--nsplit", default=",".join(map(str, NSPLITS)), help="split counts beside the automatic one")
    ap.add_argument("--repeat", type=int, default=0,
                    help="also time each automatic-split row as the marginal cost of one call among this many "
                         "(0: not; the inputs stay the same across the calls, so short prefixes sit in L2)")
    ap.add_argument("--anatomy", action="store_true",
                    help="with --repeat: also each automatic-split row's kernel durations and gaps in that graph")
    a = ap.parse_args(argv)
    result = {"gpu": torch.cuda.get_device_name(0), **timing_conditions(), "ceilings": measure_ceilings().__dict__,
              "one_kernel_floor_ms": round(graph_floor_ms(1), 5), "two_kernel_floor_ms": round(graph_floor_ms(2), 5),
              "rows": []}
    if a.repeat > 1:
        result["marginal_floor_ms"] = {k: round(marginal_floor_ms(k, a.repeat), 5) for k in (1, 2)}
    print("one- and two-kernel graph floors (ms):", result["one_kernel_floor_ms"], result["two_kernel_floor_ms"],
          result.get("marginal_floor_ms", ""), flush=True)
    for impl in a.impls.split(","):
        for n in (int(x) for x in a.drafts.split(",")):
            auto = VerifyAttention(1, n, 8, a.kv, impl=impl).nsplit(1)
            for length in (int(x) for x in a.lengths.split(",")):
                for nsplit in sorted({int(x) for x in a.nsplit.split(",")} | {auto}):
                    shape = Shape(1, length, n, 8, kv=a.kv)
                    t = time_ours(impl, shape, nsplit=nsplit)
                    row = {"impl": impl, "kv": a.kv, "B": 1, "L": length, "N": n, "H": 8, "nsplit": nsplit,
                           "auto": nsplit == auto, "ms": round(t.ms, 5), "timing": t.method, "kernel": t.kernel}
                    if a.repeat > 1 and nsplit == auto:
                        call = one_call(impl, shape, nsplit)
                        row["marginal_ms"] = round(marginal_ms(call, a.repeat), 5)
                        if a.anatomy:
                            try:
                                row["anatomy"] = call_anatomy(call, a.repeat)
                            except Exception as exc:  # noqa: BLE001 - the profiler's record is optional: say why
                                row["anatomy"] = {"error": f"{type(exc).__name__}: {exc}"}
                    result["rows"].append(row)
                    print(json.dumps(row), flush=True)
                    if row["auto"]:
                        print("auto", brief(row), flush=True)
                    with open(a.out, "w") as f:  # after every row: a run cut off keeps what it measured
                        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
