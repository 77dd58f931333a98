"""How often one warp issues mma.sync on this GPU, by warps per scheduler, accumulator chains and independent ALU work
beside each MMA (issue 52): builds scripts/mma_issue.cu for this GPU with nvcc, runs it, writes its JSON and prints a
table. What it tests: the .cu file's header. Needs a GPU (and nvcc); the build alone runs anywhere
(tests/test_mma_issue.py).

    python scripts/mma_issue.py --out mma-issue.json [--iters 4096]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kdtree_lab.core.cuda_tools import build_benchmark, run_benchmark  # noqa: E402

SOURCE = Path(__file__).with_suffix(".cu")


def build(arch: str, out: Path, nvcc: str | None = None) -> Path:
    """nvcc of mma_issue.cu for ``arch`` (``sm_90a``, ``sm_120a``) into the executable ``out``."""
    return build_benchmark(SOURCE, arch, out, nvcc)


def table(result: dict) -> str:
    """One line a variant: a warp's cycles per MMA of its own and a scheduler's MMAs per 100 cycles."""
    lines = [f"{result['gpu']}, {result['sms']} SMs, {result['iters']} iterations a warp; one CTA a SM, W warps a "
             "scheduler"]
    for r in result["rows"]:
        lines.append(f"  {r['kind']:4} W {r['warps_per_scheduler']}  chains {r['chains']}  FFMA a MMA {r['fill']}  "
                     f"{r['warp_cycles_per_mma']:6.2f} cycles a warp's MMA  "
                     f"{r['mmas_per_100_cycles_per_scheduler']:5.2f} MMAs / 100 cycles a scheduler")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON result")
    ap.add_argument("--iters", type=int, default=4096, help="loop iterations a warp (>= 16)")
    a = ap.parse_args(argv)
    if a.iters < 16:
        ap.error(f"--iters >= 16 expected, found {a.iters}")
    result = run_benchmark(SOURCE, [str(a.iters)])
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
