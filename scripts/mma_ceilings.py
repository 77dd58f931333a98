"""The mma.sync ceilings of this GPU per instruction (bf16 and f16 m16n8k16, e4m3 m16n8k32, fp32 accumulation), at
several CTAs per SM and repeated, beside the copy bandwidth and the bf16 GEMM rate; with the SASS each kind compiles
to on every arch the library holds (on sm_90 ptxas emulates e4m3 mma.sync: conversions to f16 and two f16 MMAs).

    python scripts/mma_ceilings.py --out data/results/h200/<date>-e4m3-ceiling/mma-ceilings.json

What a card's e4m3 rate is predicted from: the measured bf16 rate here, and the card's published e4m3 / bf16 ratio
(kdtree_lab.budget's GPU presets), never this GPU's emulated e4m3 figure."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def sass_counts(library: Path) -> dict:
    """Per arch and kind: the tensor-core and conversion instructions of the ceiling kernel's SASS."""
    from kdtree_lab.core.cuda_tools import find_cuda_tool

    tool = find_cuda_tool("cuobjdump")
    out = {}
    if not tool:
        return {"error": "cuobjdump not found"}
    for arch in ("sm_90a", "sm_120a"):
        for kind, code in (("bf16", 0), ("f16", 1), ("e4m3", 2)):
            text = subprocess.run([tool, "-arch", arch, "-sass", "-fun", f"_ZN3kdt15mma_peak_kernelILi{code}EEEviPf",
                                   str(library)], capture_output=True, text=True).stdout
            ops = Counter(re.findall(r"\b((?:HMMA|QMMA|F2FP)[.A-Z0-9_]*)", text))
            out[f"{arch}/{kind}"] = dict(ops)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--repeats", type=int, default=3, help="times each measurement is repeated (default 3)")
    a = ap.parse_args(argv)
    import torch

    from kdtree_lab.checks import timing
    from kdtree_lab.kernels import abi, loader
    from kdtree_lab.lab.provenance import provenance

    lib = loader.library()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for kind in abi.MMA_KINDS:
        for rep in range(a.repeats):
            rows.append({"kind": kind, "repeat": rep, "tflops": round(timing.mma_sync_tflops(kind=kind), 1)})
            print(f"mma.sync {kind:5s} repeat {rep}: {rows[-1]['tflops']:.1f} TFLOP/s", flush=True)
    ceil = timing.measure_ceilings()
    med = {k: sorted(r["tflops"] for r in rows if r["kind"] == k)[a.repeats // 2] for k in abi.MMA_KINDS}
    result = {"provenance": provenance(" ".join(["python3 scripts/mma_ceilings.py"] + (argv or sys.argv[1:]))),
              "sms": sms, "rows": rows, "median_tflops": med, "ceilings": ceil.__dict__,
              "sass": sass_counts(Path(lib.path)), "e4m3_over_bf16": round(med["e4m3"] / med["bf16"], 3)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"medians: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()) + f" TFLOP/s; e4m3/bf16 "
          f"{result['e4m3_over_bf16']:.2f}; copy {ceil.copy_gbps:.0f} GB/s, GEMM {ceil.gemm_tflops:.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
