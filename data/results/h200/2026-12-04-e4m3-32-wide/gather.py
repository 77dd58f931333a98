"""Is the 32-row fp8 call bound by gathering 576-byte KV rows from random pool slots? (issue 52)

1. A gather-read ceiling: a Triton kernel that reads ROWS rows of ROW bytes at the given slots (32 rows per program,
   an int32 sum each; what a split kernel's loads are without the math), random slots (the benchmark's randperm
   pool) against sorted ones, for fp8 (576 B) and bf16 (1,152 B) rows; CUDA-event medians.
2. Our kernels on the same shapes with each request's kv_indices random (as every benchmark row) and sorted
   (the same slots, ascending: nearly contiguous), graph-replay medians.

    [KDT_E4M3_TIMING=1] python3 gather.py OUT.json [ceiling] [impl ...]
"""
import json
import sys

import torch
import triton
import triton.language as tl

from kdtree_lab.checks.bench import shape_batches
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import graph_median_ms
from kdtree_lab.kernels.attention import VerifyAttention, batch_args
from kdtree_lab.lab.provenance import provenance


@triton.jit
def gather_sum(pool, idx, out, n_rows, WORDS: tl.constexpr, COLS: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    live = r < n_rows
    ix = tl.load(idx + r, mask=live, other=0)
    c = tl.arange(0, COLS)
    v = tl.load(pool + ix[:, None] * WORDS + c[None, :], mask=live[:, None] & (c[None, :] < WORDS), other=0)
    tl.store(out + pid, tl.sum(tl.sum(v, axis=1), axis=0))


def events_ms(fn, iters=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


def ceiling(rows=1_600_000):
    res = []
    for row_bytes in (576, 1152):
        words = row_bytes // 4
        pool = torch.randint(0, 1 << 20, (rows + 64, words), dtype=torch.int32, device="cuda")
        out = torch.empty(triton.cdiv(rows, 32), dtype=torch.int32, device="cuda")
        for layout in ("random", "sorted", "arange"):
            perm = torch.randperm(rows + 64, device="cuda")[:rows]
            idx = {"random": perm, "sorted": perm.sort().values, "arange": torch.arange(rows, device="cuda")}[layout]
            fn = lambda: gather_sum[(triton.cdiv(rows, 32),)](pool, idx, out, rows, WORDS=words,
                                                              COLS=triton.next_power_of_2(words), BLOCK_R=32)
            ms = events_ms(fn)
            res.append({"row_bytes": row_bytes, "layout": layout, "rows": rows, "ms": ms,
                        "GB/s": rows * row_bytes / ms / 1e6})
            print(f"gather {row_bytes} B rows, {layout}: {ms:.4f} ms, {res[-1]['GB/s']:.0f} GB/s", flush=True)
        del pool
    return res


def kernels(impls):
    res = []
    for impl in impls:
        kv = "bf16" if impl == "cuda_sm120" else "fp8"
        for shp in ((1, 200_000, 4, 8), (8, 200_000, 4, 8), (1, 200_000, 16, 8)):
            if impl != "cuda_sm120_e4m3" and shp[2] * shp[3] > 32:
                continue
            shape = Shape(*shp, kv=kv)
            batch = shape_batches(shape, 1)[0]
            attn = VerifyAttention(shape.batch, shape.draft, shape.heads, kv, impl=impl)
            for layout in ("random", "sorted"):
                if layout == "sorted":
                    ip = batch.kv_indptr.tolist()
                    for b in range(shape.batch):
                        seg = batch.kv_indices[ip[b]:ip[b + 1]]
                        seg.copy_(seg.sort().values)
                args = batch_args(batch)
                ms = graph_median_ms(lambda i: attn.run(*args), 1, iters=50)[0]
                res.append({"impl": impl, "B": shp[0], "L": shp[1], "N": shp[2], "H": shp[3], "kv": kv,
                            "layout": layout, "ms": ms})
                print(f"{impl:20s} {kv} B={shp[0]} L={shp[1]} N={shp[2]} H={shp[3]} {layout:6s} {ms:.4f} ms", flush=True)
            del batch
            torch.cuda.empty_cache()
    return res


if __name__ == "__main__":
    out, rest = sys.argv[1], sys.argv[2:]
    result = {"provenance": provenance("python3 " + " ".join(sys.argv))}
    if "ceiling" in rest:
        result["gather"] = ceiling()
    result["kernels"] = kernels([x for x in rest if x != "ceiling"])
    open(out, "w").write(json.dumps(result, indent=1) + "\n")
