"""Ablations of the 32-row e4m3 form (timing library; results are wrong by design, only times count) and the
mma.sync rate against the warps a scheduler runs (issue 52: what bounds a 32-key tile at ~1,760 cycles?).

    KDT_E4M3_TIMING=1 python3 ablate.py OUT.json NAME     # times the tree as it is, under NAME
    python3 ablate.py OUT.json mma                         # f16 m16n8k16 rate with 1, 2, 4, 8 CTAs of 8 warps per SM
"""
import json
import sys

import torch

from kdtree_lab.checks.bench import run_grid
from kdtree_lab.checks.roofline import Shape
from kdtree_lab.checks.timing import measure_ceilings, median_ms

out, name = sys.argv[1], sys.argv[2]
if name == "mma":
    from kdtree_lab.kernels import abi, loader

    lib = loader.library().lib
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for per_sm in (1, 2, 4, 8):
        blocks, iters = per_sm * sms, 4096
        sink = torch.empty(blocks * 8, dtype=torch.float32, device="cuda")
        code, flops = abi.MMA_KINDS["f16"]
        run = lambda _: lib.kdtree_verify_mma_ceiling(blocks, iters, code, sink.data_ptr(),
                                                      torch.cuda.current_stream().cuda_stream)
        ms, _ = median_ms(run, 1, warmup=3, iters=10)
        tflops = blocks * 8 * iters * 8 * flops / (ms * 1e-3) / 1e12
        clock = torch.cuda.clock_rate() if hasattr(torch.cuda, "clock_rate") else None
        rows.append({"ctas_per_sm": per_sm, "warps_per_scheduler": 2 * per_sm, "chains": 8, "tflops": tflops,
                     "ms": ms, "sm_clock_mhz": clock})
        print(f"mma f16: {2 * per_sm} warps per scheduler x 8 chains: {tflops:.0f} TFLOP/s", flush=True)
    result = {"mma": rows}
else:
    shapes = [Shape(1, 200_000, 4, 8, kv="fp8"), Shape(8, 200_000, 4, 8, kv="fp8"), Shape(1, 32_768, 4, 8, kv="fp8")]
    result = run_grid(shapes, ["cuda_sm120_e4m3_32"], measure_ceilings(), progress=False)
    for r in result["rows"]:
        print(f"{name:16s} B={r['B']} L={r['L']} N={r['N']} H={r['H']} {r['ms']:.4f} ms", flush=True)
json.dump(result, open(out, "w"), indent=1)
