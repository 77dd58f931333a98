"""The H200 inputs that would close the card model's largest gaps (GPU; docs/results.md, "The card model").

1. SGLang's decode kernel (``decode_attention_fwd``, the lineage of vLLM's TRITON_MLA decode) at the shapes of the
   published RTX PRO 6000 microbenchmark (voipmonitor/rtx6kpro, 8 heads, B 1 at L 1000 / 10000 / 30000 / 100000,
   B 4 and 8 at 30000), over a bf16 and an fp8 pool, with SGLang's own split rule and with the split counts vLLM used
   there (1 / 32 / 64 / 128 / 64 / 64), each timed as published (CUDA events around one eager call, median of 40)
   and as the grid times (a graph replay of one call). Today's checks start from SGLang's bf16 rows at its own split
   counts, interpolated in L: this run gives the same kernel, pool and splits as the card ran.
2. The H200's SM clock under an mma.sync load (the ceiling loop, bf16) and under the sm_120 kernel's second
   generation at the headline shape in a loop, sampled with nvidia-smi while they run: the model's H200 clock is
   today Nsight Compute's SM Frequency on the first sm_120 kernel (1.80 GHz).

    python3 scripts/sm120_check_inputs.py --out $OUT/sm120-check-inputs.json

Writes the JSON after every row (a run cut off keeps what it measured), with its provenance.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

# (B, L, vLLM's split count) of the published microbenchmark (models/kimi-k26-mtp-long-ctx-wip/README.md, c982faa)
PUBLISHED = ((1, 1000, 1), (1, 10_000, 32), (1, 30_000, 64), (1, 100_000, 128), (4, 30_000, 64), (8, 30_000, 64))
HEADS = 8
MAX_SPLITS = 256


def sample_clocks(stop: threading.Event, into: list[int], period_s: float = 0.1) -> None:
    """Append nvidia-smi's current SM clock (MHz) every ``period_s`` until ``stop`` is set."""
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip().isdigit():
            into.append(int(out.stdout.strip()))
        time.sleep(period_s)


def clock_under(fn, seconds: float) -> dict:
    """Run ``fn`` repeatedly for ``seconds`` while sampling the SM clock: the median and range after the first
    second (the ramp)."""
    import torch

    samples: list[int] = []
    stop = threading.Event()
    t = threading.Thread(target=sample_clocks, args=(stop, samples), daemon=True)
    start = time.time()
    t.start()
    while time.time() - start < seconds:
        fn()
        torch.cuda.synchronize()
    stop.set()
    t.join()
    steady = samples[len(samples) // max(1, int(seconds)):] or samples
    if not steady:
        raise RuntimeError("nvidia-smi gave no clock sample")
    return {"median_mhz": statistics.median(steady), "min_mhz": min(steady), "max_mhz": max(steady),
            "samples": len(steady), "seconds": seconds}


def decode_timer(b: int, length: int, kv: str, splits: int | None):
    """(run(i), copies, the split count used) for SGLang's decode kernel at (b, length, HEADS) over a ``kv`` pool:
    SGLang's own split rule when ``splits`` is None, else that many splits per request."""
    import torch
    import triton
    from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

    from kdtree_lab.checks.bench import _copies, shape_batches
    from kdtree_lab.checks.roofline import Shape
    from kdtree_lab.core.mla import D_V

    one = Shape(b, length, 1, HEADS, "causal", kv)
    copies = _copies(one)
    batches = shape_batches(one, copies)
    logits = torch.empty(b, HEADS, MAX_SPLITS, D_V, dtype=torch.float32, device="cuda")
    lse = torch.empty(b, HEADS, MAX_SPLITS, dtype=torch.float32, device="cuda")
    kv_splits = torch.empty(b, dtype=torch.int32, device="cuda")
    if splits is None:
        seq_lens = torch.full((b,), length, dtype=torch.int32, device="cuda")
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        get_num_kv_splits_triton[(1,)](kv_splits, seq_lens, b, 1, HEADS, 1, MAX_SPLITS, sms,
                                       MAX_NUM_SEQ=max(16, triton.next_power_of_2(b)))
    else:
        kv_splits.fill_(splits)

    def run(i: int) -> None:
        x = batches[i]
        decode_attention_fwd(x.q, x.k_buffer, x.v_buffer, x.o, x.kv_indptr, x.kv_indices, logits, lse, kv_splits,
                             MAX_SPLITS, x.sm_scale, x.k_scale, x.v_scale, has_mla=True, use_pdl=True)

    return run, copies, int(kv_splits[0].item())


def eager_median_ms(run, copies: int, iters: int = 40) -> float:
    """CUDA events around one eager call each, inputs rotated, median (the published microbenchmark's timing)."""
    from kdtree_lab.checks.timing import median_ms

    return median_ms(run, copies, warmup=3, iters=iters)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the JSON to write")
    ap.add_argument("--clock-seconds", type=float, default=20.0, help="seconds of each clock measurement")
    a = ap.parse_args(argv)
    if a.clock_seconds < 2:
        print(f"sm120_check_inputs: --clock-seconds: expected at least 2, found {a.clock_seconds:g}", file=sys.stderr)
        return 2
    try:
        import torch

        if not torch.cuda.is_available():
            print("sm120_check_inputs: needs a CUDA GPU, found none", file=sys.stderr)
            return 2
        from kdtree_lab.checks.timing import graph_median_ms, measure_ceilings, mma_sync_tflops
        from kdtree_lab.lab.provenance import provenance

        result = {"gpu": torch.cuda.get_device_name(0), "ceilings": measure_ceilings().__dict__, "decode": [],
                  "clocks": {}, "provenance": provenance()}

        def save() -> None:
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)

        for b, length, vllm_splits in PUBLISHED:
            for kv in ("bf16", "fp8"):
                for rule, splits in (("sglang", None), ("vllm", vllm_splits)):
                    run, copies, used = decode_timer(b, length, kv, splits)
                    row = {"B": b, "L": length, "H": HEADS, "kv": kv, "splits_rule": rule, "splits": used,
                           "eager_ms": round(eager_median_ms(run, copies), 5),
                           "graph_ms": round(graph_median_ms(run, copies)[0], 5)}
                    result["decode"].append(row)
                    print(json.dumps(row), flush=True)
                    save()
        result["clocks"]["mma_sync_bf16"] = clock_under(lambda: mma_sync_tflops(iters=65536), a.clock_seconds)
        save()
        from kdtree_lab.checks.bench import shape_batches
        from kdtree_lab.checks.roofline import Shape
        from kdtree_lab.kernels.attention import VerifyAttention, batch_args

        head = Shape(1, 200_000, 16, 8)
        attn = VerifyAttention(head.batch, head.draft, head.heads, head.kv, impl="cuda_sm120_roles")
        args = batch_args(shape_batches(head, 1)[0])
        result["clocks"]["cuda_sm120_roles_headline"] = clock_under(
            lambda: [attn.run(*args) for _ in range(100)], a.clock_seconds)
        save()
        print(json.dumps(result["clocks"]), flush=True)
    except KeyboardInterrupt:
        print("sm120_check_inputs: interrupted (the rows so far are in --out)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
